"""The kernels written as public libraries write them (tests/library_kernels.py) give torch's results under
mini_triton, and Triton's interpreter's; each names the published kernel it follows. `make bench-sim` times
the same cases (at larger sizes) against the interpreter."""
import os
import warnings

import pytest
import torch

from backends import kernels, triton_available

LIB = kernels("mini", "library_kernels")
NAMES = sorted(LIB.cases(small=True))
# tl.dot of fp32 blocks rounds its inputs to tf32 (10 bits of mantissa), as Triton does by default; the others
# differ from torch only in the order of their sums (and fp16's rounding)
TOLERANCE = {"matmul": dict(rtol=1e-2, atol=5e-2), "AWQ GEMM": dict(rtol=1e-2, atol=1e-3)}
# where Triton's interpreter is not what a GPU computes (tests/test_mini_triton_fidelity.py checks these kernels
# at the cases where it is)
INTERPRETER_DIFFERS = {
    "matmul": "the interpreter's tl.dot of fp32 blocks keeps every bit; a GPU (and mini_triton) rounds to tf32",
    "Liger RMSNorm": "the interpreter's .to(tl.bfloat16) is wrong here",
}


def _run(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # the lock and atomic kernels say they are order-dependent
        got = case()
    return got if isinstance(got, tuple) else (got,)


@pytest.mark.parametrize("name", NAMES)
def test_a_library_kernel_gives_torchs_result(name):
    run, expect = LIB.cases(small=True)[name]
    got, want = _run(run), _run(expect)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, name
        torch.testing.assert_close(g, w, **TOLERANCE.get(name, dict(rtol=2e-3, atol=2e-3)), msg=name)


@pytest.mark.skipif(not triton_available(), reason="Triton's interpreter (TRITON_INTERPRET=1, triton, numpy) is "
                                                   "not available here")
@pytest.mark.parametrize("name", [n for n in NAMES if n not in INTERPRETER_DIFFERS])
def test_a_library_kernel_gives_triton_interpreters_result(name):
    interp = kernels("interpret", "library_kernels").cases(small=True)[name][0]
    got, want = _run(LIB.cases(small=True)[name][0]), _run(interp)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5, msg=name)


def test_every_library_kernel_names_the_published_kernel_it_follows():
    assert set(LIB.SOURCES) == set(NAMES) and len(NAMES) >= 15
    for name, (library, path, kernel) in LIB.SOURCES.items():
        assert library and kernel and "/" in path and os.path.splitext(path)[1] == ".py", name
