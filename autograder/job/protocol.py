"""What crosses the boundary between the grader and a job: its files, the lines it prints, the signature.

The grader writes ``job.json`` and ``inputs.pt`` into the job's folder and a 32-byte key to the job's
standard input; the job writes ``outputs.json``, ``outputs.pt`` and ``outputs.sig``, an HMAC of both
made with that key. The job reads the key before the submission exists and keeps it only in a closure,
so output files a submission writes in their place (from an atexit hook, a thread, a forked process)
fail the grader's check (runner._signed).

The job prints ``READY`` once its own setup is done (torch, the inputs, the simulator), before the
submission is loaded: a job that stops before that line failed for the grader's reasons, never the
student's. Before each thing it runs it prints a ``RUNNING`` line, so that a time-out can name it. On
the GPU it prints a ``COMPILED`` line after each kernel Triton compiles: the time compiling and autotuning
takes is added to the job's time limit, up to a cap (sandbox.run), so a case's limit is for running it.
"""
import hashlib
import hmac
import io
import json
import os
import sys

import torch

from .shared import text

JOB, INPUTS = "job.json", "inputs.pt"                                  # written by the grader
OUTPUTS_JSON, OUTPUTS_PT, SIGNATURE = "outputs.json", "outputs.pt", "outputs.sig"   # written by the job
KEY_BYTES = 32
READY = "rmsnorm-worker: ready"
RUNNING = "rmsnorm-worker: now "          # + what runs now: the grader names it if the job times out
COMPILED = "rmsnorm-worker: compiled "    # + the seconds Triton has spent compiling so far: not counted (GPU)


def compiled_seconds(stdout: str) -> float:
    """The seconds of compiling a job's last COMPILED line reports (0.0 when none). The submission shares the
    job's process on the GPU and may print such a line itself: the grader caps what it grants (Limits)."""
    at = stdout.rfind(COMPILED)
    if at < 0:
        return 0.0
    try:
        return max(0.0, float(stdout[at + len(COMPILED):].split("\n", 1)[0].split()[0]))
    except (ValueError, IndexError):
        return 0.0


def output_key(task: str, output: str, what: str = "") -> str:
    """The key of an output a job returns ("fwd_a.y"), or of what it knows of it: ``what`` = "stored" (the
    elements some kernel stored) or "if_zero" (the output when memory starts at zero)."""
    return f"{task}.{output}" + (f".{what}" if what else "")


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
