"""The trusted parent's side of one sandboxed job: inputs in, outputs back, safely.

    outcome = run_job(submission, {"fwd": {"op": "forward", "tensors": {"x": "x", "g": "g"}}},
                      {"x": x, "g": g})
    outcome.tensors["fwd.y"], outcome.info["fwd"], outcome.error

Tensors cross the process boundary only through ``torch.save``/``torch.load``
with ``weights_only=True``: plain tensors, no pickled objects, nothing whose
``__eq__`` could lie.
"""
from __future__ import annotations

import dataclasses
import hmac
import io
import json
import os
import secrets
import shutil
import stat
import tempfile
from pathlib import Path

import torch
from rmsnorm_testkit import compare

from . import accounts, config, isolation, runtime, sandbox
from .config import Limits
from .errors import GraderError
from .job.wire.errors import scrub
from .job.wire.protocol import (COMPILED, COMPILING, INPUTS, JOB, KEY_BYTES, OUTPUTS_JSON, OUTPUTS_PT, READY,
                           RUNNING, SIGNATURE, CompileClock, signature)

JOB_LINES = (READY, RUNNING, COMPILING, COMPILED)


@dataclasses.dataclass
class Outcome:
    tensors: dict
    info: dict
    error: str | None          # why the job as a whole failed (timeout, crash, import error)
    run: sandbox.Result

    def task_error(self, name: str) -> str | None:
        if self.error:
            return self.error
        entry = self.info.get(name)
        if entry is None:
            return "the submission stopped before this test ran"
        return entry.get("error")


class Combined:
    """Several jobs' outcomes read as one: each task answers from the job that ran it."""

    def __init__(self, outcomes: dict):
        self.outcomes = outcomes                   # {job name: (task names, Outcome)}
        self.tensors, self.info = {}, {}
        for tasks, o in outcomes.values():
            self.tensors.update(o.tensors)
            self.info.update({k: v for k, v in o.info.items() if k in tasks})

    def task_error(self, name: str) -> str | None:
        for tasks, o in self.outcomes.values():
            if name in tasks:
                return o.task_error(name)
        return f"no job ran {name}"


def run_jobs(submission: Path, jobs: dict, inputs: dict, *, limits: Limits | None = None, **kw) -> Combined:
    """Run the groups of tasks on the simulator, a hang or crash costing only its group: one sandboxed job, in
    which each group runs in a submission's process of its own and is ended at the limit's wall time
    (job/judge/remote.py); the job's own limit is the groups' together, and a little for its start."""
    limits = limits or Limits()
    group_s = {name: config.PREDICT_S if name == "predict" else limits.timeout_s for name in jobs}
    group_cpu_s = {name: config.PREDICT_CPU_S if name == "predict" else limits.group_cpu_s for name in jobs}
    whole = dataclasses.replace(limits, timeout_s=sum(group_s.values()) + START_S)
    outcome = run_job(submission, {}, inputs, limits=whole, groups=jobs, group_s=group_s, group_cpu_s=group_cpu_s,
                      **kw)
    return Combined({name: (set(tasks), outcome) for name, tasks in jobs.items()})


SINGLE = "tasks"        # the name of the one group of a job run with plain tasks (job/main.py)
START_S = 15.0          # a job's start (torch's import) before its groups' time begins, as the job's limit sees it


def run_job(submission: Path, tasks: dict, inputs: dict, *, limits: Limits | None = None,
            backend: str = "mini_triton", runtime_root: Path | None = None, groups: dict | None = None,
            group_s: float | None = None, group_cpu_s: float | None = None,
            compile_cache: Path | None = None) -> Outcome:
    """Run ``tasks`` on ``submission`` in one sandboxed job; raises GraderError if the job never started.
    ``groups`` ({name: tasks}, the simulator only): several groups, each ended at ``group_s`` of its own.
    ``compile_cache`` (real Triton): a grader-owned folder that carries what Triton compiled from one job of a
    grading to the next (``carry_cache``)."""
    limits = limits or Limits()
    runtime_root = runtime_root or runtime.root()
    plan = {"groups": groups, "group_s": group_s, "group_cpu_s": group_cpu_s} if groups else {"tasks": tasks}
    with accounts.for_job() as account:
        job = _job_dir(submission, plan, inputs, backend, account, compile_cache)
        try:
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(job), "TMPDIR": str(job / "tmp"),
                   "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
                   "OPENBLAS_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}
            if backend == "mini_triton":
                # One thread: a simulator group's budget is CPU time, and OpenMP threads that spin while
                # waiting for each other on a busy machine would spend it (a correct file timed out that way).
                env.update(MINI_TRITON="1", OMP_NUM_THREADS="1")
            else:
                env["TRITON_CACHE_DIR"] = str(job / TRITON_CACHE)
            for k in ("CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "CUDA_HOME", "TRITON_PTXAS_PATH"):
                if k in os.environ:
                    env[k] = os.environ[k]
            key = secrets.token_bytes(KEY_BYTES)       # the job signs its outputs with it (job/wire/protocol.py)
            clock = CompileClock() if backend != "mini_triton" else None
            res = sandbox.run(sandbox.python_argv(Path(runtime_root) / runtime.ENTRY, job / "rmsnorm.py", job,
                                                  len(groups or [tasks])), cwd=job,
                              env=env, limits=limits, account=account, stdin=key,
                              private=(job, isolation.readable_paths(runtime_root)),
                              extra=clock)
            return _collect(job, res, limits, key, account, clock)
        finally:
            if compile_cache is not None:
                carry_cache(job / TRITON_CACHE, compile_cache)
            shutil.rmtree(job, ignore_errors=True)


TRITON_CACHE = "triton-cache"       # a GPU job's TRITON_CACHE_DIR, in its own folder
CACHE_CAP = 2 << 30                 # at most this many bytes of a job's compile cache carried to the next job


def carry_cache(src: Path, dst: Path, cap: int = CACHE_CAP) -> None:
    """Copy the regular files of ``src`` (a finished job's Triton cache) into ``dst``, the grader's own, so the
    next GPU job of the same grading finds its kernels compiled: an autotuned file at N = 65536 compiles for
    minutes, once per grading instead of once per job. Links and special files are skipped, and copying stops
    at ``cap`` bytes: the cache is the submission's writing, read by root. It only ever goes to another job of
    the same submission, which could have written the same files itself."""
    total = 0
    for folder, dirs, files in os.walk(src, followlinks=False):
        for name in files:
            f = Path(folder) / name
            try:
                st = f.lstat()
                if not stat.S_ISREG(st.st_mode) or total + st.st_size > cap:
                    continue
                out = dst / f.relative_to(src)
                out.parent.mkdir(parents=True, exist_ok=True)
                with open(f, "rb", opener=_no_follow) as fin, open(out, "wb") as fout:
                    shutil.copyfileobj(fin, fout)
                total += st.st_size
            except OSError:
                continue


def _no_follow(path, flags):
    return os.open(path, flags | os.O_NOFOLLOW)


def _job_dir(submission: Path, plan: dict, inputs: dict, backend: str, account,
             compile_cache: Path | None = None) -> Path:
    """A private folder with the job's files, owned by the account the job runs as (mode 700); a GPU job's
    Triton cache starts as what the grading's earlier jobs compiled."""
    job = Path(tempfile.mkdtemp(prefix="rmsnorm-job-"))
    try:
        shutil.copyfile(submission, job / "rmsnorm.py")
        (job / JOB).write_text(json.dumps({"backend": backend, **plan}))
        torch.save({k: v.contiguous() for k, v in inputs.items()}, job / INPUTS)
        (job / "tmp").mkdir()
        if compile_cache is not None and compile_cache.is_dir():
            shutil.copytree(compile_cache, job / TRITON_CACHE, symlinks=True)
        if account is not None:
            for p in (job, *job.iterdir()):
                os.chown(p, account.pw_uid, account.pw_gid)
            for folder, dirs, files in os.walk(job / TRITON_CACHE):
                for name in dirs + files:
                    os.lchown(Path(folder) / name, account.pw_uid, account.pw_gid)
    except OSError as e:
        shutil.rmtree(job, ignore_errors=True)
        raise GraderError(f"could not prepare the job folder {job}: {e}",
                          "the grader needs a writable temporary folder (TMPDIR) it can chown") from e
    return job


TAMPERED = ("the grader's output files were changed after the grader wrote them: the submission "
            "tampered with grading, so nothing it produced is graded")


def _signed(job: Path, key: bytes):
    """(outputs.json, outputs.pt) as bytes if the job's signature matches them, else None."""
    try:
        js = (job / OUTPUTS_JSON).read_bytes()
        pt = (job / OUTPUTS_PT).read_bytes() if (job / OUTPUTS_PT).exists() else b""
        ok = hmac.compare_digest((job / SIGNATURE).read_text().strip(), signature(key, js, pt))
    except OSError:
        return None
    return (js, pt) if ok else None


def _collect(job: Path, res: sandbox.Result, limits, key: bytes, account=None, clock=None) -> Outcome:
    """What the job produced: read only once the job's signature proves the job wrote it. ``clock``: a GPU
    job's CompileClock (None on the simulator)."""
    on_gpu = clock is not None
    if READY not in res.stdout:
        raise GraderError(*_not_started(res, limits, account))
    if res.timed_out:
        hint = compare.COMPILING_HINT if clock is not None and clock.compiling else None
        return Outcome({}, {}, compare.timed_out(limits.timeout_s, _where(res) + _compiling(clock, limits), on_gpu,
                                               hint=hint), res)
    if res.out_of_cpu:
        hint = compare.GPU_SLOW_HINT if on_gpu else compare.SLOW_HINT
        return Outcome({}, {}, f"ran out of CPU time ({limits.cpu_s} s){_where(res)}: {hint}", res)
    if not (job / OUTPUTS_JSON).exists():
        own = [ln for ln in res.stdout.splitlines() if not ln.startswith(JOB_LINES)]
        tail = (res.stderr.strip().splitlines() or own)[-3:]
        if res.returncode == 0:
            what = (f"the submission ended the process{_where(res)} (exit code 0: os._exit, or an exit from another "
                    f"thread) before the grader got its outputs; rmsnorm.py must return its results, never exit")
        else:
            what = f"the submission crashed{_where(res)} (exit code {res.returncode})"
        return Outcome({}, {}, scrub(what + (": " + " | ".join(tail) if tail else ""), _private(job)), res)
    signed = _signed(job, key)
    if signed is None:
        return Outcome({}, {}, TAMPERED, res)
    info = _scrubbed(json.loads(signed[0]), job)
    refused = cuda_build_refused(info.get("_job"), limits)
    if refused is not None:
        raise refused
    error = f"importing rmsnorm.py failed: {info['_import']['error']}" if "_import" in info else None
    if isinstance(info.get("_tampered"), dict):
        error = str(info["_tampered"].get("error"))     # the grader's code changed in the submission's process
    ended = info.get("_ended") if isinstance(info.get("_ended"), dict) else {}
    if error is None and isinstance(ended.get(SINGLE), str):
        error = scrub(ended[SINGLE], _private(job))       # the one group of a job of plain tasks: the job's failure
    loaded = torch.load(io.BytesIO(signed[1]), weights_only=True) if signed[1] else {}
    tensors = {k: v for k, v in loaded.items() if type(v) is torch.Tensor}
    return Outcome(tensors, info, error, res)


CPU_TORCH_FIX = ("install the CPU build of torch: pip install --index-url https://download.pytorch.org/whl/cpu "
                 "torch=={version}")


def cuda_build_refused(facts, limits) -> GraderError | None:
    """The grader's error when a job ran a CUDA build of torch under the address-space cap, which is sized for the
    CPU build (the cap is set on a machine without a GPU): ``facts`` is the job's own report of its torch (written
    before the submission loads), so every grading checks it with its first job, at no cost of its own."""
    if limits.memory_bytes is None or not isinstance(facts, dict) or not facts.get("cuda"):
        return None
    version = str(facts.get("torch", "")).split("+")[0]
    return GraderError(f"torch {facts.get('torch')} is a CUDA build (CUDA {facts['cuda']}) on a machine without a "
                       f"GPU: the sandbox's address-space cap of {limits.memory_bytes / 2**30:.0f} GiB is sized for "
                       f"the CPU build, and a CUDA build may not even load under it",
                       CPU_TORCH_FIX.format(version=version))


def _private(job: Path) -> tuple:
    """What a job's feedback must not show besides the command lines (job/errors.scrub): the checkout, the
    runtime folder, the job's folder."""
    return (str(config.ROOT), str(runtime.root()), str(job))


def _scrubbed(info: dict, job: Path) -> dict:
    """The job's results with every error text scrubbed of the grader's paths and command lines."""
    for entry in info.values():
        if isinstance(entry, dict) and isinstance(entry.get("error"), str):
            entry["error"] = scrub(entry["error"], _private(job))
    return info


def _where(res: sandbox.Result) -> str:
    """" while running rmsnorm_forward on x of shape ...": what the job said it was doing last."""
    doing = [ln[len(RUNNING):] for ln in res.stdout.splitlines() if ln.startswith(RUNNING)]
    return f" while {doing[-1]}" if doing else ""


def _compiling(clock, limits) -> str:
    """" (and 212 s compiling, not counted)": the time Triton spent compiling, which the limit left out up to
    ``limits.compile_s``; " (and Triton still compiling, 1250 s of compiling so far ...)" when a compile was
    under way at the end (the hint then says what to do)."""
    spent = clock.seconds if clock is not None else 0.0
    if not spent or not limits.compile_s:
        return ""
    counted = "not counted" if spent < limits.compile_s else f"of which {limits.compile_s:.0f} s are not counted"
    if clock.compiling:
        return f" (and Triton still compiling, {spent:.0f} s of compiling so far, {counted})"
    over = spent >= limits.compile_s
    advice = ": fewer autotune configs, or smaller blocks at large N, compile faster" if over else ""
    return f" (and {spent:.0f} s compiling, {counted}{advice})"


def _not_started(res: sandbox.Result, limits, account) -> tuple[str, str]:
    """(cause, fix) of a job that stopped before it loaded the submission: always the grader's problem."""
    who = f" as {account.pw_name}" if account is not None else ""
    tail = " | ".join((res.stderr or res.stdout).strip().splitlines()[-4:])
    if res.timed_out:
        return (f"the grader's job did not start within {limits.timeout_s:.0f} s{who} (importing torch?)",
                "the machine is too slow or too busy: run fewer gradings at once, or raise the limits in "
                "autograder/config.py")
    if "failed to map segment" in tail or "MemoryError" in tail or "Cannot allocate memory" in tail:
        return (f"torch does not load{who} under the sandbox's address-space cap of "
                f"{(limits.memory_bytes or 0) / 2**30:.0f} GiB: {tail}",
                "install the CPU build of torch (a CUDA build maps far more address space): pip install "
                "--index-url https://download.pytorch.org/whl/cpu torch==<the pinned version>")
    return (f"the grader's job failed{who} before loading the submission (exit code {res.returncode}): {tail}",
            "run `python -m autograder.preflight` to check the grader's setup without a submission")
