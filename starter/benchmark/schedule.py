"""`make bench`'s schedule on the GPU: each shape (and the model) timed in a process of its own, one per GPU at
a time, the next one started (importing torch, Triton and your file) while the current one is timed, with a
progress line that says what is being timed.
"""
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rmsnorm_testkit.text import LOG_TAIL_CHARS
from rmsnorm_testkit.timing import TIMED_DTYPES

from .measure import PROGRESS

ENTRY = Path(__file__).resolve().parents[1] / "bench.py"      # what a job's process runs (--one, --model)


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
        cmd = [sys.executable, str(ENTRY), "--model" if kind == "model" else "--one", dtype_name, str(M), str(N),
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


def visible_gpus() -> list:
    """The GPUs to time on: CUDA_VISIBLE_DEVICES's, else every one torch sees."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return [d for d in visible.split(",") if d.strip()]
    import torch
    return list(range(torch.cuda.device_count()))


def results_in_order(impl_path, jobs, gpus):
    """(job, its result or None when it failed), in job order, each as soon as it is done. Job i runs on GPU
    i mod len(gpus), after the job before it there: timings never share a GPU. Each GPU's next job is started
    (importing) while its current one is timed."""
    bar = Progress(len(jobs))
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
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(gpus)) as pool:
        for k in range(min(len(gpus), len(jobs))):           # the first job of every GPU, from this thread
            start(k)
        for k in range(min(len(gpus), len(jobs))):
            pool.submit(on_gpu, k)
        for i, future in enumerate(results):                   # in job order, each as soon as it is done
            res = future.result()
            bar.done += 1
            bar.clear()
            yield jobs[i], res
    print(f"\n({len(jobs)} measurements in {time.perf_counter() - bar.start:.0f} s)")
