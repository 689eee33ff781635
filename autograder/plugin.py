"""A pytest plugin that writes Gradescope's results.json from the hidden tests.

Each test carries gradescope-utils metadata (``__weight__``, ``__number__``,
``__visibility__``). Only the failure *message* reaches the student: never a
traceback, which would show hidden test code. Output is capped.

A passing test may add a note (``record_property("output", msg)``): the GPU
speed tests report their GB/s that way. A skipped test (GPU items without a
GPU) is worth 0 / 0 and carries the skip reason.
"""
import json
import os
import time
from pathlib import Path

import pytest

MESSAGE_CAP = 4000
WITHHELD = "(this message quoted the grader's own files and was withheld)"


def _hidden_lines() -> set:
    """Distinctive lines of the grader's code: feedback that quotes one is withheld."""
    here = Path(__file__).resolve().parent
    lines = set()
    for f in [*here.glob("*.py"), *(here / "hidden").glob("*.py")]:
        lines |= {ln.strip() for ln in f.read_text().splitlines() if len(ln.strip()) >= 30}
    return lines


def scrub(msg: str, hidden: set) -> str:
    """Cap a message, and withhold it if it quotes the grader's code (a submission that read the tests)."""
    if "def test_" in msg or any(line in msg for line in hidden):
        return WITHHELD
    return msg[:MESSAGE_CAP]


class ResultsWriter:
    def __init__(self, path: Path):
        self.path = path
        self.tests = {}
        self.start = time.monotonic()
        self.hidden = _hidden_lines()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        rep = outcome.get_result()
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
            entry.update(max_score=0.0, output=_skip_reason(rep)[:MESSAGE_CAP])
        elif rep.failed:
            entry["status"] = "failed"
            crash = getattr(rep.longrepr, "reprcrash", None)       # the message, never the traceback
            msg = crash.message if crash is not None else str(rep.longrepr)
            entry["output"] = scrub(msg.removeprefix("Failed: "), self.hidden)

    def pytest_sessionfinish(self, session):
        tests = []
        for e in self.tests.values():
            e["score"] = e["max_score"] if e["status"] == "passed" else 0.0
            tests.append(e)
        tests.sort(key=lambda e: [int(p) if p.isdigit() else p for p in e["number"].split(".")])
        write_results(self.path, {"tests": tests, "execution_time": round(time.monotonic() - self.start, 2),
                                  "stdout_visibility": "hidden"})


def _name(fn, item) -> str:
    """The rubric's name for the test's part ("4.3 Robustness: non-contiguous x and dy")."""
    from .rubric import PARTS, item_of
    num = str(getattr(fn, "__number__", ""))
    if num in PARTS:
        whole, part = item_of(num), PARTS[num]
        return f"{num} {whole.name}" + (f": {part.name}" if part.name != whole.name else "")
    return item.name.replace("test_", "", 1).replace("_", " ")


def _skip_reason(rep) -> str:
    longrepr = rep.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def write_results(path: Path, results: dict):
    """Write atomically: Gradescope never sees a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=2))
    os.replace(tmp, path)


def pytest_configure(config):
    path = os.environ.get("RMSNORM_RESULTS")
    if path:
        config.pluginmanager.register(ResultsWriter(Path(path)), "rmsnorm-results")
