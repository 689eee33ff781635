"""Where the time of one RMSNorm step goes, on a GPU:

    python3 tests/profile_step.py [--shapes 16384x4096 ...] [--dtypes fp32 bf16] [--table] [--primitives]
                                  [--impl PATH]
    python3 tests/profile_step.py --host [--shapes 16x4096 2048x4096] [--dtypes fp32 bf16]

For each shape and dtype: do_bench medians (and % of the copy bandwidth) of the forward
wrapper, the backward wrapper and one forward+backward through autograd, and the host time
of each call at a tiny shape, where the GPU finishes first (beside a trivial autograd.Function,
and split into the time inside the wrappers and autograd's own; with --primitives, the time of
an allocation, a view, a check and a launch). Host timings are noisy where other work shares
the machine: run it alone. With --table, torch.profiler's
table of the CUDA kernels one forward+backward runs: stray copies show up as extra kernels.

--host: the wall time of a step as a training loop sees it (50 forward+backward steps back to back, one
wait for the GPU at the end; the median and range of 7 such loops), for the solution's step launched
through its launch cache and through Triton's own ``kernel[grid](...)``, beside F.rms_norm's step and
the floors: an autograd.Function that launches nothing (``Empty``), and one launch of an empty kernel.
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "starter")]                 # rmsnorm_testkit
from rmsnorm_testkit.compare import DTYPES, load_impl  # noqa: E402
from rmsnorm_testkit.timing import COPY_ELEMENTS, least_elements  # noqa: E402


def steps(impl, x, g, dy):
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    y, r = impl.rmsnorm_forward(x, g)
    return {"copy x->y": (lambda: y.copy_(x), COPY_ELEMENTS),
            "rmsnorm_forward": (lambda: impl.rmsnorm_forward(x, g), least_elements("rmsnorm_fwd_kernel")),
            "rmsnorm_backward": (lambda: impl.rmsnorm_backward(dy, x, g, r), least_elements("rmsnorm_bwd_kernel")),
            "autograd fwd+bwd": (lambda: torch.autograd.grad(impl.rmsnorm(xg, gg), (xg, gg), dy),
                                 least_elements("fwdbwd"))}


class Times2(torch.autograd.Function):
    """The least an autograd.Function step costs: one PyTorch kernel each way."""
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, dy):
        return dy * 2


class Empty(torch.autograd.Function):
    """The least any autograd.Function step costs: no kernel either way."""
    @staticmethod
    def forward(ctx, x, g):
        return torch.empty_like(x)

    @staticmethod
    def backward(ctx, dy):
        return dy, None


def loop_us(f, n=50, trials=7, wait=True):
    """(median, least, most) microseconds per call of ``n`` calls back to back, over ``trials`` loops. With
    ``wait``, each loop ends with a wait for the GPU: what a training loop sees (the host's time when it is
    the bottleneck); without, only the calls are timed."""
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(trials):
        t = time.perf_counter()
        for _ in range(n):
            f()
        if wait:
            torch.cuda.synchronize()
        per_call.append((time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
    return statistics.median(per_call), min(per_call), max(per_call)


def host_table(impl, shapes, dtypes):
    """--host: a step's wall time, launched two ways, beside F.rms_norm's and the floors."""

    @impl.triton.jit
    def empty_kernel(x_ptr):
        pass
    cached = {n: getattr(impl, n) for n in ("rmsnorm_fwd_kernel", "rmsnorm_bwd_kernel", "dg_sum_kernel")}
    plain = {n: getattr(k, "kernel", k) for n, k in cached.items()}
    print(f"{'dtype':>5} {'shape':>10} {'what':>38} {'us per step (median [range])':>30}")
    for d in dtypes:
        for s in shapes:
            M, N = map(int, s.split("x"))
            x, g, dy = inputs(M, N, DTYPES[d])
            xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
            rows = [("step, launch cache", cached, lambda: torch.autograd.grad(impl.rmsnorm(xg, gg), (xg, gg), dy)),
                    ("step, Triton's kernel[grid](...)", plain,
                     lambda: torch.autograd.grad(impl.rmsnorm(xg, gg), (xg, gg), dy)),
                    ("F.rms_norm step", None,
                     lambda: torch.autograd.grad(torch.nn.functional.rms_norm(xg, (N,), gg, 1e-5), (xg, gg), dy)),
                    ("floor: an empty autograd.Function step", None,
                     lambda: torch.autograd.grad(Empty.apply(xg, gg), xg, dy)),
                    ("floor: one launch of an empty kernel", None, lambda: empty_kernel[(1,)](x))]
            for name, kernels, f in rows:
                for k_name, k in (kernels or {}).items():
                    setattr(impl, k_name, k)
                med, lo, hi = loop_us(f)
                print(f"{d:>5} {s:>10} {name:>38} {med:>14.0f} [{lo:.0f}, {hi:.0f}]", flush=True)
            for k_name, k in cached.items():
                setattr(impl, k_name, k)


def inside_wrappers(impl, step, n=200):
    """Microseconds per step spent inside rmsnorm_forward and rmsnorm_backward (the rest of a
    step is autograd's own work: the Function's context, saved tensors, the backward engine)."""
    spent, wrapped = {}, {}
    for name in ("rmsnorm_forward", "rmsnorm_backward"):
        f = wrapped[name] = getattr(impl, name)

        def timed(*a, _f=f, _name=name, **k):
            t = time.perf_counter()
            out = _f(*a, **k)
            spent[_name] = spent.get(_name, 0.0) + time.perf_counter() - t
            return out
        setattr(impl, name, timed)
    try:
        total = host_us(step, n)
    finally:
        for name, f in wrapped.items():
            setattr(impl, name, f)
    return total, {k: v / (1 + 5 * n) * 1e6 for k, v in spent.items()}


def primitives(impl, x, g):
    """Host time of the pieces a wrapper is made of, at a tiny shape (median of 7 loops of 500)."""
    n = x.shape[-1]
    y, r = impl.rmsnorm_forward(x, g)
    block_m, block_n, single, warps = impl._fwd_config(n, x.element_size())
    grid = (impl.cdiv(x.shape[0], block_m),)

    def launch():
        return impl.rmsnorm_fwd_kernel[grid](x, g, y, r, x.shape[0], n, x.stride(0), y.stride(0), 1e-5,
                                             BLOCK_M=block_m, BLOCK_N=block_n, SINGLE_PASS=single, num_warps=warps)
    compiled = launch()
    from triton.runtime.driver import driver
    stream = driver.active.get_current_stream(x.device.index)
    return {"torch.empty like x": lambda: torch.empty(x.shape, dtype=x.dtype, device=x.device),
            "a view": lambda: x.view(-1, n),
            "_check_inputs": lambda: impl._check_inputs(x, g),
            "triton.cdiv": lambda: impl.triton.cdiv(x.shape[0], block_m),
            "kernel[grid](...) launch": launch,
            "its compiled launcher alone": lambda: compiled.run(
                grid[0], 1, 1, stream, compiled.function, compiled.packed_metadata, None, None, None,
                x, g, y, r, x.shape[0], n, x.stride(0), y.stride(0), 1e-5, block_m, block_n, single)}


def host_us(f, n=200, trials=5):
    """Microseconds per call of a loop that never waits for the GPU (host-bound at tiny shapes):
    the median of ``trials`` loops of ``n`` calls, as other work on the machine adds noise."""
    return loop_us(f, n, trials, wait=False)[0]


def inputs(M, N, dtype):
    x = torch.randn(M, N, device="cuda", dtype=dtype)
    return x, torch.rand(N, device="cuda", dtype=dtype) + 0.5, torch.randn_like(x)


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", default=str(ROOT / "solution" / "rmsnorm.py"))
    ap.add_argument("--shapes", nargs="*")
    ap.add_argument("--dtypes", nargs="*", default=["fp32", "bf16"])
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--host", action="store_true", help="a step's wall time in a loop, beside the floors")
    ap.add_argument("--primitives", action="store_true",
                    help="also the host time of the pieces of a wrapper: an allocation, a view, a launch")
    args = ap.parse_args(argv)
    impl = load_impl(args.impl)
    assert impl.BACKEND == "triton", "needs a GPU"
    if args.host:
        host_table(impl, args.shapes or ["16x4096", "2048x4096"], args.dtypes)
        return 0
    args.shapes = args.shapes or ["16384x4096"]
    bench = lambda f: impl.triton.testing.do_bench(f, warmup=25, rep=100, return_mode="median")  # noqa: E731
    for d in args.dtypes:
        x, g, dy = inputs(16, 4096, DTYPES[d])
        tiny = {name: host_us(f) for name, (f, _) in steps(impl, x, g, dy).items()}
        xg = x.clone().requires_grad_(True)
        tiny["Times2 autograd.Function fwd+bwd"] = host_us(lambda dy=dy: torch.autograd.grad(Times2.apply(xg), xg, dy))
        print(f"\n{d}: host time per call at 16x4096 (us): " +
              ", ".join(f"{k} {v:.0f}" for k, v in tiny.items()))
        if args.primitives:
            for name, f in primitives(impl, x, g).items():
                print(f"{d}: {name:<28} {host_us(f, 500, 7):6.1f} us", flush=True)
        total, inside = inside_wrappers(impl, steps(impl, x, g, dy)["autograd fwd+bwd"][0])
        print(f"{d}: of a {total:.0f} us step, inside " + ", ".join(f"{k} {v:.0f} us" for k, v in inside.items()) +
              f"; autograd's own work {total - sum(inside.values()):.0f} us")
        for s in args.shapes:
            M, N = map(int, s.split("x"))
            x, g, dy = inputs(M, N, DTYPES[d])
            times = {name: (bench(f), passes) for name, (f, passes) in steps(impl, x, g, dy).items()}
            copy = times["copy x->y"][0]
            print(f"{d} {M}x{N}: " + "  ".join(f"{name} {ms:.4f} ms {100 * passes * copy / COPY_ELEMENTS / ms:.0f}%"
                                               for name, (ms, passes) in times.items()), flush=True)
            if args.table:
                from torch.profiler import ProfilerActivity, profile
                f = steps(impl, x, g, dy)["autograd fwd+bwd"][0]
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    for _ in range(10):
                        f()
                    torch.cuda.synchronize()
                print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=50))
            del x, g, dy
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
