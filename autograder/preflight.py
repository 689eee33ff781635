"""Before any submission runs: can this machine grade at all? ``python -m autograder.preflight``.

A setup problem of the grader must never become a student's zero. So before the
first submission of a process is graded, the grader runs its own job through
the sandbox, exactly as a submission's job runs (same account, same limits, same
job folder), on an empty probe file. That proves what grading needs: the sandbox
account can execute the interpreter and read its packages and the simulator, torch
imports under the sandbox's limits, and the job folder is writable. It also checks
that torch is the build the limits were sized for (the CPU build, unless there is
a GPU). Any failure raises GraderError with the cause and the fix.

Every grading checks the same with its first job, which does all of this before it loads the
submission: a job that cannot start is the grader's error (runner._not_started), and so is a job that
reports a CUDA build under the CPU's cap (runner.cuda_build_refused). So a single grading runs no probe;
this module runs where no submission is at stake yet: setup.sh, once when Gradescope builds the image, and
``make grade-all``, once before the first submission of a class (in a child process: it imports torch,
which the grader's own process does not need).
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from rmsnorm_testkit import text

from . import accounts, config, runner
from .errors import GraderError


def probe() -> dict:
    import torch
    limits = config.sim_limits(torch.cuda.is_available())
    refused = runner.cuda_build_refused({"torch": torch.__version__, "cuda": torch.version.cuda}, limits)
    if refused is not None:
        raise refused
    with tempfile.TemporaryDirectory() as d:
        probe_file = Path(d) / "rmsnorm.py"
        probe_file.write_text("# the grader's preflight probe: an empty submission\n")
        try:
            outcome = runner.run_job(probe_file, {}, {}, limits=limits)
        except GraderError as e:
            raise GraderError(f"preflight: {e.cause}", e.fix) from e
    if outcome.error or "_job" not in outcome.info:
        raise GraderError(f"preflight: the grader's job ran, but an empty probe submission failed: "
                          f"{outcome.error or 'no report'}; stderr: {outcome.run.stderr[-text.LOG_TAIL_CHARS:]}")
    facts = dict(outcome.info["_job"])
    pool = [p.pw_name for p in accounts.existing()]
    facts["account"] = "the grader's own user" if os.geteuid() else f"{pool[0]} .. {pool[-1]} ({len(pool)} accounts)"
    facts["limits"] = limits
    return facts


def main(argv) -> int:
    try:
        facts = probe()
    except GraderError as e:
        print(f"preflight failed: {e}", file=sys.stderr)
        return 1
    lim = facts["limits"]
    print(f"preflight: ok. Python {facts['python']} ({sys.executable}), torch {facts['torch']}; submissions run "
          f"as {facts['account']}; each group of simulator tasks gets {lim.timeout_s:.0f} s of wall time, each "
          f"process of a job {lim.cpu_s} s of CPU and " + (f"{lim.memory_bytes / 2**30:.0f} GiB of address space"
                                                          if lim.memory_bytes else "no address-space cap (GPU)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
