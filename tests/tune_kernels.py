"""Sweep launch configurations of the reference kernels and print a table (for tuning `_config`).

    python3 tests/tune_kernels.py [--shapes 16384x4096 ...] [--dtypes fp32 bf16]

Times the kernels alone (no autograd, no allocation) with triton.testing.do_bench, for
forward BLOCK_M x num_warps and backward programs-per-SM x BLOCK_M x num_warps, checks each
configuration's output against PyTorch, and prints % of the copy bandwidth (forward 2·M·N,
backward 3·M·N elements). On the CPU it runs on mini_triton at the shapes given, which checks
every configuration's correctness but says nothing about speed.
"""
import argparse
import itertools
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "starter" / "tests")]
from rmsnorm_check import load_impl  # noqa: E402

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def sweep(impl, M, N, dtype, fwd_cfgs, bwd_cfgs, bench):
    dev = impl.DEVICE
    x = torch.randn(M, N, device=dev, dtype=dtype)
    g = torch.rand(N, device=dev, dtype=dtype) + 0.5
    dy = torch.randn_like(x)
    y, r = torch.empty_like(x), torch.empty(M, device=dev, dtype=torch.float32)
    dx = torch.empty_like(x)
    ref_y, ref_r = impl.rmsnorm_forward(x, g)
    ref_dx, ref_dg = impl.rmsnorm_backward(dy, x, g, ref_r)
    copy = bench(lambda: y.copy_(x))
    elem = x.element_size()
    pct = lambda passes, ms: 100 * (passes * M * N * elem / ms) / (2 * M * N * elem / copy)  # noqa: E731
    single = N <= impl.MAX_FUSED_N
    block_n = impl.triton.next_power_of_2(N) if single else 4096
    rows = []
    for bm, w in fwd_cfgs:
        if not single and bm != 1:
            continue
        launch = lambda: impl.rmsnorm_fwd_kernel[(impl.triton.cdiv(M, bm),)](  # noqa: E731
            x, g, y, r, M, N, x.stride(0), y.stride(0), 1e-5, BLOCK_M=bm, BLOCK_N=block_n, SINGLE_PASS=single,
            num_warps=w)
        launch()
        ok = torch.allclose(y.float(), ref_y.float(), atol=1e-2, rtol=1e-2)
        ms = bench(launch)
        rows.append(("fwd", f"BLOCK_M={bm} warps={w}", ms, pct(2, ms), ok))
    sms = torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == "cuda" else 2
    for per_sm, bm, w in bwd_cfgs:
        if not single and bm != 1:
            continue
        programs = max(1, min(per_sm * sms, M))
        rpp = impl.triton.cdiv(M, programs)
        programs = impl.triton.cdiv(M, rpp)
        part = torch.zeros((programs, N), device=dev, dtype=torch.float32)

        def launch():
            if not single:
                part.zero_()
            impl.rmsnorm_bwd_kernel[(programs,)](x, g, dy, ref_r, dx, part, M, N, x.stride(0), dy.stride(0),
                                                 dx.stride(0), rpp, BLOCK_M=bm, BLOCK_N=block_n,
                                                 SINGLE_PASS=single, num_warps=w)
            return part.sum(0)
        dg = launch()
        ok = torch.allclose(dx.float(), ref_dx.float(), atol=1e-2, rtol=1e-2) and \
            torch.allclose(dg, ref_dg.float(), atol=1e-1, rtol=1e-2)
        ms = bench(launch)
        rows.append(("bwd+sum", f"programs={per_sm}xSM BLOCK_M={bm} warps={w}", ms, pct(3, ms), ok))
    return copy, rows


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", default=str(ROOT / "solution" / "rmsnorm.py"))
    ap.add_argument("--shapes", nargs="*", default=None)
    ap.add_argument("--dtypes", nargs="*", default=["fp32", "bf16"])
    args = ap.parse_args(argv)
    impl = load_impl(args.impl)
    gpu = impl.BACKEND == "triton"
    shapes = args.shapes or (["16384x4096", "8192x8192", "65536x1024", "4096x16384"] if gpu else ["64x256"])
    bench = (lambda f: impl.triton.testing.do_bench(f, warmup=25, rep=100, return_mode="median")) if gpu else \
        (lambda f: impl.triton.testing.do_bench(f, warmup=1, rep=1, return_mode="median"))
    fwd_cfgs = list(itertools.product((1, 2, 4), (4, 8, 16)))
    bwd_cfgs = list(itertools.product((2, 4, 8), (1, 2), (4, 8, 16)))
    print(f"implementation: {impl.__file__} (backend: {impl.BACKEND})")
    bad = 0
    for d in args.dtypes:
        for s in shapes:
            M, N = map(int, s.split("x"))
            copy, rows = sweep(impl, M, N, DTYPES[d], fwd_cfgs, bwd_cfgs, bench)
            print(f"\n{d} {M}x{N}  (copy {2 * M * N * torch.empty((), dtype=DTYPES[d]).element_size() / copy / 1e6:.0f}"
                  f" GB/s)")
            for kind, cfg, ms, p, ok in sorted(rows, key=lambda r: (r[0], r[2])):
                bad += not ok
                print(f"  {kind:<8}{cfg:<40}{ms:>9.4f} ms {p:>5.0f}% {'' if ok else 'WRONG'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
