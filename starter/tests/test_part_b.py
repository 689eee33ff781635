"""Part (b): your backward kernel, rmsnorm_bwd_kernel, on its own. `make test PART=b`.

Each test launches the kernel itself, one program per row, with r from the float64 reference (not from
your forward), and sums the partial dg rows itself: these tests pass as soon as part (b) is done, whatever
the state of parts (a) and (c). Part (d) later changes the kernel; these tests keep passing
(launch_backward passes rows_per_program=1 once the kernel takes it). The simplest launch comes first,
long rows in chunks last. A wrong output is diagnosed (rmsnorm_testkit/diagnose.py): the message names the
mistake when it is a known one (r² for r³, g left out of dx, eps left out, dg summed over some rows only...).
"""
import pytest
import torch

from rmsnorm_testkit.compare import FILL, assert_untouched, describe, filled, random_inputs, reference, strided_inputs
from rmsnorm_testkit.causes import backward_alternatives, dg_rows, pick
from rmsnorm_testkit.diagnose import KernelLog, diagnose, fail_if, read_instead, strides_named


# The kernel's parameters by name: part (b)'s, and the three that part (d) adds (BLOCK_M is optional).
PART_B_PARAMS = ("x_ptr", "g_ptr", "dy_ptr", "r_ptr", "dx_ptr", "dg_partial_ptr", "n_cols", "x_row_stride",
                 "dy_row_stride", "dx_row_stride", "BLOCK_N", "SINGLE_PASS")
PART_D_PARAMS = ("n_rows", "rows_per_program", "BLOCK_M")


def kernel_params(kernel) -> list:
    """The names of a @triton.jit kernel's parameters (through @triton.autotune and @triton.heuristics too)."""
    while not hasattr(kernel, "arg_names") and hasattr(kernel, "fn"):
        kernel = kernel.fn
    return list(kernel.arg_names)


def takes_many_rows(impl) -> bool:
    """Has part (d) given rmsnorm_bwd_kernel its rows_per_program parameter?"""
    return "rows_per_program" in kernel_params(impl.rmsnorm_bwd_kernel)


def launch_backward(impl, x, g, dy, rows_per_program=1, BLOCK_M=1, BLOCK_N=None, SINGLE_PASS=True, eps=1e-5):
    """(dx, dg, how it was launched, what the simulator saw): one launch of your kernel on the (M, N)
    matrices x and dy, then dg = the sum of the partial rows (one per program) it stored.

    Part (b)'s kernel takes one row per program (grid (M,)). Once part (d) has added n_rows and
    rows_per_program (and BLOCK_M, if you use it), the part (b) tests pass rows_per_program=1 and
    BLOCK_M=1: the same launch as before."""
    __tracebackhide__ = True                  # pytest: show the test, then your kernel's line
    M, N = x.shape
    BLOCK_N = BLOCK_N or impl.triton.next_power_of_2(N)
    r = reference(x, g, eps=eps)[1].float().to(x.device)
    dx = filled((M, N), x.dtype, x.device)
    programs = impl.triton.cdiv(M, rows_per_program)
    dg_partial = torch.zeros((programs, N), dtype=torch.float32, device=x.device)
    args = dict(x_ptr=x, g_ptr=g, dy_ptr=dy, r_ptr=r, dx_ptr=dx, dg_partial_ptr=dg_partial, n_cols=N,
                x_row_stride=x.stride(0), dy_row_stride=dy.stride(0), dx_row_stride=dx.stride(0),
                BLOCK_N=BLOCK_N, SINGLE_PASS=SINGLE_PASS)
    params = kernel_params(impl.rmsnorm_bwd_kernel)
    if "rows_per_program" in params:
        args.update(n_rows=M, rows_per_program=rows_per_program)
        if "BLOCK_M" in params:
            args["BLOCK_M"] = BLOCK_M
    elif rows_per_program > 1:
        raise AssertionError(
            "part (d) is not done yet: rmsnorm_bwd_kernel has no parameter rows_per_program. Part (d) gives each "
            "program many rows: add the parameters n_rows and rows_per_program (and BLOCK_M: tl.constexpr if your "
            "program takes several rows at a time) after dx_row_stride, and loop over the program's rows (handout, "
            "part (d))")
    unknown = [n for n in params if n not in args]
    if unknown:
        raise AssertionError(
            f"rmsnorm_bwd_kernel has parameters the tests do not know: {', '.join(unknown)}. The tests pass the "
            f"arguments by name: keep the starter's parameters ({', '.join(PART_B_PARAMS)}); part (d) adds "
            f"{', '.join(PART_D_PARAMS)} (BLOCK_M is optional)")
    with KernelLog(impl, host_ops=False) as log:
        impl.rmsnorm_bwd_kernel[(programs,)](**{n: args[n] for n in params})
    how = f"grid ({programs},), " + ", ".join(
        f"{n}={args[n]}" for n in ("rows_per_program", "BLOCK_M", "BLOCK_N", "SINGLE_PASS") if n in params)
    return dx, dg_partial.sum(0), how, log


def check_backward(impl, x, g, dy, rows_per_program=1, BLOCK_M=1, story=None, eps=1e-5, **launch):
    __tracebackhide__ = True                  # pytest: show the test, then your kernel's line
    dy_before = dy.clone()
    with strides_named(x, dy):
        dx, dg, how, log = launch_backward(impl, x, g, dy, rows_per_program, BLOCK_M, eps=eps, **launch)
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
    r = reference(x, g, eps=eps)[1]
    _, _, ref_dx, ref_dg = reference(x, g, dy, eps=eps)
    block_n = launch.get("BLOCK_N") or impl.triton.next_power_of_2(x.shape[-1])
    alts = backward_alternatives(x, g, dy, r, eps=eps, block_n=block_n)
    nan_cause, loads = log.nan_source()
    fmt = {"B": block_n, "stride": x.stride(0), "dy_stride": dy.stride(0), "eps": eps, **loads}
    read = log.traffic("bwd", {"x": x, "dy": dy, "g": g, "dx": dx}, x)      # what the kernel read, first
    instead = read_instead(read, x, g, dy, r)
    traffic = read[:2] if read else None
    fail_if(diagnose("dx", dx, ref_dx, x, alternatives=pick(alts, 0) + [(k, v[0], w) for k, v, w in instead],
                     stored=dx != FILL, story=story, source=" from rmsnorm_bwd_kernel", who="rmsnorm_bwd_kernel",
                     fmt=fmt, nan_cause=nan_cause, traffic=traffic))
    fail_if(diagnose("dg", dg.to(g.dtype), ref_dg, x, alternatives=pick(alts, 1) + [dg_rows(x, dy, r)] +
                     [(k, v[1], w) for k, v, w in instead], story=story,
                     source=" (the sum of the dg_partial rows your rmsnorm_bwd_kernel stored)", fmt=fmt,
                     nan_cause=nan_cause, traffic=traffic))
    return dx


def test_one_row_per_program(impl):
    """The lecture's kernel: one row per program (grid (M,)), so dg_partial has one row per input row."""
    x, g, dy = random_inputs((37, 100), device=impl.DEVICE)
    check_backward(impl, x, g, dy)


def test_the_r_it_is_given(impl):
    """r comes from the forward, made there with the caller's eps (0.5 here): the kernel loads it from r_ptr and
    uses it as it is. A kernel that recomputes r from x gets another r, since it has no eps to make it with."""
    x, g, dy = random_inputs((12, 100), device=impl.DEVICE)
    check_backward(impl, x, g, dy, eps=0.5, story=f"{describe(x)}, given r = 1/sqrt(mean(x²) + 0.5)")


@pytest.mark.parametrize("N", [1, 513], ids=lambda n: f"N={n}")
def test_n_not_a_power_of_two(impl, N):
    x, g, dy = random_inputs((5, N), device=impl.DEVICE)
    check_backward(impl, x, g, dy)


def test_a_row_of_zeros(impl):
    """Row 2 of x is all zeros: the r the kernel is given there is 1/sqrt(eps), finite. A backward that
    recomputes r without eps gets 1/sqrt(0) instead."""
    x, g, dy = random_inputs((6, 64), device=impl.DEVICE)
    x[2] = 0
    check_backward(impl, x, g, dy, story=f"{describe(x)} (row 2 is all zeros)")


def test_strided_rows_and_untouched_dy(impl):
    """x and dy as views whose rows are 160 elements apart while N = 80; dy must come back unchanged."""
    x, g, dy = strided_inputs(device=impl.DEVICE)
    check_backward(impl, x, g, dy,
                   story=f"{describe(x)} and dy whose rows are 160 elements apart (row stride 160, N 80)")


def test_strided_x_and_contiguous_dy(impl):
    """x a view whose rows are 160 elements apart, dy contiguous (rows 80 apart): each takes its own stride."""
    x, g, dy = strided_inputs(device=impl.DEVICE)
    dy = dy.contiguous()
    check_backward(impl, x, g, dy,
                   story=f"{describe(x)} whose rows are 160 elements apart, and a contiguous dy whose rows are 80 "
                         f"apart")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_half_precision(impl, dtype):
    """16-bit x, g and dy; fp32 math inside; dx stored in x's dtype, dg_partial in fp32."""
    x, g, dy = random_inputs((33, 200), dtype, device=impl.DEVICE)
    dx = check_backward(impl, x, g, dy)
    assert dx.dtype == dtype


def test_backward_reads_x_and_dy_once_and_writes_dx_once(sim_impl):
    """On the simulator: a fused backward loads x and dy once each and stores dx once (and runs race-free)."""
    import mini_triton as triton
    M, N = 64, 256
    x, g, dy = random_inputs((M, N))
    with triton.record() as rec:
        dx, _, how, _ = launch_backward(sim_impl, x, g, dy)
    args = {a.data_ptr: a for a in rec.launches[0].args.values()}
    for name, t, kind in (("x", x, "loaded"), ("dy", dy, "loaded"), ("dx", dx, "stored")):
        arg = args[t.data_ptr()]
        per_elem = getattr(arg, kind) / (M * N)
        if per_elem != 1.0:
            # each program loads each of its elements once, yet some twice in all: programs load each other's rows
            shared = kind == "loaded" and per_elem > 1 and arg.loaded_per_program() == arg.loaded
            fix = ("no program loads an element twice, but programs load each other's rows: their shares overlap. "
                   "Check which rows each program loads, masks included (a row mask that lets a program reach one "
                   "row past its share, say)" if shared else
                   "keep each tile in registers for both the dot product and dx")
            raise AssertionError(f"your backward {kind} {name} {per_elem:.1f} times per element (launched with "
                                 f"{how}); a fused backward reads x and dy once and writes dx once: {fix}")


@pytest.mark.parametrize("M, N, BLOCK_N", [(3, 300, 128), (2, 32768, 4096)], ids=["3x300", "2x32768"])
def test_long_rows_in_chunks(impl, M, N, BLOCK_N):
    """SINGLE_PASS=False, the chunked path, for rows longer than MAX_FUSED_N: the kernel loops over each row
    in chunks of BLOCK_N columns, one pass for the dot product sum(dy·g·x) and one to write dx."""
    x, g, dy = random_inputs((M, N), device=impl.DEVICE)
    check_backward(impl, x, g, dy, BLOCK_N=BLOCK_N, SINGLE_PASS=False)
