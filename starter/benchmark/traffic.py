"""`make bench` on the CPU simulator: times say nothing about a GPU there, so it shows what carries over, the
bytes your kernels move against the minimum of a fused kernel, beside the bytes PyTorch eager moves for the same
work (from the simulator's log of host-side torch ops); then item 10's speed on the course GPU, predicted from
the simulator's record of your kernels (rmsnorm_testkit/predict.py).
"""
import torch
from rmsnorm_testkit import predict
from rmsnorm_testkit.compare import eager, load_impl
from rmsnorm_testkit.text import error_line
from rmsnorm_testkit.timing import KERNELS, SPEED_SHAPE, least_bytes

from .measure import wrong_outputs
from .plots import plot_sim


def eager_traffic(rec, M, N, elem):
    """Bytes the PyTorch ops of a record(host_ops=True) move through M·N tensors, and through the others:
    each op (one kernel on a GPU) reads its inputs and writes its outputs once; views move nothing."""
    big = other = 0
    for op in rec.host_ops:
        if op.reads == 0:                           # views, allocations
            continue
        for n in (*op.in_numels, *op.out_numels):
            if n == M * N:
                big += n * elem
            else:
                other += n * elem
    return big, other


def sim_report(impl_path, shapes, out_dir):
    import mini_triton as triton
    impl = load_impl(impl_path, backend="mini_triton")
    print("CPU simulator: bytes moved through the M·N tensors (x, y, dy, dx, and an M x N partial dg buffer,")
    print("which makes part (b)'s fused backward 1.33-1.67) against the minimum of a fused kernel (forward 2·M·N")
    print("elements, backward 3·M·N), and through the small ones (g, r, a smaller partial dg buffer; on a")
    print("GPU, g mostly hits in cache). 'yours' counts your kernels' loads and stores; 'eager' counts")
    print("the PyTorch ops of x * rsqrt(mean(x²) + eps) * g and its autograd backward, each reading its")
    print("inputs and writing its output once (one GPU kernel each). Time on a GPU follows the M·N bytes.\n")
    print(f"{'shape':>10} {'pass':>9} {'who':>6} {'M·N bytes':>12} {'minimum':>12} {'ratio':>6} {'other bytes':>12} "
          f"{'launches':>9}")
    rows = []
    for M, N in shapes:
        x = torch.randn(M, N, requires_grad=True)
        g = torch.randn(N, requires_grad=True)
        dy = torch.randn(M, N)
        fwd, bwd, why = step_records(triton, impl, x, g, dy)
        xe, ge = x.detach().clone().requires_grad_(True), g.detach().clone().requires_grad_(True)
        with triton.record(host_ops=True) as eager_fwd:
            ye = eager(xe, ge)
        with triton.record(host_ops=True) as eager_bwd:
            ye.backward(dy)
        try:
            wrong = wrong_outputs(impl, x, g, dy)
        except Exception:                                # noqa: BLE001 -- a step that does not run: said below
            wrong = None
        if wrong:
            print(f"{f'{M}x{N}':>10}  your outputs are wrong here, so the counts below mean little: {wrong}")
        for kernel, rec, erec in (("rmsnorm_fwd_kernel", fwd, eager_fwd), ("rmsnorm_bwd_kernel", bwd, eager_bwd)):
            name = KERNELS[kernel][0]
            if rec is None:
                print(f"{f'{M}x{N}':>10} {name:>9} {'yours':>6}   not run: {why[kernel]}")
                continue
            big, other = 0, 0
            for L in rec.launches:
                for a in L.args.values():
                    moved = a.loaded_bytes + a.stored_bytes
                    if a.numel == M * N:
                        big += moved
                    else:
                        other += moved
            minimum = least_bytes(kernel, (M, N), x.dtype)
            e_big, e_other = eager_traffic(erec, M, N, x.element_size())
            e_ops = sum(1 for op in erec.host_ops if op.reads)
            rows.append((name, N, big / minimum, e_big / minimum))
            print(f"{f'{M}x{N}':>10} {name:>9} {'yours':>6} {big:>12,} {minimum:>12,} {big / minimum:>6.2f} "
                  f"{other:>12,} {len(rec.launches):>9}")
            print(f"{'':>10} {'':>9} {'eager':>6} {e_big:>12,} {minimum:>12,} {e_big / minimum:>6.2f} "
                  f"{e_other:>12,} {e_ops:>9}")
    plot_sim(rows, out_dir / "bench_sim.png")
    print_prediction(impl)


def step_records(triton, impl, x, g, dy):
    """(the forward's record, the backward's, {kernel: why it did not run}) of one step: through autograd
    (``rmsnorm`` and its backward), or, where that does not run yet, through rmsnorm_forward and rmsnorm_backward
    (a forward written before its Function); a pass that raises has no record, and the reason."""
    why = {}
    try:
        with triton.record() as fwd:
            y = impl.rmsnorm(x, g)
        with triton.record() as bwd:
            y.backward(dy)
        return fwd, bwd, why
    except Exception:                                    # noqa: BLE001 -- the passes one at a time, below
        pass
    fwd = bwd = r = None
    try:
        with triton.record() as fwd:
            _, r = impl.rmsnorm_forward(x.detach(), g.detach())
    except Exception as e:                               # noqa: BLE001
        fwd, why["rmsnorm_fwd_kernel"] = None, error_line(e)
    try:
        if r is None:
            raise RuntimeError("the forward did not run, so there is no r for it")
        with triton.record() as bwd:
            impl.rmsnorm_backward(dy, x.detach(), g.detach(), r)
    except Exception as e:                               # noqa: BLE001
        bwd, why["rmsnorm_bwd_kernel"] = None, error_line(e)
    return fwd, bwd, why


def print_prediction(impl, gpu: str = "H200"):
    """Item 10's steps predicted on the course GPU, each as a share of a copy's bandwidth (or "implausible" above
    a copy's), with where the time goes, the path the wrappers took with the course GPU in view, and what may make
    the prediction wrong."""
    M, N = SPEED_SHAPE
    print(f"\npredicted on an {gpu}, at item 10's shape {M}x{N} (a prediction from the simulator's record of your "
          f"kernels, not a measurement: the handout's part (e) says how it is made and how close it comes):")
    notes, paths = [], []
    for dtype in predict.DTYPES:
        got = predict.item_10(impl, dtype, gpu)
        print(f"  {got.line()}")
        step = got.steps.get("fwdbwd") or got.steps.get("fwd")
        if step is not None:
            where = ", ".join(f"{name} {100 * share:.0f}%" for name, _, share in step.by_kernel()[:4])
            print(f"    where the {dtype} {'forward+backward' if 'fwdbwd' in got.steps else 'forward'}'s time goes: "
                  f"{where}")
        notes += [n for n in got.notes if n not in notes]
        if got.path is not None and got.path.line() not in paths:
            paths.append(got.path.line())
    for p in paths:
        print(f"  the GPU's path: {p}")
    for n in notes:
        print(f"  note: {n}")
