"""Sweep launch configurations of the reference kernels and print a table (for tuning `_config`).

    python3 tests/tune_kernels.py [--shapes 16384x4096 ...] [--dtypes fp32 bf16] [--quick] [--top K]
                                  [--kernels fwd bwd] [--warps 16 32] [--block-m 4 8 16]
                                  [--per-sm 4 8] [--stages 1 2]

Times the kernels alone (no autograd, no allocation) with triton.testing.do_bench, for
forward BLOCK_M x num_warps and backward programs-per-SM x BLOCK_M x num_warps x num_stages
(the software pipeliner's depth), and for N > MAX_FUSED_N also a single pass over the whole row.
With --kernels step, the whole step through autograd (forward, backward, dg sum) for each backward
configuration, in a CUDA graph, beside torch.compile's step. Each configuration's output is checked
against the wrapper's (the step's against float64), and the table gives % of the copy bandwidth
(forward 2·M·N, backward 3·M·N, step 5·M·N elements). On the CPU it runs on mini_triton at the
shapes given, which checks every configuration's correctness but says nothing about speed.
"""
import argparse
import itertools
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "starter")]                 # rmsnorm_testkit
from rmsnorm_testkit.compare import DTYPES, compare, eager, load_impl, reference  # noqa: E402
from rmsnorm_testkit.timing import captured  # noqa: E402

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
                impl.rmsnorm_bwd_kernel[(programs,)](x, g, dy, ref_r, dx, part, N, x.stride(0), dy.stride(0),
                                                     dx.stride(0), M, rpp, BLOCK_M=bm, BLOCK_N=block_n,
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
    if "step" in kernels:
        rows += step_rows(impl, x, g, dy, bwd_grid, bench, pct)
    return copy, rows


def step_rows(impl, x, g, dy, grid, bench, pct):
    """The whole step (forward, backward and dg sum, through autograd) with each backward
    configuration put in place of ``_bwd_config``'s, timed as a CUDA graph's replay (the kernels
    alone) on a GPU; beside it, torch.compile's step of the eager formula, the provider to beat."""
    M, N = x.shape
    gpu = impl.BACKEND == "triton"
    block_n, single = impl._block_n(N)
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    _, _, ref_dx, ref_dg = reference(x, g, dy)                          # float64
    rows = []
    if gpu:
        compiled = torch.compile(eager, dynamic=False)
        ms = bench(captured(lambda: torch.autograd.grad(compiled(xg, gg), (xg, gg), dy))[0])
        rows.append(("step", "torch.compile (for comparison)", ms, pct(5, ms), True))
    original = impl._bwd_config
    try:
        for per_sm, bm, w in itertools.product(grid["per_sm"], grid["block_m"], grid["warps"]):
            if not single and bm != 1:
                continue
            impl._bwd_config = lambda *_, c=(bm, block_n, single, w, per_sm): c
            out = {}

            def step():
                out["dx"], out["dg"] = torch.autograd.grad(impl.rmsnorm(xg, gg), (xg, gg), dy)
            step()
            ok = not (compare("dx", out["dx"], ref_dx, x) or compare("dg", out["dg"], ref_dg, x))
            ms = bench(captured(step)[0] if gpu else step)
            rows.append(("step", f"programs={per_sm}xSM BLOCK_M={bm} warps={w}", ms, pct(5, ms), ok))
    finally:
        impl._bwd_config = original
    return rows


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--impl", default=str(ROOT / "solution" / "rmsnorm.py"))
    ap.add_argument("--shapes", nargs="*", default=None)
    ap.add_argument("--dtypes", nargs="*", default=["fp32", "bf16"])
    ap.add_argument("--quick", action="store_true", help="shorter timing (warm-up 10 ms, 40 ms of runs)")
    ap.add_argument("--kernels", nargs="*", default=["fwd", "bwd"], choices=["fwd", "bwd", "step"],
                    help="step: the whole forward+backward through autograd, one row per backward configuration")
    ap.add_argument("--top", type=int, default=0, help="print only the K fastest configurations per kernel")
    ap.add_argument("--warps", nargs="*", type=int, default=None,
                    help="num_warps values to try instead of 4 8 16 (Triton allows up to 32)")
    ap.add_argument("--block-m", nargs="*", type=int, default=None,
                    help="BLOCK_M values to try instead of 1 2 4 (short rows may want more)")
    ap.add_argument("--per-sm", nargs="*", type=int, default=None, help="backward programs per SM to try")
    ap.add_argument("--stages", nargs="*", type=int, default=None, help="backward num_stages to try")
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
                bwd_grid, fwd_grid = {**bwd_grid, "warps": tuple(args.warps)}, {**fwd_grid, "warps": tuple(args.warps)}
            if args.block_m:
                bwd_grid, fwd_grid = ({**bwd_grid, "block_m": tuple(args.block_m)},
                                      {**fwd_grid, "block_m": tuple(args.block_m)})
            for key in ("per_sm", "stages"):
                if getattr(args, key):
                    bwd_grid = {**bwd_grid, key: tuple(getattr(args, key))}
            copy, rows = sweep(impl, M, N, DTYPES[d], bwd_grid, bench, args.kernels, fwd_grid)
            elem = torch.empty((), dtype=DTYPES[d]).element_size()
            print(f"\n{d} {M}x{N}  (copy {2 * M * N * elem / copy / 1e6:.0f} GB/s)", flush=True)
            for kind in ("fwd", "bwd+sum", "step"):
                mine = sorted((r for r in rows if r[0] == kind), key=lambda r: r[2])
                bad += sum(r[4] is not True for r in mine if not str(r[4]).startswith("failed"))
                shown = mine[:args.top] + [r for r in mine[args.top:] if r[1].startswith("torch.compile")] \
                    if args.top else mine
                for _, cfg, ms, p, ok in shown:
                    note = "" if ok is True else ("WRONG" if ok is False else ok)
                    print(f"  {kind:<8}{cfg:<60}{ms:>9.4f} ms {p:>5.0f}% {note}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
