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


SAVE_R = ("        ctx.save_for_backward(x, g, r)\n        return y",
          "        ctx.save_for_backward(x, g)\n        ctx.eps = eps\n        return y")
USE_R = "        x, g, r = ctx.saved_tensors\n"
RECOMPUTE_R = "        x, g = ctx.saved_tensors\n        r = rmsnorm_forward(x, g, ctx.eps)[1]\n"
# the Function saves x and g and recomputes r in its backward, as several libraries do
STYLES["recomputes_r"] = edit(SIMPLE, SAVE_R, (USE_R, RECOMPUTE_R))

# one launch per chunk of 8 rows, each given its first row as a scalar argument: more distinct scalars and launches
# than a few (M/8 of each at the core shape), all of them sizes the shape fixes
ROW = "    row = tl.program_id(0).to(tl.int64)\n"
STYLES["launch_per_chunk_of_rows"] = edit(
    SIMPLE, ("x_stride, y_stride, eps, BLOCK: tl.constexpr):", "x_stride, y_stride, eps, row0, BLOCK: tl.constexpr):"),
    ("x_stride, dy_stride,\n                       BLOCK: tl.constexpr):",
     "x_stride, dy_stride, row0,\n                       BLOCK: tl.constexpr):"),
    *[(ROW, "    row = row0 + tl.program_id(0).to(tl.int64)\n")] * 2,
    ("    rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps, BLOCK=triton.next_power_of_2(N))",
     "    for row0 in range(0, M, 8):\n"
     "        rmsnorm_fwd_kernel[(min(8, M - row0),)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps, row0,\n"
     "                                                BLOCK=triton.next_power_of_2(N))"),
    ("    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N, x2.stride(0), dy2.stride(0),\n"
     "                             BLOCK=triton.next_power_of_2(N))",
     "    for row0 in range(0, M, 8):\n"
     "        rmsnorm_bwd_kernel[(min(8, M - row0),)](x2, g, dy2, r, dx, dg_partial, N, x2.stride(0), dy2.stride(0),\n"
     "                                                row0, BLOCK=triton.next_power_of_2(N))"))

# the partial dg rows padded to the block, as many kernels keep them (every lane stored, or the padding left to
# torch.zeros), summed, then sliced to N: dg_partial.sum(0)[:N]
DG_STORE = "    tl.store(dg_ptr + row * N + cols, dy * x * r, mask=mask)\n"
PADDED = ("    dg_partial = torch.empty((M, N), dtype=torch.float32, device=x.device)\n",
          "    dg_partial = torch.{}((M, triton.next_power_of_2(N)), dtype=torch.float32, device=x.device)\n")
SLICED = ("dg_partial.sum(0).to(g.dtype)", "dg_partial.sum(0)[:N].to(g.dtype)")
STYLES["partial_rows_padded_to_the_block"] = edit(
    SIMPLE, (DG_STORE, "    tl.store(dg_ptr + row * BLOCK + cols, dy * x * r)\n"),
    (PADDED[0], PADDED[1].format("empty")), SLICED)
STYLES["partial_rows_padded_with_zeros"] = edit(
    SIMPLE, (DG_STORE, "    tl.store(dg_ptr + row * BLOCK + cols, dy * x * r, mask=mask)\n"),
    (PADDED[0], PADDED[1].format("zeros")), SLICED)

# the launches inside profiler ranges (torch.profiler.record_function), as libraries mark their kernels: the marks are
# no tensor work, and the replay has none to run
STYLES["launches_in_profiler_ranges"] = edit(
    SIMPLE, ("    rmsnorm_fwd_kernel[(M,)](", "    with torch.profiler.record_function('rmsnorm_fwd'):\n"
                                            "        rmsnorm_fwd_kernel[(M,)]("),
    ("    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N, x2.stride(0), dy2.stride(0),\n"
     "                             BLOCK=triton.next_power_of_2(N))",
     "    with torch.profiler.record_function('rmsnorm_bwd'):\n"
     "        rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N, x2.stride(0), dy2.stride(0),\n"
     "                                 BLOCK=triton.next_power_of_2(N))"))

# a 16-bit x viewed as unsigned words on the host (a view: no data read), as bit-twiddling code does
STYLES["x_viewed_as_unsigned_words"] = edit(
    SIMPLE, ("def rmsnorm_forward(x, g, eps=1e-5):\n",
             "def rmsnorm_forward(x, g, eps=1e-5):\n"
             "    _bits = x.detach().view(torch.uint16) if x.element_size() == 2 else x\n"))

# a gather table of where each row starts, made on the host from the shape and strides alone (no value of x)
STYLES["row_offsets_from_a_host_table"] = edit(
    SIMPLE, ("x_ptr, g_ptr, y_ptr, r_ptr, N, x_stride,", "x_ptr, g_ptr, y_ptr, r_ptr, xrow_ptr, N, x_stride,"),
    ("    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)\n    g = ",
     "    x = tl.load(x_ptr + tl.load(xrow_ptr + row).to(tl.int64) + cols, mask=mask, other=0.0).to(tl.float32)\n"
     "    g = "),
    ("    rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N,",
     "    xrow = torch.arange(M, dtype=torch.int32, device=x.device) * x2.stride(0)\n"
     "    rmsnorm_fwd_kernel[(M,)](x2, g, y, r, xrow, N,"))

# the backward launched once per chunk of rows, each launch given its slices, the partial rows summed on the host
STYLES["backward_in_chunks_of_rows"] = edit(
    SIMPLE, ("    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N, x2.stride(0), dy2.stride(0),\n"
             "                             BLOCK=triton.next_power_of_2(N))",
             "    step = max(1, -(-M // 16))\n    for s in range(0, M, step):\n        e = min(M, s + step)\n"
             "        rmsnorm_bwd_kernel[(e - s,)](x2[s:e], g, dy2[s:e], r[s:e], dx[s:e], dg_partial[s:e], N,\n"
             "                                     x2.stride(0), dy2.stride(0), BLOCK=triton.next_power_of_2(N))"))

# two rows per program, g loaded again for each row (as often as the lecture's one row per program loads it)
# each kernel takes its row from a ticket counter in a buffer the module keeps between calls (int32: the forward's,
# the backward's), zeroed once; the last ticket puts its counter back to 0 (a self-resetting counter)
TICKET = ("    row = tl.program_id(0).to(tl.int64)\n",
          "    row = tl.atomic_add(sem_ptr + {0}, 1).to(tl.int64)\n"
          "    tl.atomic_xchg(sem_ptr + {0}, 0, mask=row == tl.num_programs(0) - 1)\n")
STYLES["row_tickets_in_a_module_buffer"] = edit(
    SIMPLE, ("x_ptr, g_ptr, y_ptr, r_ptr, N, x_stride,", "x_ptr, g_ptr, y_ptr, r_ptr, sem_ptr, N, x_stride,"),
    ("dx_ptr, dg_ptr, N, x_stride, dy_stride,", "dx_ptr, dg_ptr, sem_ptr, N, x_stride, dy_stride,"),
    (TICKET[0], TICKET[1].format(0)), (TICKET[0], TICKET[1].format(1)),
    ("    rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N,", "    rmsnorm_fwd_kernel[(M,)](x2, g, y, r, _sem(x.device), N,"),
    ("    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N,",
     "    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, _sem(x.device), N,"),
    ("def rmsnorm_forward(", "_SEMS = {}\n\n\ndef _sem(device):\n    if device not in _SEMS:\n"
                            "        _SEMS[device] = torch.zeros(2, dtype=torch.int32, device=device)\n"
                            "    return _SEMS[device]\n\n\ndef rmsnorm_forward("))

FWD_KERNEL = SIMPLE[SIMPLE.index("@triton.jit\ndef rmsnorm_fwd_kernel"):
                    SIMPLE.index("@triton.jit\ndef rmsnorm_bwd_kernel")]
STYLES["two_rows_per_program_g_per_row"] = edit(SIMPLE, (FWD_KERNEL, '''@triton.jit
def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, M, N, x_stride, y_stride, eps, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    for i in range(2):
        row = tl.program_id(0).to(tl.int64) * 2 + i
        if row < M:
            x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
            g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
            r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
            tl.store(y_ptr + row * y_stride + cols, x * r * g, mask=mask)
            tl.store(r_ptr + row, r)


'''), ("    rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps, BLOCK=triton.next_power_of_2(N))",
       "    rmsnorm_fwd_kernel[(triton.cdiv(M, 2),)](x2, g, y, r, M, N, x2.stride(0), y.stride(0), eps,\n"
       "                                           BLOCK=triton.next_power_of_2(N))"))

# the kernels wrapped in torch.library custom ops (kept out of torch.compile's sight), autograd registered on them
RMSNORM = "def rmsnorm(x, g, eps=1e-5):\n    return TritonRMSNorm.apply(x, g, eps)\n"
STYLES["torch_library_custom_ops"] = edit(SIMPLE, (RMSNORM, '''\
@torch.library.custom_op("course::rmsnorm_fwd", mutates_args=())
def _fwd_op(x: torch.Tensor, g: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    return rmsnorm_forward(x, g, eps)


@_fwd_op.register_fake
def _(x, g, eps):
    return torch.empty_like(x), x.new_empty(x.numel() // x.shape[-1], dtype=torch.float32)


@torch.library.custom_op("course::rmsnorm_bwd", mutates_args=())
def _bwd_op(dy: torch.Tensor, x: torch.Tensor, g: torch.Tensor,
            r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return rmsnorm_backward(dy, x, g, r)


@_bwd_op.register_fake
def _(dy, x, g, r):
    return torch.empty_like(x), torch.empty_like(g)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0], inputs[1], output[1])


def _backward(ctx, dy, dr):
    dx, dg = _bwd_op(dy, *ctx.saved_tensors)
    return dx, dg, None


_fwd_op.register_autograd(_backward, setup_context=_setup_context)


def rmsnorm(x, g, eps=1e-5):
    return _fwd_op(x, g, eps)[0]
'''))

# name: (the source, the parts it fails beyond simple.py's, the first words of the first one's message)
MISTAKES = {
    # ...and its backward fails at large N only: that is 4.4's case (rows longer than 8192), not a missing r
    "crash_at_large_n": (edit(SIMPLE, SAVE_R, (USE_R, "        x, g = ctx.saved_tensors\n"
                                                      "        if x.shape[-1] > 8192:\n"
                                                      "            raise RuntimeError('no block for such long rows')\n"
                                                      + RECOMPUTE_R.split("\n", 1)[1])),
                         {"4.4"}, "your backward failed for x of shape (3, 16384) fp32 (N = 16384): RuntimeError"),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    d = tmp_path_factory.mktemp("styles")
    paths = {}
    for name, source in [("simple", SIMPLE), *STYLES.items(), *((k, v[0]) for k, v in MISTAKES.items())]:
        paths[name] = d / name / "rmsnorm.py"
        paths[name].parent.mkdir()
        paths[name].write_text(source)
    return verdicts(paths)


@pytest.mark.parametrize("name", sorted(STYLES))
def test_a_library_idiom_earns_what_simple_py_earns(graded, name):
    assert graded[name]["failed"].keys() == graded["simple"]["failed"].keys(), graded[name]["failed"]


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_a_crash_costs_the_part_whose_case_crashed_with_the_crash_first(graded, name):
    _, extra, first_words = MISTAKES[name]
    failed = graded[name]["failed"]
    assert failed.keys() == graded["simple"]["failed"].keys() | extra, failed
    assert failed[sorted(extra)[0]].startswith(first_words), failed
