"""Part (d), extra credit: the improved dg reduction. `make test PART=d`.

Part (d) changes two functions (handout, part (d)):
- rmsnorm_bwd_kernel takes n_rows and rows_per_program (and BLOCK_M: tl.constexpr if a program takes
  several rows at a time), walks its share of the rows, sums their terms of dg in fp32 registers and
  stores one row of dg_partial at the end;
- rmsnorm_backward launches a few programs, each with many rows, and a (programs x N) partial buffer.

The first tests launch your kernel as part (b)'s tests do, now with several rows per program; the
others go through rmsnorm_backward. The grader's item 9 also needs a fused backward and the same dg in
every run: part (c)'s tests check both.
"""
import pytest
import torch

from rmsnorm_testkit.compare import describe, random_inputs, reference, strided_inputs
from rmsnorm_testkit.diagnose import KernelLog
from test_part_b import check_backward
from test_part_c import check_given_r

GRADER_SHAPE = (256, 128)          # where the grader measures the partial buffer
TALL_SHAPE = (296, 64)            # and a shape of many rows, as the grader draws one for each grading


@pytest.mark.parametrize("shape, rows_per_program, BLOCK_M", [((37, 100), 8, 2), ((7, 513), 3, 1),
                                                             ((23, 64), 5, 2)],
                         ids=["37x100-8rows-by2", "7x513-3rows-by1", "23x64-5rows-by2"])
def test_several_rows_per_program(impl, shape, rows_per_program, BLOCK_M):
    """rows_per_program rows per program, BLOCK_M at a time (BLOCK_M is passed only if your kernel takes it).
    The last program has fewer rows than the others (37 = 4·8 + 5; 7 = 2·3 + 1; 23 = 4·5 + 3). With 5 rows
    by 2, a program's last tile reaches one row into the next program's share: mask it."""
    x, g, dy = random_inputs(shape, device=impl.DEVICE)
    check_backward(impl, x, g, dy, rows_per_program=rows_per_program, BLOCK_M=BLOCK_M)


def test_several_rows_per_program_strided_and_bf16(impl):
    """Strided x and dy (rows 160 elements apart, N = 80), then bf16: still x_row_stride, still fp32 sums."""
    x, g, dy = strided_inputs(device=impl.DEVICE)
    check_backward(impl, x, g, dy, rows_per_program=4, BLOCK_M=2,
                   story=f"{describe(x)} and dy whose rows are 160 elements apart")
    x, g, dy = random_inputs((33, 200), torch.bfloat16, device=impl.DEVICE)
    check_backward(impl, x, g, dy, rows_per_program=4, BLOCK_M=2)


def test_long_rows_in_chunks_several_rows_per_program(impl):
    """SINGLE_PASS=False with 3 rows per program: a row of dg does not fit in registers, so the program adds
    each row's terms into its row of dg_partial chunk by chunk (load, add, store). The test gives a
    dg_partial of zeros, as your wrapper must."""
    x, g, dy = random_inputs((5, 300), device=impl.DEVICE)
    check_backward(impl, x, g, dy, rows_per_program=3, BLOCK_M=1, BLOCK_N=128, SINGLE_PASS=False)


@pytest.mark.parametrize("shape", [(1, 64), (300, 100), (9, 20000)], ids=str)
def test_backward_wrapper_at_many_row_counts(impl, shape):
    """rmsnorm_backward with r from the float64 reference: however your wrapper splits M rows among its
    programs (one row, 300 rows, and rows of 20000 that take the chunked path), every row counts once."""
    x, g, dy = random_inputs(shape, device=impl.DEVICE)
    r = reference(x, g)[1].float().to(x.device)
    with KernelLog(impl) as log:
        dx, dg = impl.rmsnorm_backward(dy, x, g, r)
    check_given_r(log, x, g, dy, r, dx, dg)


@pytest.mark.parametrize("shape", [GRADER_SHAPE, TALL_SHAPE], ids=lambda s: f"{s[0]}x{s[1]}")
def test_partial_dg_buffer_holds_at_most_an_eighth_of_x(sim_impl, shape):
    """On the simulator, at the grader's M, N = 256, 128 and at a shape of many rows like those the grader draws
    (264 to 384 rows, a multiple of 8): the buffers your backward's kernels store into, besides dx and dg, hold at
    most M·N/8 elements (few programs, each summing dg over many rows, at any M)."""
    import mini_triton as triton
    from mini_triton.perf import H200
    M, N = shape
    x, g, dy = random_inputs((M, N))
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    with triton.record() as fwd:
        y = sim_impl.rmsnorm(xg, gg)
    with triton.record() as rec:
        y.backward(dy)
    assert rec.launches, "your backward launched no kernel"
    outputs = {t.untyped_storage().data_ptr() for t in (xg.grad, gg.grad) if t is not None}
    forward = {L.kernel for L in fwd.launches}          # the forward's kernels run again to recompute r: not dg's
    scratch = [(L.kernel, name, a.numel) for L in rec.launches if L.kernel not in forward
               for name, a in L.args.items() if a.stored and a.storage not in outputs]
    if not scratch:
        return
    kernel, name, numel = max(scratch, key=lambda s: s[2])
    if numel > M * N // 8:
        raise AssertionError(
            f"{kernel} stores into {name}, a buffer of {numel} elements, for x of shape ({M}, {N}): the improved "
            f"reduction keeps the partial dg buffer at most M·N/8 = {M * N // 8} elements. In rmsnorm_backward, "
            f"launch a few programs (a small multiple of the SM count: on the CPU the course GPU's {H200.sms}), never "
            f"more than ⌈M / 8⌉ = {-(-M // 8)} so that each program gets at least 8 rows, give each "
            f"rows_per_program = ⌈M / programs⌉ rows, and allocate dg_partial as (programs, N): the kernel sums "
            f"its rows' share of dg in fp32 registers and stores one row (handout, part (d))")
