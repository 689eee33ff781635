"""What crosses the boundary between the grader and a job: its files, the lines it prints, the signature.

The grader writes ``job.json`` and ``inputs.pt`` into the job's folder and a 32-byte key to the job's
standard input; the job writes ``outputs.json``, ``outputs.pt`` and ``outputs.sig``, an HMAC of both
made with that key. The job reads the key before the submission exists and keeps it only in a closure,
so output files a submission writes in their place (from an atexit hook, a thread, a forked process)
fail the grader's check (runner._signed).

The job prints ``READY`` once its own setup is done (torch, the inputs, the simulator), before the
submission is loaded: a job that stops before that line failed for the grader's reasons, never the
student's. Before each thing it runs it prints a ``RUNNING`` line, so that a time-out can name it. On
the GPU it prints a ``COMPILING`` line as Triton starts each compile and a ``COMPILED`` line when it ends:
the time compiling and autotuning takes, a compile still going on included, is added to the job's time
limit, up to a cap (sandbox.run, CompileClock), so a case's limit is for running it.
"""
import hashlib
import hmac
import io
import json
import os
import sys
import time

import torch
from rmsnorm_testkit import text


JOB, INPUTS = "job.json", "inputs.pt"                                  # written by the grader
OUTPUTS_JSON, OUTPUTS_PT, SIGNATURE = "outputs.json", "outputs.pt", "outputs.sig"   # written by the job
KEY_BYTES = 32
READY = "rmsnorm-job: ready"
RUNNING = "rmsnorm-job: now "          # + what runs now: the grader names it if the job times out
COMPILING = "rmsnorm-job: compiling "  # + the seconds of compiling before this one: Triton starts a compile
COMPILED = "rmsnorm-job: compiled "    # + the seconds Triton has spent compiling so far: not counted (GPU)


def _last_number(stdout: str, marker: str) -> tuple[int, float]:
    """(where the last ``marker`` line starts, or -1; the number it carries, 0.0 when unreadable)."""
    at = stdout.rfind(marker)
    if at < 0:
        return -1, 0.0
    try:
        return at, max(0.0, float(stdout[at + len(marker):].split("\n", 1)[0].split()[0]))
    except (ValueError, IndexError):
        return at, 0.0


class CompileClock:
    """The grader's count of a GPU job's seconds of compiling, asked with the job's output so far (sandbox.run's
    ``extra``). A compile that has started (a ``COMPILING`` line) and not ended counts from when the grader
    first saw its line: a single autotune config of a 16 x 32768 tile has compiled for over six minutes on the
    H200, and a clock that counted only finished compiles stopped such a job as "an infinite loop". A compile
    that raised has no COMPILED line: the job's next RUNNING line ends it. The
    submission shares the job's process and may print these lines itself: the grader caps what it grants."""

    def __init__(self, now=None):
        self._now = now or time.monotonic
        self._seen = (-1, 0.0)          # (where the compile under way started in the output, when it was seen)
        self.seconds = 0.0              # the latest count
        self.compiling = False          # whether a compile was under way at the latest count

    def __call__(self, stdout: str) -> float:
        started, before = _last_number(stdout, COMPILING)
        ended, total = _last_number(stdout, COMPILED)
        self.compiling = started > max(ended, stdout.rfind(RUNNING))   # a compile that raised ends at the next task
        if not self.compiling:
            self.seconds = total
            return total
        if self._seen[0] != started:
            self._seen = (started, self._now())
        self.seconds = before + (self._now() - self._seen[1])
        return self.seconds


FRESH = "fresh"             # the judge's replay on fresh inputs (replay.py): its outputs' and inputs' keys say so


def fresh_key(input_key: str) -> str:
    """The key under which a job returns the replay's fresh draw of an input ("fresh.x.a")."""
    return f"{FRESH}.{input_key}"


def output_key(task: str, output: str, what: str = "") -> str:
    """The key of an output a job returns ("fwd_a.y"), or of what it knows of it: ``what`` = "stored" (the
    elements some kernel stored) or "if_zero" (the output when memory starts at zero)."""
    return f"{task}.{output}" + (f".{what}" if what else "")


TIMED = {"fwd": ("y",), "fwdbwd": ("y", "dx", "dg")}    # item 10's steps and the outputs each makes (a model uses y)


def timed_key(kind: str, name: str) -> str:
    """The key of output ``name`` of item 10's timed replay of step ``kind`` ("fwd", "fwdbwd")."""
    return f"{name}_gpu" if kind == "fwd" or name != "y" else "y_fwdbwd_gpu"


def running(what: str, x=None) -> str:
    """Say what the submission is about to run, so that a time-out can name it."""
    if x is not None:
        what += f" on x of shape {tuple(x.shape)} {text.dtype_name(x.dtype)}"
        what += "" if x.is_contiguous() else f" (a strided view, strides {tuple(x.stride())})"
    print(f"{RUNNING}running {what}", flush=True)
    return f"running {what}"


def signature(key: bytes, outputs_json: bytes, outputs_pt: bytes) -> str:
    """What the job writes to outputs.sig, and the grader recomputes: an HMAC of both output files."""
    return hmac.new(key, hashlib.sha256(outputs_json).digest() + hashlib.sha256(outputs_pt).digest(),
                    hashlib.sha256).hexdigest()


def signer():
    """Read the grader's key from stdin, before the submission exists, and keep it only in a closure."""
    key = sys.stdin.buffer.read(KEY_BYTES)
    sys.stdin.close()
    try:
        os.close(0)
    except OSError:
        pass
    return lambda outputs_json, outputs_pt: signature(key, outputs_json, outputs_pt)


def write_outputs(job_dir, results, tensors, sign):
    """The job's answer: its results and tensors, and their signature."""
    buf = io.BytesIO()
    torch.save(tensors, buf)
    pt = buf.getvalue()
    js = json.dumps(results).encode()
    (job_dir / OUTPUTS_PT).write_bytes(pt)
    (job_dir / OUTPUTS_JSON).write_bytes(js)
    (job_dir / SIGNATURE).write_text(sign(js, pt))


def not_plain(v) -> str | None:
    """What ``v`` is, when it is not a plain ``torch.Tensor`` (None when it is). Nothing of ``v`` is called:
    a subclass of torch.Tensor can run code whenever it is touched (a lazy output that computes only when
    the grader reads it, after the timing), so the grader takes plain tensors only."""
    if type(v) is torch.Tensor:
        return None
    if isinstance(v, torch.Tensor):
        return f"{type(v).__name__}, a subclass of torch.Tensor: return a plain torch.Tensor"
    return type(v).__name__


def require_plain(what: str, value):
    """``value`` if it is a plain tensor (or no tensor at all: the grader names that), else a TypeError
    saying what it is instead."""
    why = not_plain(value) if isinstance(value, torch.Tensor) else None
    if why:
        raise TypeError(f"{what} is {why}")
    return value


def plain(out: dict, info: dict) -> tuple:
    """(tensors, info): only plain, contiguous CPU tensors leave the job; anything else is named in ``info``."""
    tensors = {}
    for k, v in out.items():
        if not_plain(v) is None:
            tensors[k] = v.detach().as_subclass(torch.Tensor).cpu().clone().contiguous()
            info.setdefault("dtypes", {})[k] = str(v.dtype).removeprefix("torch.")
        else:
            info.setdefault("not_tensors", {})[k] = not_plain(v)
    return tensors, info
