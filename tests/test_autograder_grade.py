"""End to end: the hidden tests grade the solution and the starter as they should."""
import json

import pytest

from autograder import grade, rubric
from conftest import ROOT


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    d = tmp_path_factory.mktemp("grades")
    return {name: grade.grade(ROOT / name / "rmsnorm.py", d / f"{name}.json") for name in ("solution", "starter")}


def test_solution_scores_full_marks_on_every_graded_item(graded):
    res = graded["solution"]
    assert res["tests"] and all(t["status"] == "passed" for t in res["tests"]), res
    for t in res["tests"]:
        assert t["score"] == t["max_score"] == rubric.BY_NUMBER[t["number"]].points


def test_starter_scores_zero_with_todo_messages(graded):
    res = graded["starter"]
    assert all(t["score"] == 0 and "NotImplementedError: TODO" in t["output"] for t in res["tests"]), res


def test_results_follow_gradescopes_format(graded, tmp_path):
    res = graded["solution"]
    assert isinstance(res["execution_time"], (int, float)) and res["stdout_visibility"] == "hidden"
    for t in res["tests"]:
        assert set(t) >= {"name", "number", "score", "max_score", "status", "output", "visibility"}
        assert t["status"] in ("passed", "failed")
    json.dumps(res)


def test_feedback_shows_no_hidden_test_code(graded):
    for t in graded["starter"]["tests"]:
        assert "def test_" not in t["output"] and "hidden" not in t["output"] and len(t["output"]) < 4001
