"""End to end: the hidden tests grade the solution and the starter as they should."""
import json

import pytest

from autograder import grade, rubric
from conftest import ROOT


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    d = tmp_path_factory.mktemp("grades")
    return {name: grade.grade(ROOT / name / "rmsnorm.py", d / f"{name}.json") for name in ("solution", "starter")}


def test_solution_scores_full_marks_on_every_graded_part(graded):
    res = graded["solution"]
    graded_parts = [t for t in res["tests"] if t["max_score"] > 0]
    assert {t["number"] for t in graded_parts} == {p.number for i in rubric.ITEMS if not i.gpu_only
                                                   for p in i.graded()}
    for t in graded_parts:
        assert t["status"] == "passed" and t["score"] == t["max_score"] == rubric.PARTS[t["number"]].points, t


def test_starter_scores_zero_with_todo_messages(graded):
    res = graded["starter"]
    parts = [t for t in res["tests"] if t["max_score"] > 0]
    assert parts and all(t["score"] == 0 and "NotImplementedError: TODO" in t["output"] for t in parts), res


def test_gpu_items_are_zero_out_of_zero_with_a_note_without_cuda(graded):
    import torch
    gpu = [t for t in graded["solution"]["tests"] if t["number"].startswith("10.")]
    assert len(gpu) == 4
    if torch.cuda.is_available():
        assert all(t["max_score"] == rubric.PARTS[t["number"]].points for t in gpu)
    else:
        assert all(t["max_score"] == 0 == t["score"] and t["output"] == rubric.GPU_NOTE for t in gpu)


def test_results_follow_gradescopes_format(graded):
    res = graded["solution"]
    assert isinstance(res["execution_time"], (int, float)) and res["stdout_visibility"] == "hidden"
    for t in res["tests"]:
        assert set(t) >= {"name", "number", "score", "max_score", "status", "output", "visibility"}
        assert t["status"] in ("passed", "failed")
    json.dumps(res)


def test_feedback_shows_no_hidden_test_code(graded):
    for t in graded["starter"]["tests"]:
        assert "def test_" not in t["output"] and "hidden" not in t["output"] and len(t["output"]) < 4001


def test_table_lists_every_item_and_the_total(graded):
    text = grade.table(graded["solution"])
    for item in rubric.ITEMS:
        assert item.name in text
    assert "90 / 90" in text and "+ 5 extra credit" in text
    assert "0 / 90" in grade.table(graded["starter"])
