"""Part (b): your backward kernel, rmsnorm_bwd_kernel, on its own.

Each test launches the kernel itself, with r from the float64 reference (not from your forward), and
sums the partial dg rows itself: these tests pass as soon as part (b) is done, whatever the state of
parts (a) and (c). `make test PART=b`. The simplest launch comes first, long rows in chunks last. A
wrong output is diagnosed (rmsnorm_diagnose.py): the message names the mistake when it is a known one
(r² for r³, g left out of dx, eps left out, dg summed over some rows only...).
"""
import pytest
import torch

from rmsnorm_check import FILL, assert_untouched, describe, filled, random_inputs, reference
from rmsnorm_diagnose import KernelLog, backward_alternatives, dg_rows, diagnose, fail_if, pick, strides_named


def launch_backward(impl, x, g, dy, rows_per_program, BLOCK_M, BLOCK_N=None, SINGLE_PASS=True):
    """(dx, dg, how it was launched, what the simulator saw): one launch of your kernel on the (M, N)
    matrices x and dy, then dg = the sum of the partial rows (one per program) it stored."""
    __tracebackhide__ = True                  # pytest: show the test, then your kernel's line
    M, N = x.shape
    BLOCK_N = BLOCK_N or impl.triton.next_power_of_2(N)
    r = reference(x, g)[1].float().to(x.device)
    dx = filled((M, N), x.dtype, x.device)
    programs = impl.triton.cdiv(M, rows_per_program)
    dg_partial = torch.zeros((programs, N), dtype=torch.float32, device=x.device)
    with KernelLog(impl, host_ops=False) as log:
        impl.rmsnorm_bwd_kernel[(programs,)](x, g, dy, r, dx, dg_partial, M, N, x.stride(0), dy.stride(0),
                                             dx.stride(0), rows_per_program,
                                             BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, SINGLE_PASS=SINGLE_PASS)
    how = (f"grid ({programs},), rows_per_program={rows_per_program}, BLOCK_M={BLOCK_M}, BLOCK_N={BLOCK_N}, "
           f"SINGLE_PASS={SINGLE_PASS}")
    return dx, dg_partial.sum(0), how, log


def check_backward(impl, x, g, dy, rows_per_program, BLOCK_M, story=None, **launch):
    __tracebackhide__ = True                  # pytest: show the test, then your kernel's line
    dy_before = dy.clone()
    with strides_named(x, dy):
        dx, dg, how, log = launch_backward(impl, x, g, dy, rows_per_program, BLOCK_M, **launch)
    assert_untouched("dy", dy, dy_before, f"rmsnorm_bwd_kernel (launched with {how})")
    order = log.order_dependent()
    if order:
        raise AssertionError(
            f"{order} (launched with {how}): programs then add in whatever order they run, "
            f"which a GPU does not fix, so dg changes in its last bits from run to run (the simulator shuffles "
            f"the order too; the grader's part 4.7 wants two runs to agree, and item 9's extra credit a "
            f"deterministic dg). Give each program its own row of dg_partial, dg_partial_ptr + pid * n_cols + "
            f"cols, and store its share there once: the rows are summed afterwards in a fixed order")
    story = f"{story or describe(x)}, launched with {how}"
    r = reference(x, g)[1]
    _, _, ref_dx, ref_dg = reference(x, g, dy)
    block_n = launch.get("BLOCK_N") or impl.triton.next_power_of_2(x.shape[-1])
    alts = backward_alternatives(x, g, dy, r, block_n=block_n)
    fmt = {"B": block_n, "stride": x.stride(0), "dy_stride": dy.stride(0)}
    nan_cause = "masked_nan" if log.undefined_lanes() else None
    fail_if(diagnose("dx", dx, ref_dx, x, alternatives=pick(alts, 0), stored=dx != FILL, story=story,
                     source=" from rmsnorm_bwd_kernel", who="rmsnorm_bwd_kernel", fmt=fmt, nan_cause=nan_cause))
    fail_if(diagnose("dg", dg.to(g.dtype), ref_dg, x, alternatives=pick(alts, 1) + [dg_rows(x, dy, r)], story=story,
                     source=" (the sum of the dg_partial rows your rmsnorm_bwd_kernel stored)", fmt=fmt,
                     nan_cause=nan_cause))
    return dx


def test_one_row_per_program(impl):
    """The lecture's kernel: one row per program, so dg_partial has one row per input row."""
    x, g, dy = random_inputs((37, 100), device=impl.DEVICE)
    check_backward(impl, x, g, dy, rows_per_program=1, BLOCK_M=1)


def test_several_rows_per_program(impl):
    """8 rows per program, 2 at a time: the last of the 5 programs has only 5 rows (37 = 4·8 + 5)."""
    x, g, dy = random_inputs((37, 100), device=impl.DEVICE)
    check_backward(impl, x, g, dy, rows_per_program=8, BLOCK_M=2)


@pytest.mark.parametrize("N", [1, 513], ids=lambda n: f"N={n}")
def test_n_not_a_power_of_two(impl, N):
    x, g, dy = random_inputs((5, N), device=impl.DEVICE)
    check_backward(impl, x, g, dy, rows_per_program=2, BLOCK_M=1)


def test_a_row_of_zeros(impl):
    """Row 2 of x is all zeros: the r the kernel is given there is 1/sqrt(eps), finite. A backward that
    recomputes r without eps gets 1/sqrt(0) instead."""
    x, g, dy = random_inputs((6, 64), device=impl.DEVICE)
    x[2] = 0
    check_backward(impl, x, g, dy, rows_per_program=2, BLOCK_M=1, story=f"{describe(x)} (row 2 is all zeros)")


def test_strided_rows_and_untouched_dy(impl):
    """x and dy as views whose rows are 160 elements apart while N = 80; dy must come back unchanged."""
    base_x, g, base_dy = random_inputs((24, 160), device=impl.DEVICE)
    x, dy, g = base_x[:, :80], base_dy[:, :80], g[:80].contiguous()
    check_backward(impl, x, g, dy, rows_per_program=4, BLOCK_M=2,
                   story=f"{describe(x)} and dy whose rows are 160 elements apart (row stride 160, N 80)")


def test_strided_x_and_contiguous_dy(impl):
    """x a view whose rows are 160 elements apart, dy contiguous (rows 80 apart): each takes its own stride."""
    base_x, g, dy = random_inputs((24, 160), device=impl.DEVICE)
    x, g, dy = base_x[:, :80], g[:80].contiguous(), dy[:, :80].contiguous()
    check_backward(impl, x, g, dy, rows_per_program=4, BLOCK_M=2,
                   story=f"{describe(x)} whose rows are 160 elements apart, and a contiguous dy whose rows are 80 "
                         f"apart")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_half_precision(impl, dtype):
    """16-bit x, g and dy; fp32 math inside; dx stored in x's dtype, dg_partial in fp32."""
    x, g, dy = random_inputs((33, 200), dtype, device=impl.DEVICE)
    dx = check_backward(impl, x, g, dy, rows_per_program=4, BLOCK_M=2)
    assert dx.dtype == dtype


def test_backward_reads_x_and_dy_once_and_writes_dx_once(sim_impl):
    """On the simulator: a fused backward loads x and dy once each and stores dx once (and runs race-free)."""
    import mini_triton as triton
    M, N = 64, 256
    x, g, dy = random_inputs((M, N))
    with triton.record() as rec:
        dx, _, how, _ = launch_backward(sim_impl, x, g, dy, rows_per_program=8, BLOCK_M=2)
    args = {a.data_ptr: a for a in rec.launches[0].args.values()}
    for name, t, kind in (("x", x, "loaded"), ("dy", dy, "loaded"), ("dx", dx, "stored")):
        per_elem = getattr(args[t.data_ptr()], kind) / (M * N)
        if per_elem != 1.0:
            raise AssertionError(f"your backward {kind} {name} {per_elem:.1f} times per element (launched with "
                                 f"{how}); a fused backward reads x and dy once and writes dx once: keep each "
                                 f"tile in registers for both the dot product and dx")


@pytest.mark.parametrize("M, N, BLOCK_N", [(3, 300, 128), (2, 32768, 4096)], ids=["3x300", "2x32768"])
def test_long_rows_in_chunks(impl, M, N, BLOCK_N):
    """SINGLE_PASS=False, the chunked path, for rows longer than MAX_FUSED_N: the kernel loops over each row
    in chunks of BLOCK_N columns, one pass for the dot product sum(dy·g·x) and one to write dx."""
    x, g, dy = random_inputs((M, N), device=impl.DEVICE)
    check_backward(impl, x, g, dy, rows_per_program=1, BLOCK_M=1, BLOCK_N=BLOCK_N, SINGLE_PASS=False)
