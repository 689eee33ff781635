"""A job from start to end: the grader's setup, then the submission, its tasks, the signed outputs.

Everything before ``READY`` is the grader's own setup (the key, torch, the inputs, the simulator, the
kept GPU functions, the watched norms): a failure there is never the submission's, which is not loaded
yet. Everything after runs the submission, whose errors are reported per task, never raised.
"""
import ctypes
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import torch

from .wire.channel import Channel, pair
from .wire.errors import describe
from .submission.norms import watch_norms
from .wire.protocol import COMPILED, COMPILING, INPUTS, JOB, OUTPUTS_JSON, READY, RUNNING, signer, write_outputs
from .judge import remote, timed
from .submission import host
from .submission.tasks import run_tasks


ROOT = Path(__file__).resolve().parents[2]          # the runtime folder (or a checkout): mini_triton is there


def setup_backend(root: Path, backend: str):
    """The simulator on sys.path (it lives in the runtime's root): the mini_triton module, or None for Triton."""
    sys.path.insert(0, str(root))
    preload_autograd()
    if backend == "mini_triton":
        os.environ["MINI_TRITON"] = "1"
        os.environ["MINI_TRITON_RACES"] = "record"   # a race is noted for item 8, and the outputs still come back
        os.environ["MINI_TRITON_RULES"] = "record"   # a compile rule broken is noted, charged once, the rest checked
        simulator = __import__("mini_triton")
        simulator.set_race_mode("record")            # (the judge's modules imported it before the variable was set)
        simulator.set_rule_mode("record")
        return simulator
    os.environ.pop("MINI_TRITON", None)
    return None


def preload_autograd():
    """Import what autograd imports on its first ``backward(gradient)``: torch.fx's symbolic shapes, and sympy
    with them (about 0.5 s of CPU). Imported here, before the submission's processes are forked, it is paid once
    per job, outside every group's CPU budget, not by the group whose task calls ``y.backward()`` first."""
    try:
        import torch.fx.experimental.symbolic_shapes  # noqa: F401
    except ImportError:                              # a torch without it imports nothing on backward either
        pass


def compile_clock() -> bool:
    """With real Triton: as each compile starts, print the seconds compiling has taken before it (protocol
    COMPILING), and after it, the seconds so far (COMPILED): the grader adds them to the job's time limit,
    a compile still going on included. Triton's hooks run before and after each compile
    (an autotuned kernel compiles once per config and key). False where this Triton has no such hooks: the plain
    limit then holds."""
    try:
        from triton import knobs
        runtime = knobs.runtime
        if not (hasattr(runtime, "jit_cache_hook") and hasattr(runtime, "jit_post_compile_hook")):
            return False
    except Exception:                               # noqa: BLE001 -- no Triton, or an older one
        return False
    clock = {"start": None, "total": 0.0}

    def before(*args, **kwargs):
        clock["start"] = time.monotonic()
        print(f"{COMPILING}{clock['total']:.1f}", flush=True)
        return False                                 # False: compile (True would skip it)

    def after(*args, **kwargs):
        if clock["start"] is not None:
            clock["total"] += time.monotonic() - clock["start"]
            clock["start"] = None
            print(f"{COMPILED}{clock['total']:.1f}", flush=True)
        return False
    runtime.jit_cache_hook, runtime.jit_post_compile_hook = before, after
    return True


def load_submission(path: Path):
    spec = importlib.util.spec_from_file_location("rmsnorm", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv):
    submission, job_dir = Path(argv[0]), Path(argv[1])
    if os.environ.get("MINI_TRITON") == "1":
        return main_simulated(submission, job_dir, int(argv[2]) if len(argv) > 2 else 1)
    if timed_job(job_dir):
        return main_timed(submission, job_dir)
    sign = signer()
    job = json.loads((job_dir / JOB).read_text())
    backend = job.get("backend", "mini_triton")
    inputs = torch.load(job_dir / INPUTS, weights_only=True)
    triton = setup_backend(ROOT, backend)
    if triton is None:
        compile_clock()
    watch_norms(submission)
    results = {"_job": {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0]}}
    (job_dir / OUTPUTS_JSON).write_bytes(b"")          # the job folder is writable
    (job_dir / OUTPUTS_JSON).unlink()
    print(READY, flush=True)
    print(f"{RUNNING}importing rmsnorm.py", flush=True)
    try:
        mod = load_submission(submission)
    except BaseException as e:                     # noqa: BLE001 -- report, never crash silently
        results["_import"] = {"error": describe(e)}
        write_outputs(job_dir, results, {}, sign)
        return 0
    done, tensors = run_tasks(mod, job["tasks"], inputs, triton)
    write_outputs(job_dir, {**results, **done}, tensors, sign)
    return 0


def main_simulated(submission: Path, job_dir: Path, groups: int):
    """A simulator job in two kinds of process: the submission's, one per group of tasks (forked first, before
    the key, the tasks and the inputs are read here, so they hold none of them), and this one, the judge's,
    which runs every kernel and writes the signed outputs (remote.py)."""
    triton = setup_backend(ROOT, "mini_triton")
    source = submission.read_text(encoding="utf-8", errors="replace")
    hosts = fork_hosts(submission, triton, groups)
    undumpable()
    sign = signer()
    job = json.loads((job_dir / JOB).read_text())
    inputs = torch.load(job_dir / INPUTS, weights_only=True)
    for name in (JOB, INPUTS):
        (job_dir / name).unlink()                  # what the submission's processes must never read
    results = {"_job": {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0]}}
    (job_dir / OUTPUTS_JSON).write_bytes(b"")          # the job folder is writable
    (job_dir / OUTPUTS_JSON).unlink()
    print(READY, flush=True)
    plan = job.get("groups") or {"tasks": job.get("tasks", {})}
    done, tensors, error = remote.run_groups(hosts[:len(plan)], plan, inputs, triton, submission, source,
                                             job.get("group_s"), job.get("group_cpu_s"))
    for channel, pid in hosts[len(plan):]:
        remote.stop(pid)
    if error:
        results["_import"] = {"error": error}
    write_outputs(job_dir, {**results, **done}, tensors, sign)
    return 0


def timed_job(job_dir: Path) -> bool:
    """Is this item 10's job on a GPU (every task a timing), which the judge's process times itself?"""
    try:
        job = json.loads((job_dir / JOB).read_text())
    except (OSError, ValueError):
        return False
    tasks = job.get("tasks") or {}
    return job.get("backend") != "mini_triton" and bool(tasks) and all(t.get("op") == "speed" for t in tasks.values())


def main_timed(submission: Path, job_dir: Path):
    """Item 10's job on a GPU, in two processes: the submission's (forked first, before the key and the tasks are
    read and before this process touches the GPU) records each step at the timing shape without running it
    (host.py's "record"); this one, the judge's, compiles the kernels from its own copy of the file with its own
    Triton, replays, captures and times them on inputs only it makes (judge/timed.py), and signs the outputs."""
    simulator = setup_backend(ROOT, "mini_triton")     # the submission's process records through the simulator's API
    source = submission.read_text(encoding="utf-8", errors="replace")
    (channel, pid), = fork_hosts(submission, simulator, 1)
    undumpable()
    os.environ.pop("MINI_TRITON", None)
    compile_clock()
    sign = signer()
    job = json.loads((job_dir / JOB).read_text())
    for name in (JOB, INPUTS):
        (job_dir / name).unlink(missing_ok=True)
    results = {"_job": {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0]}}
    (job_dir / OUTPUTS_JSON).write_bytes(b"")          # the job folder is writable
    (job_dir / OUTPUTS_JSON).unlink()
    print(READY, flush=True)
    done, tensors, error = timed.run_job(channel, pid, simulator, submission, source, job["tasks"])
    if error:
        results["_import"] = {"error": error}
    write_outputs(job_dir, {**results, **done}, tensors, sign)
    return 0


def undumpable():
    """Make this process one the submission's (same account) cannot trace or read the memory of."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)       # PR_SET_DUMPABLE, 0
    except (OSError, AttributeError):
        pass


def fork_hosts(submission, triton, n: int) -> list:
    """[(Channel, pid)] of ``n`` submission's processes, one per group of tasks, forked before anything secret
    is read."""
    return [fork_host(submission, triton) for _ in range(n)]


def fork_host(submission, triton) -> tuple:
    """(the judge's Channel, the child's pid): the submission's process, forked before anything secret is read."""
    mine, theirs = pair()
    pid = os.fork()
    if pid == 0:
        mine.close()
        host.run(theirs, submission, triton)        # never returns
    theirs.close()
    return Channel(mine), pid
