"""`make bench`'s tables on the GPU: per shape, each provider's GPU time with GB/s as a share of the copy
bandwidth, the kernels' summed durations and wall time; and the model's rows.
"""
import sys

from rmsnorm_testkit.compare import DTYPES
from rmsnorm_testkit.timing import STEPS, TIMED_DTYPES, copy_bytes, least_bytes


def print_gpu_tables(rows):
    """rows: (dtype name, M, N, measure_one's dict) for each shape."""
    for dtype_name in TIMED_DTYPES:
        print_gpu_header(dtype_name)
        for d, M, N, r in rows:
            if d == dtype_name:
                print_gpu_rows(d, M, N, r)


def print_gpu_header(dtype_name):
    print(f"\n{dtype_name}: GPU time (a CUDA graph's replay: the kernels alone) with GB/s as % of copy "
          f"bandwidth, the kernels' durations summed (profiler), and wall time (a normal call from "
          f"Python), in ms; host = step wall - step GPU")
    print(f"{'shape':>12} {'copy GB/s':>9} {'provider':>14} | {'fwd GPU':>8} {'%':>4} {'kernels':>7} "
          f"{'wall':>7} | {'step GPU':>8} {'%':>4} {'kernels':>7} {'wall':>7} {'host':>7}", flush=True)


def print_gpu_rows(dtype_name, M, N, r):
    """The rows of one shape: one per provider."""
    dtype = DTYPES[dtype_name]
    copy = copy_bytes((M, N), dtype) / r["copy"] / 1e6
    if r.get("wrong"):
        print(f"{f'{M}x{N}':>12}  your outputs are wrong here, so your times mean little: {r['wrong']}")
    for name, t in r["providers"].items():
        if "error" in t:
            print(f"{f'{M}x{N}':>12} {copy:>9.0f} {name:>14}   {t['error']}")
            continue
        cells = []
        for kind in STEPS:
            gpu, kernels = t.get(f"{kind}_gpu"), t.get(f"{kind}_kernels")
            pct = f"{100 * least_bytes(kind, (M, N), dtype) / gpu / 1e6 / copy:>4.0f}" if gpu else f"{'':>4}"
            cells.append((f"{gpu:>8.3f}" if gpu else f"{'no graph':>8}") + f" {pct} "
                         + (f"{kernels:>7.3f}" if kernels else f"{'-':>7}") + f" {t[kind]:>7.3f}")
        host = t["fwdbwd"] - t["fwdbwd_gpu"] if t.get("fwdbwd_gpu") else None
        print(f"{f'{M}x{N}':>12} {copy:>9.0f} {name:>14} | {cells[0]} | {cells[1]} "
              + (f"{host:>7.3f}" if host is not None else f"{'':>7}"))
        for kind in ("fwd", "fwdbwd"):
            if t.get(f"{kind}_gpu_error"):
                print(f"{'':>12} {'':>9} {'':>14}   {kind}: no CUDA graph: {t[f'{kind}_gpu_error']}")
            if t.get(f"{kind}_kernels_error"):
                print(f"{'':>12} {'':>9} {'':>14}   {kind}: no profile: {t[f'{kind}_kernels_error']}")
    sys.stdout.flush()


def print_model_rows(dtype_name, T, D, res, header=True):
    """The model's rows: per compile mode, wall and GPU time with your RMSNorm and with F.rms_norm."""
    if header:
        print(f"\nThe model Linear -> RMSNorm -> Linear, forward and backward under torch.compile, {dtype_name}: "
              f"wall time (a normal call) and the kernels' GPU time (profiler), in ms")
        print(f"{'tokens x width':>15} {'mode':>16} | {'yours wall':>10} {'GPU':>7} | {'F.rms_norm wall':>15} "
              f"{'GPU':>7}")
    for mode, by_norm in res.items():
        cells = []
        for name, width in (("yours", 10), ("F.rms_norm", 15)):
            t = by_norm.get(name, {})
            cells.append(f"{t['wall']:>{width}.3f} {t['gpu']:>7.3f}" if "error" not in t
                         else f"{'failed':>{width}} {'':>7}")
        print(f"{f'{T}x{D}':>15} {mode:>16} | {cells[0]} | {cells[1]}")
        for name, t in by_norm.items():
            if "error" in t:
                print(f"{'':>15} {'':>16}   {name}: {t['error']}")
    sys.stdout.flush()
