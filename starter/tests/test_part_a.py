"""Part (a): your forward kernel, rmsnorm_fwd_kernel, on its own.

Each test launches the kernel itself, the way your wrapper will in part (c), so these tests pass
as soon as part (a) is done: `make test PART=a`. Outputs start filled with 4096.0, so a lane that
no program stores is reported as such. The simplest launch comes first, long rows in chunks last.
A wrong output is diagnosed (rmsnorm_testkit/diagnose.py): the message names the mistake when it is a
known one (eps left out, a mean over the block instead of N...).
"""
import pytest
import torch

from rmsnorm_testkit.compare import FILL, describe, filled, random_inputs, reference, strided_inputs
from rmsnorm_testkit.causes import forward_alternatives, pick
from rmsnorm_testkit.diagnose import KernelLog, diagnose_all, fail_if, strides_named
from test_part_b import kernel_params


# The kernel's parameters by name, as the starter declares them.
PART_A_PARAMS = ("x_ptr", "g_ptr", "y_ptr", "r_ptr", "n_rows", "n_cols", "x_row_stride", "y_row_stride", "eps",
                 "BLOCK_M", "BLOCK_N", "SINGLE_PASS")


def launch_forward(impl, x, g, BLOCK_M, BLOCK_N=None, SINGLE_PASS=True, eps=1e-5):
    """(y, r, how it was launched) from one launch of your kernel on the (M, N) matrix x, its arguments passed by
    the names of the starter's parameters."""
    __tracebackhide__ = True                  # pytest: show the test, then your kernel's line
    M, N = x.shape
    BLOCK_N = BLOCK_N or impl.triton.next_power_of_2(N)
    y = filled((M, N), x.dtype, x.device)
    r = filled((M,), torch.float32, x.device)
    grid = (impl.triton.cdiv(M, BLOCK_M),)
    args = dict(zip(PART_A_PARAMS, (x, g, y, r, M, N, x.stride(0), y.stride(0), eps, BLOCK_M, BLOCK_N, SINGLE_PASS)))
    params = kernel_params(impl.rmsnorm_fwd_kernel)
    unknown = [n for n in params if n not in args]
    if unknown:
        raise AssertionError(
            f"rmsnorm_fwd_kernel has parameters the tests do not know: {', '.join(unknown)}. The tests launch it "
            f"themselves and pass the arguments by name: keep the starter's parameters ({', '.join(PART_A_PARAMS)})")
    impl.rmsnorm_fwd_kernel[grid](**{n: args[n] for n in params})
    return y, r, f"grid {grid}, BLOCK_M={BLOCK_M}, BLOCK_N={BLOCK_N}, SINGLE_PASS={SINGLE_PASS}"


def check_forward(impl, x, g, BLOCK_M, story=None, eps=1e-5, **launch):
    """Launch, then check r (the root of every y) and y against the float64 reference, naming the cause of
    what is wrong."""
    __tracebackhide__ = True                  # pytest: show the test, then your kernel's line
    with strides_named(x), KernelLog(impl, host_ops=False) as log:
        y, r, how = launch_forward(impl, x, g, BLOCK_M, eps=eps, **launch)
    nan, loads = log.nan_source()
    story = f"{story or describe(x)}, launched with {how}"
    ref_y, ref_r, _, _ = reference(x, g, eps=eps)
    block_n = launch.get("BLOCK_N") or impl.triton.next_power_of_2(x.shape[-1])
    alts = forward_alternatives(x, g, eps, block_n=block_n)
    fail_if(diagnose_all([(name, got, want, x, dict(alternatives=pick(alts, i), stored=got != FILL, story=story,
                                                    source=" from rmsnorm_fwd_kernel", who="rmsnorm_fwd_kernel",
                                                    nan_cause=nan,
                                                    fmt={"eps": eps, "B": block_n, "stride": x.stride(0), **loads}))
                          for name, got, want, i in (("r", r, ref_r, 1), ("y", y, ref_y, 0))]))
    return y, r


def test_one_row_per_program(impl):
    """The lecture's kernel: BLOCK_M = 1, N = 100 in a block of 128 lanes (28 masked)."""
    x, g, _ = random_inputs((37, 100), device=impl.DEVICE)
    check_forward(impl, x, g, BLOCK_M=1)


def test_several_rows_per_program(impl):
    """BLOCK_M = 4 rows per program; 37 is not a multiple of 4, so the last program masks 3 rows."""
    x, g, _ = random_inputs((37, 100), device=impl.DEVICE)
    check_forward(impl, x, g, BLOCK_M=4)


@pytest.mark.parametrize("N", [1, 513], ids=lambda n: f"N={n}")
def test_n_not_a_power_of_two(impl, N):
    """N = 513 needs a block of 1024 lanes, 511 of them masked; N = 1 has one lane."""
    x, g, _ = random_inputs((5, N), device=impl.DEVICE)
    check_forward(impl, x, g, BLOCK_M=2)


def test_the_eps_the_caller_passes(impl):
    """eps = 0.1, far from the default, with a row of zeros (r = 1/sqrt(eps) there): eps belongs inside the
    square root, and the kernel uses the value it is given."""
    x, g, _ = random_inputs((6, 64), device=impl.DEVICE)
    x[2] = 0
    check_forward(impl, x, g, BLOCK_M=2, eps=0.1, story=f"{describe(x)} (eps = 0.1; row 2 is all zeros)")


def test_strided_rows(impl):
    """x as a view whose rows are 160 elements apart while N = 80: the kernel takes the row stride."""
    x, g, _ = strided_inputs(device=impl.DEVICE)
    check_forward(impl, x, g, BLOCK_M=2, story=f"{describe(x)} whose rows are 160 elements apart (row stride 160, "
                                               f"N 80)")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_half_precision(impl, dtype):
    """16-bit x and g, fp32 math inside, y stored in x's dtype and r in fp32."""
    x, g, _ = random_inputs((33, 200), dtype, device=impl.DEVICE)
    y, r = check_forward(impl, x, g, BLOCK_M=2)
    assert y.dtype == dtype and r.dtype == torch.float32


def test_forward_reads_x_once_and_writes_y_once(sim_impl):
    """On the simulator: a fused forward loads each element of x once and stores y and r once."""
    import mini_triton as triton
    M, N = 64, 256
    x, g, _ = random_inputs((M, N))
    with triton.record() as rec:
        y, r, how = launch_forward(sim_impl, x, g, BLOCK_M=2)
    assert rec.launches, "rmsnorm_fwd_kernel ran no program"
    args = {a.data_ptr: a for a in rec.launches[0].args.values()}
    for name, t, kind, want in (("x", x, "loaded", M * N), ("y", y, "stored", M * N), ("r", r, "stored", M)):
        moved = getattr(args[t.data_ptr()], kind)
        if moved != want:
            raise AssertionError(
                f"your forward {kind} {name} {moved / want:.1f} times per element (launched with {how}); a fused "
                f"kernel reads x once and writes y and r once: keep the loaded tile of x in registers and use it "
                f"for both the sum of squares and y")
    assert not (y == FILL).any()


@pytest.mark.parametrize("M, N, BLOCK_N, dtype", [(3, 300, 128, torch.float32), (2, 32768, 4096, torch.float32),
                                                  (2, 65536, 4096, torch.bfloat16)],
                         ids=["3x300-fp32", "2x32768-fp32", "2x65536-bf16"])
def test_long_rows_in_chunks(impl, M, N, BLOCK_N, dtype):
    """SINGLE_PASS=False, the chunked path: the wrapper sends rows longer than MAX_FUSED_N (16384), which do
    not fit in a program's registers, through it, and the kernel loops over each row in chunks of BLOCK_N
    columns, one pass for the sum of squares and one to write y (N = 300 in chunks of 128 is the same loop
    on a small row). Sum the squares in fp32: tl.sum adds bf16 values in bf16, and a long row's running sum
    then swallows its small terms."""
    x, g, _ = random_inputs((M, N), dtype, device=impl.DEVICE)
    check_forward(impl, x, g, BLOCK_M=1, BLOCK_N=BLOCK_N, SINGLE_PASS=False)
