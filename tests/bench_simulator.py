"""mini_triton against Triton's interpreter (TRITON_INTERPRET=1), side by side.

    make bench-sim                 # shapes (37,100), (256,1024), (4096,4096)
    make bench-sim SHAPES="64x512 1024x1024"

Both run the same kernels (tests/kernels_for_tests.py) on the CPU: the lecture's one-row-per-
program RMSNorm forward and backward at each shape, and a persistent (grid-stride) softmax with
132 programs at (4096, 1000). mini_triton runs with every check and statistic on. "first" is the
first call at the shape, into fresh output tensors, after a warm-up call on 8 rows, in a fresh
process (what a student waits for when a test starts): the median of three such processes, one
for interpreter cases over 2 s. A first call writes outputs the process has never touched, and
what the operating system charges for those pages varies between runs on a virtual machine (2x
and more), hence the median. "median" is the median of several later calls in one process.
"""
import os
import statistics
import subprocess
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
BIG = (4096, 4096)                     # the lecture's forward at this shape: the headline ratio


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


def library_cases(K):
    """name -> call: the kernels of tests/kernels_for_tests.py written as libraries write them (FlagGems,
    bitsandbytes, Liger, unsloth, Triton's tutorials), at sizes such libraries see, each into fresh outputs."""
    torch.manual_seed(0)
    cdiv = lambda a, b: (a + b - 1) // b  # noqa: E731
    xh, x2 = torch.randn(1 << 16).half(), torch.randn(512, 1000)
    packed, lut, scale = torch.randint(0, 256, (1 << 15,), dtype=torch.uint8), torch.randn(16), torch.rand(512) + .5
    a, b = torch.randn(128, 128), torch.randn(128, 128)
    xb, wb = torch.randn(256, 2048).bfloat16(), torch.randn(2048).bfloat16()
    e, g = torch.randn(1 << 18), torch.randn(1 << 18)
    grid_x = torch.randn(512, 512)
    return {
        "dtype-generic sum (fp16)": lambda: K.dtype_generic_sum_kernel[(64,)](
            xh, torch.empty(64, dtype=torch.float16), torch.zeros(3, dtype=torch.int32), 1 << 16, BLOCK=1024),
        "int4 unpack": lambda: K.int4_unpack_kernel[(cdiv(1 << 15, 1024),)](
            packed, lut, scale, torch.empty(1 << 16), 1 << 15, GROUP=128, BLOCK=1024),
        "matmul 128^3": lambda: K.matmul_kernel[(4, 4)](
            a, b, torch.empty(128, 128), 128, 128, 128, 128, 1, 128, 1, 128, 1, BM=32, BN=32, BK=32),
        "softmax rows": lambda: K.softmax_kernel[(512,)](
            torch.empty(512, 1000), x2, 1000, 1000, 1000, BLOCK=1024),
        "cumsum + argmax": lambda: K.cumsum_argmax_kernel[(512,)](
            x2, torch.empty(512, 1000), torch.empty(512, dtype=torch.int32), 1000, BLOCK=1024),
        "2-D grid": lambda: K.grid2d_kernel[(cdiv(512, 32), cdiv(512, 64))](
            grid_x, torch.empty(512, 512), 512, 512, BR=32, BC=64),
        "Liger RMSNorm (bf16)": lambda: K.casting_rmsnorm_kernel[(256,)](
            torch.empty(256, 2048, dtype=torch.bfloat16), xb, wb, 2048, 1e-6, 0.0, casting_mode=0, BLOCK=2048),
        "unsloth GEGLU": lambda: K.geglu_kernel[(cdiv(1 << 18, 1024),)](
            e, g, torch.empty(1 << 18), 1 << 18, BLOCK=1024, LONG_INDEXING=False),
        # a scalar loop over rows in a few programs, float atomics, a spin lock (layer-norm backward's pattern)
        "row loop, 8 programs": lambda: K.persistent_rows_kernel[(8,)](
            x2, torch.empty(512), 512, 1000, BLOCK=1024),
        "float atomic sum": lambda: K.atomic_sum_kernel[(64,)](
            xh.float(), torch.zeros(1), 1 << 16, BLOCK=1024),
        "spin-locked partial sums": lambda: K.locked_partial_sum_kernel[(128,)](
            x2, torch.zeros(8, 1000), torch.zeros(8, dtype=torch.int32), 1000, GROUPS=8, BLOCK=1024),
    }


def measure_library(budget_s=1.0):
    """[(name, interpreter median, mini_triton median)] in seconds, each kernel in this process."""
    interp, mini = library_cases(kernels("interpret")), library_cases(kernels("mini"))
    return [(n, median_call(interp[n], budget_s, 3), median_call(mini[n], budget_s / 4)) for n in interp]


def first_call(make, rows):
    """Seconds of the first call at ``rows`` rows, after a warm-up call on 8 rows."""
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


def case(backend, name, M, N):
    """make(rows) of one case on one backend ("mini" or "interpret")."""
    K = kernels(backend)
    return softmax_case(K) if name == "persistent softmax" else rmsnorm_cases(K, M, N)[name]


def fresh_first_call(backend, name, M, N, rows) -> float:
    """first_call in a new Python process: seconds."""
    p = subprocess.run([sys.executable, __file__, "--first", backend, name, str(M), str(N), str(rows)],
                       capture_output=True, text=True, check=True)
    return float(p.stdout.strip().splitlines()[-1])


def fresh_first_calls(backend, name, M, N, rows, runs=3) -> float:
    """The median first call of ``runs`` fresh processes (one if the first takes over 2 s)."""
    times = [fresh_first_call(backend, name, M, N, rows)]
    while times[0] < 2.0 and len(times) < runs:
        times.append(fresh_first_call(backend, name, M, N, rows))
    return statistics.median(times)


def measure(name, M, N, rows):
    """(interpreter first, interpreter median, mini first, mini median), in seconds."""
    fi = fresh_first_calls("interpret", name, M, N, rows)
    mi = fi if fi > 2.0 else median_call(case("interpret", name, M, N)(rows))
    fm = fresh_first_calls("mini", name, M, N, rows)
    return fi, mi, fm, median_call(case("mini", name, M, N)(rows), budget_s=1.0)


def main(argv):
    if argv[:1] == ["--first"]:                       # one first call, in this fresh process
        backend, name, M, N, rows = argv[1], argv[2], *map(int, argv[3:6])
        print(first_call(case(backend, name, M, N), rows))
        return 0
    shapes = [tuple(int(v) for v in s.split("x")) for s in argv] or DEFAULT_SHAPES
    if not triton_available():
        print("Triton (with numpy) is not installed here: nothing to compare against.")
        return 1
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; mini_triton checks and statistics on\n")
    head = f"{'shape':>12} {'kernel':>19} {'interpreter first / median':>28} {'mini_triton first / median':>28} "
    print(head + f"{'speedup first / median':>24}")
    rows = [(M, N, name, M) for M, N in shapes for name in ("forward", "backward")]
    rows.append((SOFTMAX[0], SOFTMAX[1], "persistent softmax", SOFTMAX[0]))
    ratios = {}
    for M, N, name, n_rows in rows:
        fi, mi, fm, mm = measure(name, M, N, n_rows)
        print(f"{f'{M}x{N}':>12} {name:>19} {fi * 1e3:>12.1f} / {mi * 1e3:>9.1f} ms {fm * 1e3:>12.2f} / "
              f"{mm * 1e3:>9.2f} ms {fi / fm:>11.1f}x / {mi / mm:>7.1f}x", flush=True)
        ratios[(M, N, name)] = (fi / fm, mi / mm)
    print(f"\nlibrary-style kernels (tests/kernels_for_tests.py), median of later calls in one process\n"
          f"{'kernel':>26} {'interpreter':>12} {'mini_triton':>12} {'speedup':>8}")
    lib = []
    for name, ti, tm in measure_library():
        lib.append(ti / tm)
        print(f"{name:>26} {ti * 1e3:>9.1f} ms {tm * 1e3:>9.2f} ms {ti / tm:>7.1f}x", flush=True)
    print("\nthe goals (speedup first / median):")
    for (M, N, name), goal in ((BIG + ("forward",), 150), (SOFTMAX[:2] + ("persistent softmax",), 10)):
        if (M, N, name) in ratios:
            first, median = ratios[(M, N, name)]
            print(f"{name + f' {M}x{N}':>32} {first:>7.1f}x / {median:>6.1f}x   (goal >= {goal}x)")
    print(f"{'library-style kernels, median':>32} {statistics.median(lib):>17.1f}x   (goal >= 10x)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
