"""The grader's settings, in one place: sandbox accounts, limits, time-outs, environment variables.

Every setting that a TA may change is here, with the reason for its value.
Environment variables are read by the grader only (a submission never sees
them): they exist so that tests and the Gradescope scripts can point the
grader somewhere else, never to loosen a limit silently.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass
class Limits:
    """What one sandboxed job may use before it is stopped."""
    timeout_s: float = 30.0                 # wall clock, then every process of the job is killed
    cpu_s: int = 60                         # RLIMIT_CPU: CPU seconds of the job's process (all its threads)
    memory_bytes: int | None = 2 * 1024 ** 3   # RLIMIT_AS; None on a GPU (CUDA maps huge address ranges)
    file_bytes: int = 64 * 1024 ** 2        # RLIMIT_FSIZE: the largest file the job may write
    processes: int = 256                    # RLIMIT_NPROC: processes and threads of the sandbox account
    group_cpu_s: float | None = None        # a simulator group's budget of CPU time (the judge's process and the
    #                                         submission's together); timeout_s is then its wall time
    compile_s: float = 0.0                  # the most seconds of Triton compiling (protocol.CompileClock) added
    #                                         to timeout_s: on the GPU, compiling does not count against a case


# --- Sandbox accounts -------------------------------------------------------------------------------------

DEFAULT_ACCOUNT_PREFIX = "rmsnorm-sbx"
ACCOUNT_PREFIX = os.environ.get("RMSNORM_SANDBOX_ACCOUNTS", DEFAULT_ACCOUNT_PREFIX)
"""As root, submissions run as one of the accounts ``rmsnorm-sbx0`` ... ``rmsnorm-sbx7``: one account per
job at a time, so the grader can kill every process of that account after the job without touching
another grading, and no submission can signal, read or write another's job. Never a real login name
(a course machine may have a user called ``student``). Tests set RMSNORM_SANDBOX_ACCOUNTS to a pool of
their own."""

POOL_SIZE = 8
"""Accounts created by ``make sandbox-accounts`` and setup.sh: the most gradings that run at once as
root (``make grade-all JOBS=N`` with N up to 8); more wait for a free account."""

ACCOUNT_WAIT_S = 900.0
"""How long a job waits for a free sandbox account before the grading is an autograder error."""


# --- Limits -----------------------------------------------------------------------------------------------

PREDICT_VAR = "RMSNORM_PREDICT"       # "off": a CPU grading makes no prediction of item 10 (predict_enabled)
PREDICT_S, PREDICT_CPU_S = 20.0, 8.0
"""Item 10's prediction on a CPU grading (hidden/cases.sim_jobs' group "predict": the steps at 1024 rows and their
plan at item 10's shape, rmsnorm_testkit/predict.py): a group of its own with this wall and CPU time. It grades
nothing, so a submission too slow for it gets a note, never a charge. The solution's takes about a second."""


def predict_enabled() -> bool:
    """Does a grading without a GPU predict item 10 (its note and the leaderboard's entries)? Yes unless
    RMSNORM_PREDICT=off."""
    return os.environ.get(PREDICT_VAR, "").strip().lower() != "off"

SIM_LIMITS = Limits(timeout_s=120.0, cpu_s=150, group_cpu_s=30.0)
"""Each of the two groups of simulator tasks (the forward tasks; the autograd tasks), which share one job:
each group gets 30 s of CPU time, the judge's process and the submission's together (job/judge/remote.py), so a
busy machine or a container with a fraction of a CPU costs a submission nothing; 120 s of wall time stand
behind it (a submission that sleeps). The job's own limit is the groups' wall time together plus
runner.START_S. The reference solution takes about 4 s for the job on a 2-core machine, most of it
importing torch (tests/measure_grading_cost.py): 30 s of CPU a group is enough for a lecture-style kernel
on a slow CPU. An endless loop on an idle machine costs at most 2 x 30 s, so its feedback arrives in about
a minute. RLIMIT_CPU holds for each process: the judge's runs both groups' kernels."""

GPU_LIMITS = Limits(timeout_s=300.0, cpu_s=600 + 1200, memory_bytes=None, file_bytes=2 * 1024 ** 3,
                    compile_s=1200.0)
"""The GPU job with real Triton: a CUDA build of torch maps far more address space than any cap would allow.
Compiling does not count against a case: the seconds Triton spends compiling (the job's COMPILING and
COMPILED lines, job/main.compile_clock), a compile still under way included, are added to the 300 s, up to 20
minutes. Measured on the H200 (docs/perf.md): one autotune config of 16-row tiles compiles for over six
minutes at N = 32768, a kernel without autotuning in a second or two. RLIMIT_CPU allows for the compiling too."""

GPU_JOBS = 3
"""The GPU grading's jobs (hidden/cases.gpu_jobs): 4.4's large N, 4.7's rerun, item 10's timings."""


def grading_s() -> float:
    """The longest one grading's hidden tests may run before the grader calls it stuck (an autograder error):
    the simulator's job at its limit, each GPU job at its own with the whole compile allowance, and ten
    minutes to start, judge and write. The jobs' own limits stop a submission long before this."""
    return 2 * SIM_LIMITS.timeout_s + GPU_JOBS * (GPU_LIMITS.timeout_s + GPU_LIMITS.compile_s) + 600.0


GROUP_CPU_VAR = "RMSNORM_GROUP_CPU_S"
"""Seconds of CPU time for each simulator group instead of SIM_LIMITS' 30: more on a slow grading machine, fewer
in the project's own tests of an endless loop (which spend the whole budget by design)."""


def group_cpu_s(env=None) -> float:
    """Each simulator group's CPU budget: RMSNORM_GROUP_CPU_S where set, else SIM_LIMITS'. Raises ValueError, naming
    the variable, for a value that is not a number of seconds from 1 to 3600."""
    raw = (os.environ if env is None else env).get(GROUP_CPU_VAR)
    if raw is None:
        return SIM_LIMITS.group_cpu_s
    try:
        seconds = float(raw)
    except ValueError:
        seconds = float("nan")
    if not 1 <= seconds <= 3600:
        raise ValueError(f"{GROUP_CPU_VAR}={raw!r} is not a number of seconds from 1 to 3600")
    return seconds


def sim_limits(cuda_available: bool) -> Limits:
    """The simulator jobs' limits (each group's CPU budget from group_cpu_s); no address-space cap where torch is a
    CUDA build on a GPU machine."""
    limits = dataclasses.replace(SIM_LIMITS, group_cpu_s=group_cpu_s())
    return dataclasses.replace(limits, memory_bytes=None) if cuda_available else limits


# --- Paths and switches passed through the environment -----------------------------------------------------

RUNTIME_VAR = "RMSNORM_RUNTIME"        # the folder jobs run from: the job, mini_triton (runtime.py)
SUBMISSION_VAR = "RMSNORM_SUBMISSION"      # grade.py -> the hidden tests: the rmsnorm.py being graded
RESULTS_VAR = "RMSNORM_RESULTS"            # grade.py -> plugin.py: where results.json goes
SCAN_VAR = "RMSNORM_SCAN"                  # "off" skips the static scan (the project's tests of the sandbox)
GPU_TASKS_VAR = "RMSNORM_GPU_TASKS"        # "speed": the GPU job runs item 10's tasks only (calibrate.py)
TOKEN_VAR = "RMSNORM_SANDBOX_TOKEN"        # marks every process of one job, even after setsid()


SCAN_SKIPPED = "the static scan was skipped (RMSNORM_SCAN=off)"   # part 0's note then, in results.json


def scan_enabled(env=None) -> bool:
    return (os.environ if env is None else env).get(SCAN_VAR) != "off"


def gpu_speed_only() -> bool:
    return os.environ.get(GPU_TASKS_VAR) == "speed"
