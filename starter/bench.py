"""Time your RMSNorm against PyTorch eager: `make bench`.

On a GPU (real Triton) it prints forward and forward+backward times, GB/s and the
speedup over eager. On the CPU simulator the times say nothing about a GPU, so it
prints the memory traffic instead: what your kernels moved against the minimum.
"""
import os
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "tests"))
from rmsnorm_check import eager, load_impl  # noqa: E402

GPU_SHAPES = [(4096, 1024), (16384, 4096), (8192, 8192)]
SIM_SHAPES = [(256, 1024), (37, 100), (64, 4096)]


def gpu_table(impl):
    import triton
    print(f"{'dtype':>6} {'shape':>12} {'fwd ms':>8} {'GB/s':>7} {'eager':>8} {'x':>6} "
          f"{'fwd+bwd ms':>11} {'eager':>8} {'x':>6}")
    for dtype in (torch.float32, torch.bfloat16):
        for M, N in GPU_SHAPES:
            x = torch.randn(M, N, device="cuda", dtype=dtype, requires_grad=True)
            g = torch.randn(N, device="cuda", dtype=dtype, requires_grad=True)
            dy = torch.randn_like(x)
            f = triton.testing.do_bench(lambda: impl.rmsnorm_forward(x, g), return_mode="median")
            fe = triton.testing.do_bench(lambda: eager(x, g), return_mode="median")
            b = triton.testing.do_bench(lambda: impl.rmsnorm(x, g).backward(dy), return_mode="median",
                                        grad_to_none=[x, g])
            be = triton.testing.do_bench(lambda: eager(x, g).backward(dy), return_mode="median",
                                         grad_to_none=[x, g])
            gbs = 2 * M * N * x.element_size() / f / 1e6
            print(f"{str(dtype)[6:]:>6} {f'{M}x{N}':>12} {f:>8.3f} {gbs:>7.0f} {fe:>8.3f} {fe / f:>5.1f}x "
                  f"{b:>11.3f} {be:>8.3f} {be / b:>5.1f}x")


def sim_table(impl):
    import mini_triton as triton
    print("CPU simulator: simulated time against PyTorch eager on the CPU (says nothing about GPU speed)")
    print(f"{'shape':>10} {'fwd ms':>9} {'eager ms':>9} {'fwd+bwd ms':>11} {'eager ms':>9}")
    for M, N in SIM_SHAPES:
        x = torch.randn(M, N, requires_grad=True)
        g = torch.randn(N, requires_grad=True)
        dy = torch.randn(M, N)
        bench = lambda f: triton.testing.do_bench(f, warmup=5, rep=50, return_mode="median")  # noqa: E731
        f, fe = bench(lambda: impl.rmsnorm_forward(x.detach(), g.detach())), bench(lambda: eager(x, g))
        b = bench(lambda: impl.rmsnorm(x, g).backward(dy))
        be = bench(lambda: eager(x, g).backward(dy))
        print(f"{f'{M}x{N}':>10} {f:>9.2f} {fe:>9.2f} {b:>11.2f} {be:>9.2f}")
    print()
    print("Elements moved by your kernels against the minimum a fused kernel needs")
    print(f"{'shape':>10} {'pass':>9} {'loaded':>12} {'min':>12} {'stored':>12} {'min':>12} {'launches':>9}")
    for M, N in SIM_SHAPES:
        x = torch.randn(M, N, requires_grad=True)
        g = torch.randn(N, requires_grad=True)
        with triton.record() as fwd:
            y = impl.rmsnorm(x, g)
        with triton.record() as bwd:
            y.backward(torch.randn_like(y))
        for name, rec, lmin, smin in (("forward", fwd, M * N + N, M * N + M),
                                      ("backward", bwd, 2 * M * N + N + M, M * N + N)):
            t = rec.totals()
            print(f"{f'{M}x{N}':>10} {name:>9} {t['loaded']:>12,} {lmin:>12,} {t['stored']:>12,} {smin:>12,} "
                  f"{t['launches']:>9}")


def main():
    impl = load_impl(os.environ.get("RMSNORM_IMPL", HERE / "rmsnorm.py"))
    print(f"implementation: {impl.__file__} (backend: {impl.BACKEND})\n")
    if impl.BACKEND == "triton":
        gpu_table(impl)
    else:
        sim_table(load_impl(impl.__file__, backend="mini_triton"))


if __name__ == "__main__":
    main()
