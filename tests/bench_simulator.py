"""mini_triton against Triton's interpreter (TRITON_INTERPRET=1), side by side.

    make bench-sim                 # shapes (37,100), (256,1024), (4096,4096)
    make bench-sim SHAPES="64x512 1024x1024"

Both run the same kernels (tests/kernels_for_tests.py) on the CPU: the lecture's one-row-per-
program RMSNorm forward and backward at each shape, and a persistent (grid-stride) softmax with
132 programs at (4096, 1000). mini_triton runs with every check and statistic on. "first" is the
first call at the shape, into fresh output tensors, after a warm-up call on 8 rows (what a student
waits for); "median" the median of several later calls (one for interpreter cases over 2 s).
"""
import gc
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
SOFTMAX = (4096, 1000, 132)            # rows, columns, programs


def rmsnorm_cases(K, M, N):
    """name -> launch(rows): one call of the kernel on the first ``rows`` rows, into fresh outputs."""
    torch.manual_seed(0)
    x, g, dy = torch.randn(M, N), torch.randn(N), torch.randn(M, N)
    B = 1 << (N - 1).bit_length()

    def fwd(m):
        y, r = torch.empty(m, N), torch.empty(m)
        return lambda: K.row_rmsnorm_fwd[(m,)](x, g, y, r, N, x.stride(0), 1e-5, BLOCK=B)

    def bwd(m):
        r, dx, dgp = torch.rand(m) + 0.5, torch.empty(m, N), torch.empty(m, N)
        return lambda: K.row_rmsnorm_bwd[(m,)](x, g, dy, r, dx, dgp, N, x.stride(0), BLOCK=B)
    return {"forward": fwd, "backward": bwd}


def softmax_case(K):
    rows, cols, programs = SOFTMAX
    x = torch.randn(rows, cols)

    def launch(m):
        y = torch.empty(m, cols)
        return lambda: K.persistent_softmax_kernel[(min(programs, m),)](x, y, m, cols, BLOCK=1024)
    return launch


def first_call(make, rows):
    """Seconds of the first call at ``rows`` rows, after a warm-up call on 8 rows.

    The garbage of the case measured before is collected first: the interpreter leaves
    gigabytes in reference cycles, and while they live the next case's outputs land on
    memory the machine has never touched, whose first writes cost up to 10x more."""
    gc.collect()
    make(8)()
    call = make(rows)
    t = time.perf_counter()
    call()
    return time.perf_counter() - t


def median_call(call, budget_s=2.0, max_runs=7):
    call()
    times = []
    while len(times) < max_runs:
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
        if sum(times) > budget_s:
            break
    return statistics.median(times)


def measure(make_mini, make_interp, rows):
    """(interpreter first, interpreter median, mini first, mini median), in seconds."""
    fi = first_call(make_interp, rows)
    mi = fi if fi > 2.0 else median_call(make_interp(rows))
    fm = first_call(make_mini, rows)
    return fi, mi, fm, median_call(make_mini(rows), budget_s=1.0)


def main(argv):
    shapes = [tuple(int(v) for v in s.split("x")) for s in argv] or DEFAULT_SHAPES
    if not triton_available():
        print("Triton (with numpy) is not installed here: nothing to compare against.")
        return 1
    mini, interp = kernels("mini"), kernels("interpret")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; mini_triton checks and statistics on\n")
    head = f"{'shape':>12} {'kernel':>19} {'interpreter first / median':>28} {'mini_triton first / median':>28} "
    print(head + f"{'speedup first / median':>24}")
    rows = [(f"{M}x{N}", name, rmsnorm_cases(mini, M, N)[name], rmsnorm_cases(interp, M, N)[name], M)
            for M, N in shapes for name in ("forward", "backward")]
    rows.append((f"{SOFTMAX[0]}x{SOFTMAX[1]}", "persistent softmax", softmax_case(mini), softmax_case(interp),
                 SOFTMAX[0]))
    for shape, name, make_mini, make_interp, M in rows:
        fi, mi, fm, mm = measure(make_mini, make_interp, M)
        print(f"{shape:>12} {name:>19} {fi * 1e3:>12.1f} / {mi * 1e3:>9.1f} ms {fm * 1e3:>12.2f} / {mm * 1e3:>9.2f} ms "
              f"{fi / fm:>11.1f}x / {mi / mm:>7.1f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
