"""Part (d), extra credit: the improved dg reduction. `make test PART=d`.

The grader's item 9 needs three things: a fused backward (test_part_c's
test_backward_reads_x_and_dy_once_and_writes_dx_once), a deterministic dg (test_part_c's
test_backward_gives_the_same_dg_in_every_run) and a small partial dg buffer, checked here at the
grader's shape.
"""
from rmsnorm_check import random_inputs


def test_partial_dg_buffer_holds_at_most_an_eighth_of_x(sim_impl):
    """On the simulator, at M, N = 256, 128: the buffers your backward's kernels store into, besides dx
    and dg, hold at most M·N/8 elements (few programs, each summing dg over many rows)."""
    import mini_triton as triton
    M, N = 256, 128
    x, g, dy = random_inputs((M, N))
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    y = sim_impl.rmsnorm(xg, gg)
    with triton.record() as rec:
        y.backward(dy)
    assert rec.launches, "your backward launched no kernel"
    outputs = {t.untyped_storage().data_ptr() for t in (xg.grad, gg.grad) if t is not None}
    scratch = [(L.kernel, name, a.numel) for L in rec.launches for name, a in L.args.items()
               if a.stored and a.storage not in outputs]
    if not scratch:
        return
    kernel, name, numel = max(scratch, key=lambda s: s[2])
    if numel > M * N // 8:
        raise AssertionError(
            f"{kernel} stores into {name}, a buffer of {numel} elements, for x of shape ({M}, {N}): the improved "
            f"reduction keeps the partial dg buffer at most M·N/8 = {M * N // 8} elements. Launch a few programs "
            f"(_num_programs_bwd), give each rows_per_program = ⌈M / programs⌉ rows, sum its share of dg in "
            f"fp32 registers across them and store one row of dg_partial at the end")
