"""The hostile corpus (tests/hostile.py): a submission that tries a trick earns at most what its honest
control earns, and the defence that stops it is the one its entry names.

The static scan's refusals need no grading: a refused file earns nothing (hidden/conftest.py), so the
test checks the refusal and that the control passes the scan. The others are graded with the controls
(tests/grade_in_process.py: the job's code and the judge, without the sandbox, which the corpus tests
cover) and the points compared.
"""
import sys
from pathlib import Path

import pytest
from rmsnorm_testkit import scan

from autograder import rubric

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostile  # noqa: E402
from grade_in_process import verdicts  # noqa: E402

CPU_PARTS = {n: p.points for n, p in rubric.PARTS.items() if not rubric.item_of(n).gpu_only}
BY = {how: [k for k, entry in hostile.HOSTILE.items() if entry[2] == how]
      for how in ("scan", "language", "provenance", "judge")}


def points(verdict) -> float:
    """The points of a grading (extra credit included), from the parts it failed."""
    return sum(p for n, p in CPU_PARTS.items() if n not in verdict["failed"])


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    paths = {}
    graded_here = {k: v for k, v in hostile.HOSTILE.items() if v[2] != "scan"}
    for name, source in [*((f"control {c}", hostile.CONTROLS[c]) for c in {v[0] for v in graded_here.values()}),
                         *((k, v[3]) for k, v in graded_here.items())]:
        paths[name] = d / name.replace(" ", "_") / "rmsnorm.py"
        paths[name].parent.mkdir()
        paths[name].write_text(source)
    return verdicts(paths)


def test_the_corpus_has_twenty_tricks_on_honest_controls():
    assert len(hostile.HOSTILE) >= 20
    assert all(control in hostile.CONTROLS for control, *_ in hostile.HOSTILE.values())
    for name, source in hostile.CONTROLS.items():
        assert scan.scan(source) == ([], []), name


@pytest.mark.parametrize("name", BY["scan"])
def test_a_trick_the_scan_refuses_earns_nothing(name):
    _, _, _, source = hostile.HOSTILE[name]
    missing, problems = scan.scan_rules(source)
    assert not missing and problems, name
    assert {rule for rule, _ in problems} <= {"interpreter", "patches", "simulator"}, problems


@pytest.mark.parametrize("name", BY["language"] + BY["provenance"] + BY["judge"])
def test_a_trick_earns_at_most_its_honest_control(graded, name):
    control, what, how, source = hostile.HOSTILE[name]
    assert scan.scan(source) == ([], []), "the scan is not what stops this one"
    got, honest = graded[name], graded[f"control {control}"]
    assert points(got) <= points(honest), (what, got["failed"], honest["failed"])
    if how == "language":           # refused as Triton's compiler refuses it, in the forward and the backward
        assert "1" in got["failed"] and "2" in got["failed"], got["failed"]
        assert "kernel" in got["failed"]["1"], got["failed"]["1"]
    if how == "provenance":         # the message says where the values came from
        assert any("from memory the host wrote" in m or "values the host computed" in m
                   for m in got["failed"].values()), got["failed"]
