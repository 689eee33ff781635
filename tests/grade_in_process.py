"""The grader's verdicts on many submissions, quickly: for the project's tests of what the verdicts say.

A real grading runs each job in a sandboxed process, and a process start (Python, torch) costs more than
the tasks of a small submission. Here two spawned processes run the same jobs (cases.sim_jobs), with the
job's own code (the submission's process forked as a job forks it, job.remote.run_tasks) and the grader's
judge (judge.ledgers, judge.charge): only the sandbox is left out, which tests/test_autograder_*.py test on
their own.

    verdicts({"name": Path("rmsnorm.py"), ...}) -> {name: {"failed": {part: message}, "notes": {...},
                                                           "causes": {part: [cause, ...]}}}
"""
import concurrent.futures
import multiprocessing
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _start():
    os.environ["MINI_TRITON"] = "1"
    os.environ["MINI_TRITON_RACES"] = "record"           # as a job runs: a race is noted, not raised
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, str(ROOT))


def _grade(path: str) -> dict:
    from autograder import config, runner
    from autograder.check import reference
    from autograder.job import remote
    from autograder.job.main import setup_backend
    from autograder.hidden.cases import flat, sim_inputs, sim_jobs
    from autograder.judge import ledgers
    from autograder.judge.charge import charge
    triton = setup_backend(ROOT, "mini_triton")
    inputs = sim_inputs(lambda x, g, eps: reference(x, g, eps=eps)[1].float())
    submission = Path(path)
    groups = sim_jobs()
    hosts = remote.fork_hosts(submission, triton, len(groups))       # the submission's processes, as a job forks them
    results, tensors, error = remote.run_groups(hosts, groups, flat(inputs), triton, submission,
                                                submission.read_text(encoding="utf-8", errors="replace"),
                                                config.SIM_LIMITS.timeout_s)
    outcome = runner.Outcome(tensors, results, f"importing rmsnorm.py failed: {error}" if error else None, None)
    found = ledgers((inputs, outcome))
    verdicts = charge(found)
    return {"failed": {p: v.failure for p, v in verdicts.items() if v.failure},
            "notes": {p: v.notes for p, v in verdicts.items() if v.notes},
            "causes": {p: sorted({f.cause for f in L.findings if f.cause}) for p, L in found.items()}}


def verdicts(paths: dict, workers: int = 2) -> dict:
    """{name: verdicts} of each submission (a path to its rmsnorm.py)."""
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context, initializer=_start) as pool:
        return dict(zip(paths, pool.map(_grade, [str(p) for p in paths.values()])))
