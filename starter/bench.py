"""Benchmark your RMSNorm: `make bench` (or `python bench.py [--shapes 4096x4096 ...] [--out DIR]`).

On a GPU (real Triton): for each dtype and shape, the forward and the forward+backward step
(through autograd) of your kernels, PyTorch eager, torch.compile, torch.nn.functional.rms_norm
and Liger-Kernel (when installed), timed two ways:

- GPU time: the call captured once in a CUDA graph and replayed, i.e. the kernels alone, what the
  GPU spends; shown with GB/s as a percentage of the GPU's copy bandwidth. Item 10 grades this, timed
  the same way (rmsnorm_testkit/timing.py: the grader uses it too).
  Beside it, "kernels": the sum of the durations of the kernels one call runs, from the profiler
  (the graph's replay also counts the short gaps between one kernel and the next).
- wall time: the call launched from Python as usual, what a stopwatch sees: GPU time plus the
  host's work (Python, autograd, allocations, kernel launches), which a model keeping the GPU
  busy, or a CUDA graph, hides. "host ms" is the difference for a whole step.

It also times a small model, Linear -> RMSNorm -> Linear, forward and backward, under
torch.compile (mode "default" and "reduce-overhead"), with your RMSNorm and with F.rms_norm.

By default two shapes per dtype: (16384, 4096), large enough to be limited by memory bandwidth
(part (e) asks about it), and (2048, 4096), small enough for the host's work to show; it takes
about two minutes. --full adds the shapes over N that the plot draws. Each shape runs in a fresh
process (allocator state from earlier shapes skews later ones), one per visible GPU at a time; a
progress line says what is being timed, and each shape's rows print as soon as it is done. A plot
of GB/s against N goes to build/bench_gpu.png (with --full: it needs the shapes of M·N = 2^26).

On the CPU simulator, times say nothing about a GPU, so it shows what does carry over: the
bytes your kernels move against the minimum a fused kernel needs, beside the bytes PyTorch eager
moves for the same work (from the simulator's log of host-side torch ops), as a table and a plot
(build/bench_sim.png).

The parts live in benchmark/ (what a timed process measures, the schedule, the tables, the plots, the
simulator's traffic report); this file reads the command line and puts them together.

Traffic counted (rmsnorm_testkit.timing.KERNELS): forward reads x and writes y (2·M·N elements); backward
reads x and dy and writes dx (3·M·N), so a step moves 5·M·N. The copy bandwidth is measured in the
same process: 2·M·N elements / time.
"""
import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))                        # benchmark/ and rmsnorm_testkit/, beside this file (python -I)
from benchmark import schedule  # noqa: E402
from benchmark.measure import measure_model, measure_one  # noqa: E402
from benchmark.plots import plot_gpu  # noqa: E402
from benchmark.tables import print_gpu_header, print_gpu_rows, print_model_rows  # noqa: E402
from benchmark.traffic import sim_report  # noqa: E402
from rmsnorm_testkit.compare import load_impl  # noqa: E402

# --full: shapes with M·N = 2^26 (256 MB per fp32 tensor) over the N a transformer uses, and one small
# shape. By default: one large shape and the small one.
GPU_SHAPES = [(131072, 512), (65536, 1024), (16384, 4096), (8192, 8192), (4096, 16384), (2048, 4096)]
DEFAULT_GPU_SHAPES = [(16384, 4096), (2048, 4096)]
# The model: (tokens, width) of Linear(width, width) -> RMSNorm -> Linear(width, width), in bf16.
MODEL_SHAPES = [(8192, 2048)]
FULL_MODEL_SHAPES = [(8192, 2048), (16384, 4096)]
SIM_SHAPES = [(256, 128), (128, 512), (64, 1024), (32, 4096), (16, 8192), (4, 16384)]


def gpu_report(impl_path, shapes, out_dir, model_shapes=MODEL_SHAPES):
    """Time every shape and the model (schedule.py), print each one's rows as soon as it is done (tables.py),
    keep them in build/bench_gpu.jsonl as they come and build/bench_gpu.json at the end, and plot them."""
    jobs = schedule.gpu_jobs(shapes, model_shapes)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, header = [], None
    with (out_dir / "bench_gpu.jsonl").open("w") as partial:
        for (kind, d, M, N), res in schedule.results_in_order(impl_path, jobs, schedule.visible_gpus()):
            if res is None:
                continue
            partial.write(json.dumps([kind, d, M, N, res]) + "\n")
            partial.flush()
            if kind == "model":
                print_model_rows(d, M, N, res, header=header != "model")
                header = "model"
                continue
            if header != d:
                print_gpu_header(d)
                header = d
            print_gpu_rows(d, M, N, res)
            rows.append((d, M, N, res))
    (out_dir / "bench_gpu.json").write_text(json.dumps(rows, indent=1))
    plot_gpu(rows, out_dir / "bench_gpu.png")


def parse_shape(s):
    m, n = s.lower().split("x")
    return int(m), int(n)


def main(argv):
    ap = argparse.ArgumentParser(description="Benchmark an RMSNorm implementation.")
    ap.add_argument("--impl", default=os.environ.get("RMSNORM_IMPL", str(HERE / "rmsnorm.py")))
    ap.add_argument("--shapes", nargs="*", type=parse_shape, help="MxN shapes, e.g. 4096x4096")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("BENCH_OUT", HERE / "build")))
    ap.add_argument("--full", action="store_true", help="every shape of the plot, and a second model size")
    ap.add_argument("--one", nargs=3, help=argparse.SUPPRESS)          # dtype M N: one shape, JSON out
    ap.add_argument("--model", nargs=3, help=argparse.SUPPRESS)        # dtype T D: the model, JSON out
    ap.add_argument("--wait", action="store_true", help=argparse.SUPPRESS)  # import, then wait for its turn
    args = ap.parse_args(argv)
    if args.one or args.model:
        d, M, N = args.one or args.model
        if args.wait:
            import torch._inductor.compile_fx  # noqa: F401 -- what torch.compile imports, before its turn
            load_impl(args.impl)
            sys.stdin.readline()
        measure = measure_one if args.one else measure_model
        print(json.dumps(measure(args.impl, d, int(M), int(N))))
        return 0
    impl = load_impl(args.impl)
    backend = getattr(impl, "BACKEND", None) or getattr(getattr(impl, "triton", None), "__name__", "mini_triton")
    print(f"implementation: {impl.__file__} (backend: {backend})\n")
    if backend == "triton":
        gpu_report(args.impl, args.shapes or (GPU_SHAPES if args.full else DEFAULT_GPU_SHAPES), args.out,
                   FULL_MODEL_SHAPES if args.full else MODEL_SHAPES)
    else:
        sim_report(args.impl, args.shapes or SIM_SHAPES, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
