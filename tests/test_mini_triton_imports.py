"""Triton's import paths on the simulator (mini_triton/imports.py): a kernel file written against Triton
loads on mini_triton, whether or not Triton is installed, and Triton stays Triton outside."""
import sys

import pytest

import mini_triton
from mini_triton.imports import as_triton


@pytest.mark.parametrize("statement, name, expected", [
    ("import triton", "triton", mini_triton),
    ("import triton.language as tl", "tl", mini_triton.language),
    ("from triton import language as tl", "tl", mini_triton.language),
    ("from triton import cdiv", "cdiv", mini_triton.cdiv),
    ("from triton import jit, autotune, Config, heuristics, next_power_of_2", "heuristics", mini_triton.heuristics),
    ("import triton.language.math as tm", "tm", mini_triton.language.math),
    ("from triton.language.extra import libdevice", "libdevice", mini_triton.language.extra.libdevice),
    ("from triton.language.extra.libdevice import rsqrt", "rsqrt", mini_triton.language.extra.libdevice.rsqrt),
    ("from triton.language.extra.cuda.libdevice import rsqrt", "rsqrt", mini_triton.language.extra.libdevice.rsqrt),
    ("import triton.testing", "triton", mini_triton),
])
def test_triton_s_import_paths_give_the_simulator_s_modules(statement, name, expected):
    scope = {}
    with as_triton():
        exec(statement, scope)
    assert scope[name] is expected


def test_a_path_the_simulator_lacks_fails_with_its_name():
    with as_triton(), pytest.raises(ImportError, match="mini_triton, the simulator, has no triton.runtime.jit"):
        exec("from triton.runtime.jit import JITFunction", {})


@pytest.mark.parametrize("statement", ["from triton.runtime import driver", "from triton.runtime.driver import driver"])
def test_tritons_driver_is_the_one_piece_of_its_runtime_the_simulator_answers(statement):
    scope = {}
    with as_triton():
        exec(statement, scope)
    assert scope["driver"] is mini_triton.runtime.driver and scope["driver"].active.get_current_device() == 0
    # and the simulator's own modules are still its own (the import binds the driver's module as triton.runtime)
    assert mini_triton.runtime is sys.modules["mini_triton.runtime"] and hasattr(mini_triton.runtime, "schedule")


def test_outside_the_block_triton_is_what_it_was():
    before = {k: v for k, v in sys.modules.items() if k == "triton" or k.startswith("triton.")}
    with as_triton():
        exec("import triton.language", {})
        assert sys.modules["triton"] is mini_triton
    after = {k: v for k, v in sys.modules.items() if k == "triton" or k.startswith("triton.")}
    assert after == before


def test_a_simulator_module_imported_as_triton_keeps_its_own_name():
    """A module imported through ``import triton...`` is still mini_triton's module afterwards, under its own name
    (importlib.reload, which the README's recipe for a tl op uses in its test, looks a module up by its spec's)."""
    import mini_triton.language.math as tl_math
    with as_triton():
        exec("import triton.language.math", {})
    assert tl_math.__spec__.name == "mini_triton.language.math"


# A kernel file that compiles a reference helper of its own with torch.compile at import: torch then looks for
# Triton itself (triton.backends, triton.runtime...), and must find what it finds outside the block.
COMPILED_AT_IMPORT = '''
import torch
import triton
import triton.language as tl


@torch.compile
def reference(x):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)


@triton.jit
def copy_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i))
'''
# Run in a process of its own (torch.compile's modules, once imported, stay for the process), with or without Triton.
LOAD_IT = '''
import sys
import torch
import mini_triton
from mini_triton.imports import as_triton
scope = {"__name__": "kernel_file"}
with as_triton():
    exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), scope)
assert scope["triton"] is mini_triton and scope["tl"] is mini_triton.language
x = torch.arange(8.0)
y = torch.empty_like(x)
scope["copy_kernel"][(1,)](x, y, BLOCK=8)
assert torch.equal(x, y)
from torch.utils._triton import has_triton_package
print("torch sees triton:", has_triton_package(), "| after the block:", sys.modules.get("triton") is mini_triton)
'''


@pytest.mark.parametrize("triton_installed", ["installed", "absent"])
def test_torch_compile_at_import_finds_what_it_finds_without_the_simulator(tmp_path, triton_installed):
    import subprocess
    from pathlib import Path

    import without_triton
    (tmp_path / "kernels.py").write_text(COMPILED_AT_IMPORT)
    (tmp_path / "load.py").write_text(without_triton.script(LOAD_IT, triton_installed))
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run([sys.executable, str(tmp_path / "load.py"), str(tmp_path / "kernels.py")],
                         capture_output=True, text=True, cwd=root, timeout=240,
                         env={**__import__("os").environ, "PYTHONPATH": str(root)})
    assert run.returncode == 0, run.stderr[-3000:]
    try:
        import triton  # noqa: F401
        real = triton_installed == "installed"
    except ImportError:
        real = False
    assert f"torch sees triton: {real} | after the block: False" in run.stdout, run.stdout
