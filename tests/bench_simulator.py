"""mini_triton against Triton's interpreter (TRITON_INTERPRET=1), side by side.

    make bench-sim                 # shapes (37,100), (256,1024), (4096,4096)
    make bench-sim SHAPES="64x512 1024x1024"

Both run the same one-row-per-program RMSNorm kernels (tests/kernels_for_tests.py)
on the CPU; mini_triton runs with every check and statistic on. Times are the
median of several runs (one run for interpreter cases over 2 s).
"""
import os
import statistics
import sys
import time
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from backends import kernels, triton_available  # noqa: E402

DEFAULT_SHAPES = [(37, 100), (256, 1024), (4096, 4096)]


def timed(fn, budget_s=2.0, max_runs=7):
    fn()                                           # warm-up
    times = []
    while len(times) < max_runs:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
        if sum(times) > budget_s:
            break
    return statistics.median(times)


def cases(K, M, N):
    torch.manual_seed(0)
    x, g, dy = torch.randn(M, N), torch.randn(N), torch.randn(M, N)
    y, r = torch.empty(M, N), torch.empty(M)
    dx, dgp = torch.empty(M, N), torch.empty(M, N)
    B = 1 << (N - 1).bit_length()
    fwd = lambda: K.row_rmsnorm_fwd[(M,)](x, g, y, r, N, x.stride(0), 1e-5, BLOCK=B)  # noqa: E731
    bwd = lambda: K.row_rmsnorm_bwd[(M,)](x, g, dy, r, dx, dgp, N, x.stride(0), BLOCK=B)  # noqa: E731
    return {"forward": fwd, "backward": bwd}


def main(argv):
    shapes = [tuple(int(v) for v in s.split("x")) for s in argv] or DEFAULT_SHAPES
    if not triton_available():
        print("Triton (with numpy) is not installed here: nothing to compare against.")
        return 1
    mini, interp = kernels("mini"), kernels("interpret")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; mini_triton checks and statistics on\n")
    print(f"{'shape':>12} {'kernel':>9} {'interpreter':>13} {'mini_triton':>13} {'speedup':>9}")
    rows = []
    for M, N in shapes:
        cm, ci = cases(mini, M, N), cases(interp, M, N)
        for name in ("forward", "backward"):
            ti = timed(ci[name], budget_s=2.0)
            tm = timed(cm[name], budget_s=1.0)
            rows.append((M, N, name, ti, tm))
            print(f"{f'{M}x{N}':>12} {name:>9} {ti * 1e3:>10.1f} ms {tm * 1e3:>10.2f} ms {ti / tm:>8.1f}x",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
