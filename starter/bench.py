"""Benchmark your RMSNorm: `make bench` (or `python bench.py [--shapes 4096x4096 ...] [--out DIR]`).

On a GPU (real Triton): for each dtype and shape, the forward and the forward+backward step
(through autograd) of your kernels, PyTorch eager, torch.compile, torch.nn.functional.rms_norm
and Liger-Kernel (when installed), timed two ways:

- GPU time: the call captured once in a CUDA graph and replayed, i.e. the kernels alone, what the
  GPU spends; shown with GB/s as a percentage of the GPU's copy bandwidth. Item 10 grades this, timed
  the same way (tests/rmsnorm_timing.py: the grader uses it too).
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

Traffic counted (rmsnorm_timing.KERNELS): forward reads x and writes y (2·M·N elements); backward
reads x and dy and writes dx (3·M·N), so a step moves 5·M·N. The copy bandwidth is measured in the
same process: 2·M·N elements / time.
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "tests"))
from rmsnorm_check import DTYPES, compare, eager, load_impl, reference  # noqa: E402
from rmsnorm_text import LOG_TAIL_CHARS, error_line  # noqa: E402
from rmsnorm_timing import (KERNELS, STEPS, NotCapturable, captured, copy_bytes, kernel_times,  # noqa: E402
                            least_bytes, speed_inputs, time_cuda)

# --full: shapes with M·N = 2^26 (256 MB per fp32 tensor) over the N a transformer uses, and one small
# shape. By default: one large shape and the small one.
GPU_SHAPES = [(131072, 512), (65536, 1024), (16384, 4096), (8192, 8192), (4096, 16384), (2048, 4096)]
DEFAULT_GPU_SHAPES = [(16384, 4096), (2048, 4096)]
# The model: (tokens, width) of Linear(width, width) -> RMSNorm -> Linear(width, width), in bf16.
MODEL_SHAPES = [(8192, 2048)]
FULL_MODEL_SHAPES = [(8192, 2048), (16384, 4096)]
COMPILE_MODES = ("default", "reduce-overhead")
SIM_SHAPES = [(256, 128), (128, 512), (64, 1024), (32, 4096), (16, 8192), (4, 16384)]
TIMED_DTYPES = ("fp32", "bf16")
# time_cuda as the grader calls it, shorter: one round of 100 ms (do_bench's defaults), as every provider is timed
BENCH_TIMING = {"warmup_ms": 25.0, "rep_ms": 100.0, "rounds": 1}


def wrong_outputs(impl, x, g, dy):
    """None if your rmsnorm gives y, dx and dg within the tolerance of the float64 reference, else why.
    A time or a traffic count says nothing about code that computes the wrong thing."""
    xg, gg = x.detach().clone().requires_grad_(True), g.detach().clone().requires_grad_(True)
    y = impl.rmsnorm(xg, gg)
    y.backward(dy)
    ref_y, _, ref_dx, ref_dg = reference(x, g, dy)
    for name, got, want in (("y", y, ref_y), ("dx", xg.grad, ref_dx), ("dg", gg.grad, ref_dg)):
        msg = compare(name, got, want, x) if got is not None else f"{name} is None"
        if msg:
            return msg
    return None


def providers(impl):
    """name -> (forward(x, g), differentiable forward(x, g)) for every implementation available."""
    out = {"yours": (lambda x, g: impl.rmsnorm_forward(x, g)[0], impl.rmsnorm),
           "eager": (eager, eager),
           "torch.compile": (None, torch.compile(eager, dynamic=False)),
           "F.rms_norm": (lambda x, g: torch.nn.functional.rms_norm(x, (x.shape[-1],), g, 1e-5),
                          lambda x, g: torch.nn.functional.rms_norm(x, (x.shape[-1],), g, 1e-5))}
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
        # in_place=False: by default Liger writes dx over dy, which a benchmark reuses
        liger = lambda x, g: LigerRMSNormFunction.apply(x, g, 1e-5, 0.0, "llama", False)  # noqa: E731
        out["Liger"] = (liger, liger)
    except Exception as e:                                       # noqa: BLE001 -- optional, never fatal
        if not isinstance(e, ImportError):
            print(f"(Liger-Kernel is installed but does not load: {type(e).__name__}: {e})", file=sys.stderr)
    return out


def progress(what):
    """Tell the parent process what is being timed now (a line it shows as the progress line)."""
    print(f"{PROGRESS}{what}", flush=True)


PROGRESS = "progress: "


def measure_one(impl_path, dtype_name, M, N):
    """Times of every provider at one shape and dtype (run in its own process): a dict for JSON."""
    impl = load_impl(impl_path)
    bench = lambda f: time_cuda(f, **BENCH_TIMING)  # noqa: E731
    x, g, dy = speed_inputs((M, N), DTYPES[dtype_name], seed=0, device="cuda")
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    out = torch.empty_like(x)
    res = {"copy": bench(lambda: out.copy_(x)), "providers": {}, "wrong": wrong_outputs(impl, x, g, dy)}
    for name, (fwd, diff) in providers(impl).items():
        fwd = fwd or diff
        steps = {"fwd": lambda: fwd(x, g), "fwdbwd": lambda: torch.autograd.grad(diff(xg, gg), (xg, gg), dy)}
        t = res["providers"][name] = {}
        for kind, step in steps.items():
            progress(f"{name} {STEPS[kind][0]}")
            try:
                t[kind] = bench(step)
            except Exception as e:                               # noqa: BLE001 -- report, keep going
                t["error"] = error_line(e)
                break
            try:
                t[f"{kind}_gpu"] = bench(captured(step)[0])
            except Exception as e:                               # noqa: BLE001 -- the wall time stands
                t[f"{kind}_gpu_error"] = str(e) if isinstance(e, NotCapturable) else error_line(e)
                torch.cuda.synchronize()
            try:
                t[f"{kind}_kernels"] = kernel_ms(step)
            except Exception as e:                               # noqa: BLE001 -- the other times stand
                t[f"{kind}_kernels_error"] = error_line(e)
    return res


def kernel_ms(step, reps=5):
    """What the GPU spends running ``step``'s kernels (and its copies and fills), in ms: the sum of
    their durations as the profiler records them, for one call launched normally (the median of
    ``reps`` calls, each after the L2 cache is flushed, as time_cuda does before each timed call)."""
    return statistics.median(sum(ms for _, ms in kernel_times(step)[1]) for _ in range(reps))


def measure_model(impl_path, dtype_name, T, D):
    """The model Linear -> RMSNorm -> Linear at (T tokens, width D), forward and backward, compiled in each
    of COMPILE_MODES, with your RMSNorm and with F.rms_norm: wall time (CUDA events around a normal call)
    and the kernels' GPU time (profiler), in ms; and whether Dynamo broke the graph around your op."""
    impl = load_impl(impl_path)
    dtype = DTYPES[dtype_name]
    norms = {"yours": impl.rmsnorm, "F.rms_norm": lambda h, g: torch.nn.functional.rms_norm(h, (h.shape[-1],), g, 1e-5)}
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(T, D, device="cuda", dtype=dtype, generator=gen)
    dy = torch.randn(T, D, device="cuda", dtype=dtype, generator=gen)
    res = {}
    for mode in COMPILE_MODES:
        for name, norm in norms.items():
            progress(f"model {T}x{D}, torch.compile mode={mode}, {name}")
            model = Model(D, norm).to(device="cuda", dtype=dtype)
            t = res.setdefault(mode, {}).setdefault(name, {})
            try:
                torch._dynamo.reset()
                compiled = torch.compile(model, mode=mode, fullgraph=True)
                params = list(model.parameters())

                def step():
                    torch.compiler.cudagraph_mark_step_begin()
                    return torch.autograd.grad(compiled(x), params, dy)
                t["wall"] = time_cuda(step, **BENCH_TIMING)
                t["gpu"] = kernel_ms(step)
            except Exception as e:                               # noqa: BLE001 -- report, keep going
                t["error"] = error_line(e)
    return res


class Model(torch.nn.Module):
    """Linear -> RMSNorm (the ``norm`` given, with its own g) -> Linear."""

    def __init__(self, width, norm):
        super().__init__()
        self.first, self.last = torch.nn.Linear(width, width), torch.nn.Linear(width, width)
        self.g = torch.nn.Parameter(torch.rand(width) + 0.5)
        self.norm = norm

    def forward(self, x):
        return self.last(self.norm(self.first(x), self.g))


class Progress:
    """One line on the terminal, rewritten in place, saying what is being timed and how much is left.
    Where the output is not a terminal (a log), each update is a line of its own."""

    def __init__(self, total):
        self.total, self.done = total, 0
        self.live = sys.stderr.isatty()
        self.start = time.perf_counter()

    def show(self, job, what):
        line = f"[{self.done + 1}/{self.total}, {time.perf_counter() - self.start:.0f} s] {job}: {what}"
        if self.live:                        # one screen line, or \r could not rewrite it
            width = shutil.get_terminal_size().columns - 1
            print(f"\r\033[K{line[:width]}", end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    def clear(self):
        if self.live:
            print("\r\033[K", end="", file=sys.stderr, flush=True)


class Job:
    """One shape (or the model) timed in a process of its own, on one GPU.

    The process starts ahead of its turn and imports torch, Triton and your file while the job before
    it is timed (that takes seconds), then waits; ``run()`` lets it touch the GPU and reads its result.
    """

    def __init__(self, impl_path, what, gpu):
        self.what = what
        kind, dtype_name, M, N = what
        self.label = f"{dtype_name} {M}x{N}" + (" model" if kind == "model" else "")
        cmd = [sys.executable, __file__, "--model" if kind == "model" else "--one", dtype_name, str(M), str(N),
               "--impl", str(impl_path), "--wait"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu)))
        self.err = concurrent.futures.ThreadPoolExecutor(1).submit(self.proc.stderr.read)

    def run(self, progress_line):
        """The job's result (None if it failed), showing what it times on the progress line."""
        p, last = self.proc, ""
        try:
            p.stdin.write("go\n")
            p.stdin.close()
        except OSError:                                          # it ended before its turn: its error says why
            pass
        for line in p.stdout:
            if line.startswith(PROGRESS):
                progress_line(self.label, line[len(PROGRESS):].strip())
            elif line.strip():
                last = line
        p.wait()
        if p.returncode or not last:
            print(f"{self.label}: failed\n{self.err.result()[-LOG_TAIL_CHARS:]}")
            return None
        return json.loads(last)


def gpu_jobs(shapes, model_shapes):
    """("shape", dtype, M, N) for each dtype and shape, then ("model", "bf16", tokens, width)."""
    return [("shape", d, M, N) for d in TIMED_DTYPES for M, N in shapes] + \
        [("model", "bf16", T, D) for T, D in model_shapes]


def gpu_report(impl_path, shapes, out_dir, model_shapes=MODEL_SHAPES):
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    gpus = [d for d in visible.split(",") if d.strip()] if visible else list(range(torch.cuda.device_count()))
    jobs = gpu_jobs(shapes, model_shapes)
    out_dir.mkdir(parents=True, exist_ok=True)
    partial = (out_dir / "bench_gpu.jsonl").open("w")         # each shape as it finishes
    bar = Progress(len(jobs))
    # Job i runs on GPU i mod (number of GPUs), after the job before it there: timings never share a GPU.
    # Each GPU's next job is started (importing) while its current one is timed.
    started = {}

    def start(i):
        if i < len(jobs) and i not in started:
            started[i] = Job(impl_path, jobs[i], gpus[i % len(gpus)])
        return started.get(i)

    results = [concurrent.futures.Future() for _ in jobs]

    def on_gpu(first):
        for i in range(first, len(jobs), len(gpus)):
            job = start(i)
            start(i + len(gpus))
            try:
                results[i].set_result(job.run(bar.show))
            except BaseException as e:                         # noqa: BLE001 -- the main thread raises it
                results[i].set_exception(e)
                return
    rows, header = [], None
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(gpus)) as pool:
        for k in range(min(len(gpus), len(jobs))):           # the first job of every GPU, from this thread
            start(k)
        for k in range(min(len(gpus), len(jobs))):
            pool.submit(on_gpu, k)
        for i, future in enumerate(results):                   # in job order, each as soon as it is done
            res = future.result()
            bar.done += 1
            bar.clear()
            if res is None:
                continue
            kind, d, M, N = jobs[i]
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
    partial.close()
    print(f"\n({len(jobs)} measurements in {time.perf_counter() - bar.start:.0f} s)")
    (out_dir / "bench_gpu.json").write_text(json.dumps(rows, indent=1))
    plot_gpu(rows, out_dir / "bench_gpu.png")


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


def plot_gpu(rows, path):
    """GB/s against N: GPU time solid, wall time dashed, one colour per provider."""
    plt = _pyplot()
    if plt is None or not rows:
        return
    fig, axes = plt.subplots(2, 2, figsize=(11, 8), sharex=True)
    for i, dtype_name in enumerate(TIMED_DTYPES):
        dtype = DTYPES[dtype_name]
        big = sorted((N, M, r) for d, M, N, r in rows if d == dtype_name and M * N >= 2 ** 24)
        for j, kind in enumerate(STEPS):
            ax = axes[i][j]
            names = sorted({n for _, _, r in big for n in r["providers"]})
            for k, name in enumerate(names):
                colour = f"C{k}"
                for key, style, label in ((f"{kind}_gpu", "-", f"{name} GPU"), (kind, "--", f"{name} wall")):
                    pts = [(N, least_bytes(kind, (M, N), dtype) / r["providers"][name][key] / 1e6) for N, M, r in big
                           if r["providers"].get(name, {}).get(key)]
                    if pts:
                        ax.plot(*zip(*pts), style, color=colour, marker="o", label=label)
            ax.plot([N for N, _, _ in big], [copy_bytes((M, N), dtype) / r["copy"] / 1e6 for N, M, r in big], "k:",
                    label="copy")
            ax.set_xscale("log", base=2)
            ax.set_title(f"{dtype_name} {'forward' if kind == 'fwd' else 'forward+backward step'}")
            ax.set_ylabel("GB/s")
            ax.grid(True, alpha=0.3)
            if i == 1:
                ax.set_xlabel("N (M·N = 2^26)")
    axes[0][1].legend(fontsize=7, ncol=2)
    _save(fig, path)


def eager_traffic(rec, M, N, elem):
    """Bytes the PyTorch ops of a record(host_ops=True) move through M·N tensors, and through the others:
    each op (one kernel on a GPU) reads its inputs and writes its outputs once; views move nothing."""
    big = other = 0
    for op in rec.host_ops:
        if op.reads == 0:                           # views, allocations
            continue
        for n in (*op.in_numels, *op.out_numels):
            if n == M * N:
                big += n * elem
            else:
                other += n * elem
    return big, other


def sim_report(impl_path, shapes, out_dir):
    import mini_triton as triton
    impl = load_impl(impl_path, backend="mini_triton")
    print("CPU simulator: bytes moved through the M·N tensors (x, y, dy, dx, and an M x N partial dg buffer,")
    print("which makes part (b)'s fused backward 1.33-1.67) against the minimum of a fused kernel (forward 2·M·N")
    print("elements, backward 3·M·N), and through the small ones (g, r, a smaller partial dg buffer; on a")
    print("GPU, g mostly hits in cache). 'yours' counts your kernels' loads and stores; 'eager' counts")
    print("the PyTorch ops of x * rsqrt(mean(x²) + eps) * g and its autograd backward, each reading its")
    print("inputs and writing its output once (one GPU kernel each). Time on a GPU follows the M·N bytes.\n")
    print(f"{'shape':>10} {'pass':>9} {'who':>6} {'M·N bytes':>12} {'minimum':>12} {'ratio':>6} {'other bytes':>12} "
          f"{'launches':>9}")
    rows = []
    for M, N in shapes:
        x = torch.randn(M, N, requires_grad=True)
        g = torch.randn(N, requires_grad=True)
        dy = torch.randn(M, N)
        with triton.record() as fwd:
            y = impl.rmsnorm(x, g)
        with triton.record() as bwd:
            y.backward(dy)
        xe, ge = x.detach().clone().requires_grad_(True), g.detach().clone().requires_grad_(True)
        with triton.record(host_ops=True) as eager_fwd:
            ye = eager(xe, ge)
        with triton.record(host_ops=True) as eager_bwd:
            ye.backward(dy)
        wrong = wrong_outputs(impl, x, g, dy)
        if wrong:
            print(f"{f'{M}x{N}':>10}  your outputs are wrong here, so the counts below mean little: {wrong}")
        for kernel, rec, erec in (("rmsnorm_fwd_kernel", fwd, eager_fwd), ("rmsnorm_bwd_kernel", bwd, eager_bwd)):
            name, big, other = KERNELS[kernel][0], 0, 0
            for L in rec.launches:
                for a in L.args.values():
                    moved = a.loaded_bytes + a.stored_bytes
                    if a.numel == M * N:
                        big += moved
                    else:
                        other += moved
            minimum = least_bytes(kernel, (M, N), x.dtype)
            e_big, e_other = eager_traffic(erec, M, N, x.element_size())
            e_ops = sum(1 for op in erec.host_ops if op.reads)
            rows.append((name, N, big / minimum, e_big / minimum))
            print(f"{f'{M}x{N}':>10} {name:>9} {'yours':>6} {big:>12,} {minimum:>12,} {big / minimum:>6.2f} "
                  f"{other:>12,} {len(rec.launches):>9}")
            print(f"{'':>10} {'':>9} {'eager':>6} {e_big:>12,} {minimum:>12,} {e_big / minimum:>6.2f} "
                  f"{e_other:>12,} {e_ops:>9}")
    plot_sim(rows, out_dir / "bench_sim.png")


def plot_sim(rows, path):
    plt = _pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(9, 4.5))
    # A fused forward and a fused backward both sit at 1.00: the forward is drawn wide and hollow, the
    # backward thin with crosses on top, so that each stays visible on the other.
    looks = {"forward": dict(color="C0", marker="o", markersize=11, markerfacecolor="none", linewidth=5, alpha=0.55),
             "backward": dict(color="C1", marker="x", markersize=7, linewidth=1.5)}
    for name, look in looks.items():
        pts = [(N, ratio, eager_ratio) for n, N, ratio, eager_ratio in rows if n == name]
        Ns = [p[0] for p in pts]
        ax.plot(Ns, [p[1] for p in pts], label=f"{name}: yours", zorder=3, **look)
        ax.plot(Ns, [p[2] for p in pts], marker="s", linestyle=":", color=look["color"],
                label=f"{name}: PyTorch eager")
    ax.axhline(1.0, color="k", linestyle="--", label="fused minimum")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N")
    ax.set_ylabel("M·N bytes moved / fused minimum")
    ax.set_title("Memory traffic (mini_triton): your kernels against PyTorch eager")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))   # beside the lines, not on them
    _save(fig, path)


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print("(matplotlib is not installed: no plot)")
        return None


def _save(fig, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"\nplot: {path}")


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
