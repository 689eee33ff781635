"""The compile rules the simulator enforces (tests/test_mini_triton_checks.py) are Triton's: each refused
kernel fails on a GPU with real Triton, and each accepted form runs there. Skipped without CUDA; run on the
course GPU machine (docs/perf.md records the run)."""
import textwrap

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA and Triton")

KERNELS = {
    "loop_carried_scalar_made_a_block": ("""
        acc = 0.0
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + cols, mask=cols < n, other=0.0)
        tl.store(out_ptr + tl.arange(0, BLOCK), acc)""", False),
    "scalar_stays_scalar": ("""
        acc = 0.0
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.sum(tl.load(x_ptr + cols, mask=cols < n, other=0.0), axis=0)
        tl.store(out_ptr, acc)""", True),
    "store_of_higher_rank": ("""
        rows = tl.arange(0, 2)[:, None]
        cols = tl.arange(0, BLOCK)
        tile = tl.load(x_ptr + rows * BLOCK + cols[None, :])
        tl.store(out_ptr + cols, tile)""", False),
    "value_broadcast_to_pointers": ("""
        rows = tl.arange(0, 2)[:, None]
        cols = tl.arange(0, BLOCK)
        tl.store(out_ptr + rows * BLOCK + cols[None, :], tl.load(x_ptr + cols))""", True),
}


def _kernel(name, body, tmp_path):
    path = tmp_path / f"{name}.py"
    path.write_text("import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
                    "def kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n" + textwrap.indent(
                        textwrap.dedent(body).strip("\n"), "    ") + "\n")
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernel


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_triton_refuses_what_the_simulator_refuses_and_runs_what_it_runs(name, tmp_path):
    body, runs = KERNELS[name]
    kernel = _kernel(name, body, tmp_path)
    x, out = torch.randn(64, device="cuda"), torch.zeros(64, device="cuda")
    if runs:
        kernel[(1,)](x, out, 64, BLOCK=32)
        torch.cuda.synchronize()
    else:
        with pytest.raises(Exception):                     # noqa: B017 -- Triton's CompilationError, whatever module
            kernel[(1,)](x, out, 64, BLOCK=32)
            torch.cuda.synchronize()


def test_an_int_grid_fails_on_a_gpu(tmp_path):
    kernel = _kernel("int_grid", "tl.store(out_ptr + tl.arange(0, BLOCK), tl.load(x_ptr + tl.arange(0, BLOCK)))",
                     tmp_path)
    x, out = torch.randn(64, device="cuda"), torch.zeros(64, device="cuda")
    with pytest.raises(TypeError):
        kernel[2](x, out, 64, BLOCK=32)
