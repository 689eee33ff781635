"""Sweep launch configurations of the reference kernels and print a table (for tuning `_config`).

    python3 tests/tune_kernels.py [--shapes 16384x4096 ...] [--dtypes fp32 bf16] [--quick] [--top K]
                                  [--kernels fwd bwd] [--warps 16 32]

Times the kernels alone (no autograd, no allocation) with triton.testing.do_bench, for
forward BLOCK_M x num_warps and backward programs-per-SM x BLOCK_M x num_warps x num_stages
(the software pipeliner's depth), and for N > MAX_FUSED_N also a single pass over the whole row.
Each configuration's output is checked against the wrapper's, and the table gives % of the copy
bandwidth (forward 2·M·N, backward 3·M·N elements). On the CPU it runs on mini_triton at the
shapes given, which checks every configuration's correctness but says nothing about speed.
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
FWD_GRID = {"block_m": (1, 2, 4), "warps": (4, 8, 16)}
BWD_GRID = {"per_sm": (1, 2, 4, 8, 16), "block_m": (1, 2, 4), "warps": (4, 8, 16), "stages": (1, 2, 3)}
SIM_BWD_GRID = {**BWD_GRID, "per_sm": (2, 8), "stages": (1,)}       # the simulator ignores num_stages


def passes_for(impl, N):
    """(SINGLE_PASS, BLOCK_N) choices to try: chunked rows may also be tried in one pass."""
    block_n, single = impl._block_n(N)
    return [(True, block_n)] if single else [(False, block_n), (True, impl.triton.next_power_of_2(N))]


def sweep(impl, M, N, dtype, bwd_grid, bench, kernels=("fwd", "bwd"), fwd_grid=None):
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
    sms = torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == "cuda" else 2
    rows = []
    for single, block_n in passes_for(impl, N):
        how = "" if single == (N <= impl.MAX_FUSED_N) else f" BLOCK_N={block_n}"
        fwd_grid = fwd_grid or FWD_GRID
        for bm, w in itertools.product(fwd_grid["block_m"], fwd_grid["warps"]):
            if "fwd" not in kernels or not single and bm != 1:
                continue
            launch = lambda: impl.rmsnorm_fwd_kernel[(impl.triton.cdiv(M, bm),)](  # noqa: E731
                x, g, y, r, M, N, x.stride(0), y.stride(0), 1e-5, BLOCK_M=bm, BLOCK_N=block_n,
                SINGLE_PASS=single, num_warps=w)
            launch()
            ok = torch.allclose(y.float(), ref_y.float(), atol=1e-2, rtol=1e-2)
            ms = bench(launch)
            rows.append(("fwd", f"BLOCK_M={bm} warps={w}{how}", ms, pct(2, ms), ok))
        for per_sm, bm, w, st in itertools.product(*bwd_grid.values()):
            if "bwd" not in kernels or not single and bm != 1:
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
                                                     SINGLE_PASS=single, num_warps=w, num_stages=st)
                return part.sum(0)
            try:
                dg = launch()
            except Exception as e:                         # noqa: BLE001 -- e.g. out of shared memory
                rows.append(("bwd+sum", f"programs={per_sm}xSM BLOCK_M={bm} warps={w} stages={st}{how}",
                             float("inf"), 0.0, f"failed: {type(e).__name__}"))
                continue
            ok = torch.allclose(dx.float(), ref_dx.float(), atol=1e-2, rtol=1e-2) and \
                torch.allclose(dg, ref_dg.float(), atol=1e-1, rtol=1e-2)
            ms = bench(launch)
            rows.append(("bwd+sum", f"programs={per_sm}xSM BLOCK_M={bm} warps={w} stages={st}{how}", ms,
                         pct(3, ms), ok))
    return copy, rows


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", default=str(ROOT / "solution" / "rmsnorm.py"))
    ap.add_argument("--shapes", nargs="*", default=None)
    ap.add_argument("--dtypes", nargs="*", default=["fp32", "bf16"])
    ap.add_argument("--quick", action="store_true", help="shorter timing (warm-up 10 ms, 40 ms of runs)")
    ap.add_argument("--kernels", nargs="*", default=["fwd", "bwd"], choices=["fwd", "bwd"])
    ap.add_argument("--top", type=int, default=0, help="print only the K fastest configurations per kernel")
    ap.add_argument("--warps", nargs="*", type=int, default=None,
                    help="num_warps values to try instead of 4 8 16 (Triton allows up to 32)")
    args = ap.parse_args(argv)
    impl = load_impl(args.impl)
    gpu = impl.BACKEND == "triton"
    shapes = args.shapes or (["16384x4096", "8192x8192", "65536x1024", "4096x16384"] if gpu else ["64x256"])
    warmup, rep = ((10, 40) if args.quick else (25, 100)) if gpu else (1, 1)
    bench = lambda f: impl.triton.testing.do_bench(f, warmup=warmup, rep=rep, return_mode="median")  # noqa: E731
    print(f"implementation: {impl.__file__} (backend: {impl.BACKEND})")
    bad = 0
    for d in args.dtypes:
        for s in shapes:
            M, N = map(int, s.split("x"))
            bwd_grid = BWD_GRID if gpu else SIM_BWD_GRID
            fwd_grid = FWD_GRID
            if args.warps:
                bwd_grid, fwd_grid = {**bwd_grid, "warps": tuple(args.warps)}, {**FWD_GRID, "warps": tuple(args.warps)}
            copy, rows = sweep(impl, M, N, DTYPES[d], bwd_grid, bench, args.kernels, fwd_grid)
            elem = torch.empty((), dtype=DTYPES[d]).element_size()
            print(f"\n{d} {M}x{N}  (copy {2 * M * N * elem / copy / 1e6:.0f} GB/s)", flush=True)
            for kind in ("fwd", "bwd+sum"):
                mine = sorted((r for r in rows if r[0] == kind), key=lambda r: r[2])
                bad += sum(r[4] is not True for r in mine if not str(r[4]).startswith("failed"))
                for _, cfg, ms, p, ok in mine[:args.top or None]:
                    note = "" if ok is True else ("WRONG" if ok is False else ok)
                    print(f"  {kind:<8}{cfg:<60}{ms:>9.4f} ms {p:>5.0f}% {note}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
