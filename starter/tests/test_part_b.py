"""Part (b): your backward kernel, rmsnorm_bwd_kernel, on its own.

Each test launches the kernel itself, with r from the float64 reference (not from your forward), and
sums the partial dg rows itself: these tests pass as soon as part (b) is done, whatever the state of
parts (a) and (c). `make test PART=b`.
"""
import pytest
import torch

from rmsnorm_check import (assert_matches, assert_untouched, assert_written, compare, describe, filled,
                           random_inputs, reference)

CHUNKED = ("the chunked path: the wrapper passes SINGLE_PASS=False for rows longer than MAX_FUSED_N (16384), "
           "which do not fit in a program's registers, and this test sends a row through it; with "
           "SINGLE_PASS=False your kernel must loop over each row in chunks of BLOCK_N columns, one pass for "
           "the dot product sum(dy·g·x) and one to write dx")


DX_FORMULA = (". Every row is off, not a few lanes? Then check the formula: dx = r·(dy·g − x̂·mean(dy·g·x̂)) "
              "with x̂ = x·r (r cubed where x itself appears: r·dy·g − x·r³·sum(dy·g·x)/N); the handout's "
              "float64 check in part (b) tests a formula before it goes into the kernel")


def launch_backward(impl, x, g, dy, rows_per_program, BLOCK_M, BLOCK_N=None, SINGLE_PASS=True):
    """(dx, dg, how it was launched): one launch of your kernel on the (M, N) matrices x and dy, then
    dg = the sum of the partial rows (one per program) it stored."""
    __tracebackhide__ = True                  # pytest: show the test, then your kernel's line
    M, N = x.shape
    BLOCK_N = BLOCK_N or impl.triton.next_power_of_2(N)
    r = reference(x, g)[1].float().to(x.device)
    dx = filled((M, N), x.dtype, x.device)
    programs = impl.triton.cdiv(M, rows_per_program)
    dg_partial = torch.zeros((programs, N), dtype=torch.float32, device=x.device)
    impl.rmsnorm_bwd_kernel[(programs,)](x, g, dy, r, dx, dg_partial, M, N, x.stride(0), dy.stride(0),
                                         dx.stride(0), rows_per_program,
                                         BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, SINGLE_PASS=SINGLE_PASS)
    how = (f"grid ({programs},), rows_per_program={rows_per_program}, BLOCK_M={BLOCK_M}, BLOCK_N={BLOCK_N}, "
           f"SINGLE_PASS={SINGLE_PASS}")
    return dx, dg_partial.sum(0), how


def check_backward(impl, x, g, dy, rows_per_program, BLOCK_M, story=None, hint="", **launch):
    __tracebackhide__ = True                  # pytest: show the test, then your kernel's line
    dy_before = dy.clone()
    dx, dg, how = launch_backward(impl, x, g, dy, rows_per_program, BLOCK_M, **launch)
    assert_untouched("dy", dy, dy_before, f"rmsnorm_bwd_kernel (launched with {how})")
    story = f"{story or describe(x)}, launched with {how}" + (f" ({hint})" if hint else "")
    _, _, ref_dx, ref_dg = reference(x, g, dy)
    assert_written("dx", dx, "rmsnorm_bwd_kernel", story)
    wrong = compare("dx", dx, ref_dx, x, story=story, source=" from rmsnorm_bwd_kernel")
    if wrong:
        raise AssertionError(wrong + DX_FORMULA)
    assert_matches("dg", dg.to(g.dtype), ref_dg, x, story=story,
                   source=" (the sum of the dg_partial rows your rmsnorm_bwd_kernel stored)")
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


def test_strided_rows_and_untouched_dy(impl):
    """x and dy as views whose rows are 160 elements apart while N = 80; dy must come back unchanged."""
    base_x, g, base_dy = random_inputs((24, 160), device=impl.DEVICE)
    x, dy, g = base_x[:, :80], base_dy[:, :80], g[:80].contiguous()
    check_backward(impl, x, g, dy, rows_per_program=4, BLOCK_M=2,
                   story=f"{describe(x)} and dy whose rows are 160 elements apart (row stride 160, N 80; if "
                         f"the contiguous tests pass and this one fails, step from row to row by x_row_stride "
                         f"and dy_row_stride, not n_cols)")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_half_precision(impl, dtype):
    """16-bit x, g and dy; fp32 math inside; dx stored in x's dtype, dg_partial in fp32."""
    x, g, dy = random_inputs((33, 200), dtype, device=impl.DEVICE)
    dx = check_backward(impl, x, g, dy, rows_per_program=4, BLOCK_M=2)
    assert dx.dtype == dtype


@pytest.mark.parametrize("M, N, BLOCK_N", [(3, 300, 128), (2, 32768, 4096)], ids=["3x300", "2x32768"])
def test_long_rows_in_chunks(impl, M, N, BLOCK_N):
    x, g, dy = random_inputs((M, N), device=impl.DEVICE)
    check_backward(impl, x, g, dy, rows_per_program=1, BLOCK_M=1, BLOCK_N=BLOCK_N, SINGLE_PASS=False,
                   hint=CHUNKED)


def test_backward_reads_x_and_dy_once_and_writes_dx_once(sim_impl):
    """On the simulator: a fused backward loads x and dy once each and stores dx once (and runs race-free)."""
    import mini_triton as triton
    M, N = 64, 256
    x, g, dy = random_inputs((M, N))
    with triton.record() as rec:
        dx, _, how = launch_backward(sim_impl, x, g, dy, rows_per_program=8, BLOCK_M=2)
    args = {a.data_ptr: a for a in rec.launches[0].args.values()}
    for name, t, kind in (("x", x, "loaded"), ("dy", dy, "loaded"), ("dx", dx, "stored")):
        per_elem = getattr(args[t.data_ptr()], kind) / (M * N)
        if per_elem != 1.0:
            raise AssertionError(f"your backward {kind} {name} {per_elem:.1f} times per element (launched with "
                                 f"{how}); a fused backward reads x and dy once and writes dx once: keep each "
                                 f"tile in registers for both the dot product and dx")
