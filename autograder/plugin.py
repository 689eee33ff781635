"""A pytest plugin that writes Gradescope's results.json from the hidden tests.

Each test carries gradescope-utils metadata (``__weight__``, ``__number__``,
``__visibility__``). Only the failure *message* reaches the student: never a
traceback, which would show hidden test code. Output is capped.

A passing test may add a note (``record_property("output", msg)``): the GPU
speed tests report their GB/s that way. A skipped test (GPU items without a
GPU) is left out of the tests; its reason goes to the top-level output, once.
Extra credit is a test with ``max_score`` 0 that scores its points when it
passes, so the maxima add up to the regular total.

If any test meets a :class:`~autograder.errors.GraderError` (the grader, not the
submission, failed), the whole results.json becomes an *autograder error*: no
tests, score 0, ``errors.STUDENT_MESSAGE`` for the student, and the cause under
``autograder_error`` for grade.py, which removes it before a student can see it.
"""
import json
import os
import tempfile
import time
from pathlib import Path

import pytest
from rmsnorm_testkit import text

from .config import RESULTS_VAR
from .errors import STUDENT_MESSAGE, GraderError
from .rubric import PARTS, RANKED_ONLY_IF, item_of

WITHHELD = "(this message quoted the grader's own files and was withheld)"
# Gradescope's leaderboard entries ({"name", "value", "order"}), added by the hidden tests (item 10's shares of copy,
# predicted on a CPU grading, measured on a GPU one); no points ride on them.
LEADERBOARD: list = []


def _hidden_lines(here: Path | None = None) -> set:
    """Distinctive lines of the grader's code: feedback that quotes one is withheld. Not those of a submission
    the grader carries (the zip's self-test, autograder/selftest/rmsnorm.py, a plain lecture-style file): a
    student's own line is often the same (`ctx.save_for_backward(x, g, r)`), and feedback quotes it."""
    here = here or Path(__file__).resolve().parent
    lines = set()
    for f in here.rglob("*.py"):
        if f.name != "rmsnorm.py":
            lines |= {ln.strip() for ln in f.read_text().splitlines() if len(ln.strip()) >= 30}
    return lines


def scrub(msg: str, hidden: set) -> str:
    """Cap a message, and withhold it if it quotes the grader's code (a submission that read the tests)."""
    if "def test_" in msg or any(line in msg for line in hidden):
        return WITHHELD
    return msg[:text.MESSAGE_CHARS]


class ResultsWriter:
    def __init__(self, path: Path):
        self.path = path
        self.tests = {}
        self.notes = []                   # skip reasons, once each: the top-level output
        self.grader_errors = []
        self.start = time.monotonic()
        self.hidden = _hidden_lines()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        rep = outcome.get_result()
        if call.excinfo is not None and call.excinfo.errisinstance(GraderError):
            self.grader_errors.append(str(call.excinfo.value))
        fn = getattr(item, "function", None)
        entry = self.tests.setdefault(item.nodeid, {
            "name": _name(fn, item),
            "number": str(getattr(fn, "__number__", "")),
            "max_score": float(getattr(fn, "__weight__", 0)),
            "visibility": getattr(fn, "__visibility__", "visible"),
            "status": "passed", "output": "",
        })
        for key, value in rep.user_properties:
            if key == "output" and not entry["output"]:
                entry["output"] = scrub(str(value), self.hidden)
        if rep.skipped:
            entry["skipped"] = True
            reason = _skip_reason(rep)[:text.MESSAGE_CHARS]
            if reason not in self.notes:
                self.notes.append(reason)
        elif rep.failed:
            entry["status"] = "failed"
            crash = getattr(rep.longrepr, "reprcrash", None)       # the message, never the traceback
            msg = crash.message if crash is not None else str(rep.longrepr)
            entry["output"] = scrub(msg.removeprefix("Failed: "), self.hidden)

    def pytest_sessionfinish(self, session):
        elapsed = round(time.monotonic() - self.start, 2)
        if self.grader_errors:
            write_results(self.path, {"score": 0, "execution_time": elapsed, "stdout_visibility": "hidden",
                                      "tests": [], "output": STUDENT_MESSAGE,
                                      "extra_data": {"autograder_error": True},
                                      "autograder_error": self.grader_errors[0]})
            return
        tests = [_scored(e) for e in self.tests.values() if not e.pop("skipped", False)]
        tests.sort(key=lambda e: [int(p) if p.isdigit() else p for p in e["number"].split(".")])
        results = {"tests": tests, "execution_time": elapsed, "stdout_visibility": "hidden",
                   "output": "\n".join(self.notes)}
        if LEADERBOARD:
            results["leaderboard"] = ranked(LEADERBOARD, tests)
        write_results(self.path, results)


def ranked(board: list, tests: list) -> list:
    """The leaderboard's entries, or, where a part of the right-outputs items (rubric.RANKED_ONLY_IF) failed, the
    same entries valued "not ranked": a speed that wrong outputs reach is no speed."""
    wrong = [t["number"] for t in tests if t["status"] != "passed" and t["number"] in PARTS
             and item_of(t["number"]).number in RANKED_ONLY_IF]
    if not wrong:
        return [dict(e) for e in board]
    why = f"not ranked: outputs wrong (part {wrong[0]} failed)"
    return [{"name": e["name"], "value": why} if "order" in e else dict(e) for e in board]


def _scored(entry: dict) -> dict:
    """Its score; extra credit is out of 0 and adds its points when earned."""
    points = entry["max_score"]
    if entry["number"] in PARTS and item_of(entry["number"]).extra_credit:
        entry["max_score"] = 0.0
    entry["score"] = points if entry["status"] == "passed" else 0.0
    return entry


def _name(fn, item) -> str:
    """The rubric's name for the test's part ("Robustness: non-contiguous x and dy"); Gradescope shows the
    number beside it."""
    num = str(getattr(fn, "__number__", ""))
    if num in PARTS:
        whole, part = item_of(num), PARTS[num]
        name = whole.name + (f": {part.name}" if part.name != whole.name else "")
        return name + (" (extra credit)" if whole.extra_credit else "")
    return item.name.replace("test_", "", 1).replace("_", " ")


def _skip_reason(rep) -> str:
    longrepr = rep.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def private_mode() -> int:
    """The grader's output files' mode: root's alone when grading as root, since the submissions graded at the
    same moment run as other users (the sandbox accounts) and must not read another student's feedback."""
    return 0o600 if os.geteuid() == 0 else 0o644


def open_private(path: Path, mode: str = "w", **kw):
    """Open ``path`` for writing, created anew with private_mode() (an older file's looser mode is not kept)."""
    path.unlink(missing_ok=True)
    return open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, private_mode()), mode, **kw)


def write_results(path: Path, results: dict):
    """Write atomically: Gradescope never sees a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(results, indent=2))
    os.chmod(tmp, private_mode())
    os.replace(tmp, path)


def pytest_configure(config):
    path = os.environ.get(RESULTS_VAR)
    if path:
        config.pluginmanager.register(ResultsWriter(Path(path)), "rmsnorm-results")
