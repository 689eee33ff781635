"""Kernel files written the way libraries write them earn what their correctness earns.

Each entry is tests/corpus/simple.py (every regular point, no extra credit) written in one idiom of
public kernel libraries; graded here (tests/grade_in_process.py), each must fail exactly what simple.py
fails.
"""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from grade_in_process import verdicts  # noqa: E402
from hostile import SIMPLE, edit  # noqa: E402

BACKEND_CHOICE = '''import os

import torch

if os.environ.get("MINI_TRITON") == "1" or not torch.cuda.is_available():
    import mini_triton as triton
    tl = triton.language
else:
    import triton
    import triton.language as tl
'''
R = "    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)\n"

STYLES = {
    # Liger's and Triton 3's tutorials' import: plain Triton, libdevice's rsqrt (no backend choice at all)
    "libdevice": edit(SIMPLE, (BACKEND_CHOICE, "import torch\nimport triton\nimport triton.language as tl\n"
                                               "from triton.language.extra.libdevice import rsqrt\n"),
                      (R, "    r = rsqrt(tl.sum(x * x, axis=0) / N + eps)\n")),
    # the older path, and names imported from triton itself
    "cuda_libdevice": edit(SIMPLE, (BACKEND_CHOICE, "import torch\nimport triton\nimport triton.language as tl\n"
                                                    "from triton import next_power_of_2\n"
                                                    "from triton.language.extra.cuda import libdevice\n"),
                           (R, "    r = libdevice.rsqrt(tl.sum(x * x, axis=0) / N + eps)\n"),
                           ("BLOCK=triton.next_power_of_2(N))\n    return y.view",
                            "BLOCK=next_power_of_2(N))\n    return y.view")),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    d = tmp_path_factory.mktemp("styles")
    paths = {}
    for name, source in [("simple", SIMPLE), *STYLES.items()]:
        paths[name] = d / name / "rmsnorm.py"
        paths[name].parent.mkdir()
        paths[name].write_text(source)
    return verdicts(paths)


@pytest.mark.parametrize("name", sorted(STYLES))
def test_a_library_idiom_earns_what_simple_py_earns(graded, name):
    assert graded[name]["failed"].keys() == graded["simple"]["failed"].keys(), graded[name]["failed"]
