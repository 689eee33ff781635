"""Where the time of one RMSNorm step goes, on a GPU:

    python3 tests/profile_step.py [--shapes 16384x4096 ...] [--dtypes fp32 bf16] [--table] [--impl PATH]

For each shape and dtype: do_bench medians (and % of the copy bandwidth) of the forward
wrapper, the backward wrapper and one forward+backward through autograd, and the host time
of each call at a tiny shape, where the GPU finishes first. With --table, torch.profiler's
table of the CUDA kernels one forward+backward runs: stray copies show up as extra kernels.
"""
import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "starter" / "tests")]
from rmsnorm_check import load_impl  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def steps(impl, x, g, dy):
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    y, r = impl.rmsnorm_forward(x, g)
    return {"copy x->y": (lambda: y.copy_(x), 2),
            "rmsnorm_forward": (lambda: impl.rmsnorm_forward(x, g), 2),
            "rmsnorm_backward": (lambda: impl.rmsnorm_backward(dy, x, g, r), 3),
            "autograd fwd+bwd": (lambda: torch.autograd.grad(impl.rmsnorm(xg, gg), (xg, gg), dy), 5)}


def host_us(f, n=200):
    """Microseconds per call of a loop that never waits for the GPU (host-bound at tiny shapes)."""
    f()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        f()
    out = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return out


def inputs(M, N, dtype):
    x = torch.randn(M, N, device="cuda", dtype=dtype)
    return x, torch.rand(N, device="cuda", dtype=dtype) + 0.5, torch.randn_like(x)


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", default=str(ROOT / "solution" / "rmsnorm.py"))
    ap.add_argument("--shapes", nargs="*", default=["16384x4096"])
    ap.add_argument("--dtypes", nargs="*", default=["fp32", "bf16"])
    ap.add_argument("--table", action="store_true")
    args = ap.parse_args(argv)
    impl = load_impl(args.impl)
    assert impl.BACKEND == "triton", "needs a GPU"
    bench = lambda f: impl.triton.testing.do_bench(f, warmup=25, rep=100, return_mode="median")  # noqa: E731
    for d in args.dtypes:
        tiny = {name: host_us(f) for name, (f, _) in steps(impl, *inputs(16, 4096, DTYPES[d])).items()}
        print(f"\n{d}: host time per call at 16x4096 (us): " +
              ", ".join(f"{k} {v:.0f}" for k, v in tiny.items()))
        for s in args.shapes:
            M, N = map(int, s.split("x"))
            x, g, dy = inputs(M, N, DTYPES[d])
            times = {name: (bench(f), passes) for name, (f, passes) in steps(impl, x, g, dy).items()}
            copy = times["copy x->y"][0]
            print(f"{d} {M}x{N}: " + "  ".join(f"{name} {ms:.4f} ms {100 * passes * copy / 2 / ms:.0f}%"
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
