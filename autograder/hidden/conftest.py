"""Fixtures of the hidden tests: the submission's outcome on every task (cases.py).

The submission runs in four sandboxed jobs at most, whatever the number of tests:
one on the simulator (every CPU item), and, where CUDA is present, three with real
Triton (large N, reruns and GPU speed), each later one starting from what the earlier
ones compiled. Nothing here imports the submission.
"""
import os
import tempfile
from pathlib import Path

import pytest
import torch
from rmsnorm_testkit.compare import reference
from rmsnorm_testkit import scan, timing

from autograder import config, plugin, runner
from autograder.errors import GraderError
from autograder.hidden.cases import GPU_ROBUST, flat, gpu_jobs, make_inputs, sim_inputs, sim_jobs, task_name
from autograder.judge.speed import prediction_note, predicted_leaderboard, predictions
from autograder.rubric import COPY_NEEDED, GPU_NOTE

PREDICTED = {}          # item 10's prediction on a CPU grading: {"note": ...} once the simulator's job ran

class NotRun:
    """The outcome of a submission the grader refused to run."""

    def __init__(self, why):
        self.why, self.tensors, self.info = why, {}, {}

    def task_error(self, name):
        return self.why


def submission_path() -> Path:
    return Path(os.environ[config.SUBMISSION_VAR])


@pytest.fixture(scope="session")
def scanned():
    """(missing API, forbidden constructs) of the submission's source."""
    try:
        source = submission_path().read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        return [f"rmsnorm.py could not be read: {e.strerror}"], []
    try:
        return scan.scan(source)
    except Exception as e:                           # noqa: BLE001 -- the scan's own bug: never the student's zero
        raise GraderError(f"the static scan failed on this file: {type(e).__name__}: {e}",
                          "a bug in starter/rmsnorm_testkit/scan.py: fix it and regrade (the file may be fine)") from e


@pytest.fixture(scope="session")
def own_functions():
    """The names of the functions rmsnorm.py defines: the kernels item 10 may see as the submission's own."""
    try:
        return scan.function_names(submission_path().read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return set()


def _refused(scanned):
    """A NotRun outcome when the scan forbids running the submission.

    RMSNORM_SCAN=off (set by whoever runs the grader, never by a submission) skips this, so
    the project's tests can prove that the sandbox alone also stops an attack that evades the scan.
    """
    if not config.scan_enabled():
        return None
    missing, problems = scanned
    if problems and "does not parse" in problems[0]:
        return NotRun(problems[0])
    if problems:
        return NotRun("rmsnorm.py was not run because it uses constructs the assignment forbids: "
                      + "; ".join(problems[:10]) + ". Remove them and resubmit.")
    return None


def tampered(outcome: runner.Combined) -> NotRun | None:
    """A NotRun outcome when any job found the grader's code in the submission's process changed by the file
    (job/submission/seal.py): every item, as the scan's refusal."""
    for _, o in outcome.outcomes.values():
        said = o.info.get("_tampered")
        if isinstance(said, dict):
            return NotRun(str(said.get("error")))
    return None


@pytest.fixture(scope="session")
def sim(scanned):
    """(inputs, outcome) of the submission on every simulator task."""
    inputs = sim_inputs(lambda x, g, eps: reference(x, g, eps=eps)[1].float())
    refused = _refused(scanned)
    if refused:
        return inputs, refused
    limits = config.sim_limits(torch.cuda.is_available())
    jobs = sim_jobs(predict_item_10=not torch.cuda.is_available() and config.predict_enabled())
    outcome = runner.run_jobs(submission_path(), jobs, flat(inputs), limits=limits)
    if tampered(outcome):
        return inputs, tampered(outcome)
    if "predict" in jobs:
        predicted = predictions(outcome, {d: task_name("predict", d) for d in timing.TIMED_DTYPES})
        PREDICTED["note"] = prediction_note(predicted, COPY_NEEDED)
        plugin.LEADERBOARD.extend(predicted_leaderboard(predicted))
    return inputs, outcome


@pytest.fixture(scope="session")
def gpu(scanned, sim):
    """(inputs, outcome) of the submission on the GPU tasks, with real Triton; skips without CUDA (with item 10's
    prediction, when the simulator's job made one)."""
    if not torch.cuda.is_available():
        pytest.skip(GPU_NOTE + (f"\n{PREDICTED['note']}" if PREDICTED.get("note") else ""))
    speed_only = config.gpu_speed_only()
    inputs = {} if speed_only else make_inputs(GPU_ROBUST)
    refused = _refused(scanned)
    if refused:
        return inputs, refused
    with tempfile.TemporaryDirectory(prefix="rmsnorm-compiled-") as compiled:    # one grading's compile cache
        outcomes = {job: (set(tasks), runner.run_job(submission_path(), tasks, flat(inputs), limits=config.GPU_LIMITS,
                                                      backend="triton", compile_cache=Path(compiled)))
                    for job, tasks in gpu_jobs(speed_only).items()}
    combined = runner.Combined(outcomes)
    return inputs, tampered(combined) or combined
