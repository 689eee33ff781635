"""Every row of the README's "Common changes" is performed by a test: the test named here makes that
change (to a copy, or undone after) and checks what the recipe promises. A row without a test, or a
test that no longer exists, fails here."""
import ast
import re
import sys

import pytest

from conftest import ROOT

# a row of the table (its first cell) -> the test that performs it
PERFORMED_BY = {
    "a `tl` operation in the simulator":
        "tests/test_mini_triton_surface.py::test_an_op_added_by_the_readme_recipe_is_tl_x_and_tl_math_x",
    "a check of launches (like the race check)":
        "tests/test_mini_triton_recipes.py::test_the_readme_check_sees_every_launch_and_rejects_a_write_of_an_input",
    "a hidden input":
        "tests/test_autograder_cases.py::test_a_hidden_case_and_new_points_added_as_the_guide_shows_are_graded",
    "points, a rubric item or part":
        "tests/test_autograder_cases.py::test_a_hidden_case_and_new_points_added_as_the_guide_shows_are_graded",
    "a limit, a time-out, the sandbox accounts":
        "tests/test_autograder_sandbox.py::test_a_job_that_runs_out_of_cpu_time_is_told_so_not_that_it_crashed",
    "the answer key": "tests/test_starter_and_bundle.py::test_committed_starter_is_generated_from_the_solution",
    "a public test":
        "tests/test_starter_and_bundle.py::test_every_path_and_make_target_named_in_the_bundle_exists_in_it",
    "a message a student sees":
        "tests/test_recipes.py::test_a_mistake_added_without_its_words_or_its_part_is_caught",
    "where a mistake seen in several parts is charged":
        "tests/test_judge_charge.py::test_a_charge_rule_added_as_the_readme_shows_moves_the_charge",
    "a cause the diagnosis names":
        "tests/test_mistakes_graded.py::test_every_cause_the_rubric_owns_is_made_by_a_mistake",
}


def common_changes():
    """The first cells of the README's "Common changes" table."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Common changes", 1)[1].split("\n## ", 1)[0]
    return [row.split("|")[1].strip() for row in section.splitlines()
            if row.startswith("| ") and not row.startswith("| change") and not re.match(r"\|[-| ]+\|$", row)]


def test_every_common_change_is_performed_by_a_test():
    rows = common_changes()
    assert rows and set(rows) == set(PERFORMED_BY), set(rows) ^ set(PERFORMED_BY)
    for row, node in PERFORMED_BY.items():
        path, name = node.split("::")
        tree = ast.parse((ROOT / path).read_text())
        names = {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
        assert name in names, f"{row!r}: {node} does not exist"


def test_a_mistake_added_without_its_words_or_its_part_is_caught(monkeypatch):
    """The "message" recipe: a mistake in tests/mistakes.py needs the words its first failure must say and
    the part it costs; the tests that hold the recipe together fail until both are there."""
    sys.path.insert(0, str(ROOT / "tests"))
    import mistakes
    import test_mistakes_graded
    import test_public_messages
    monkeypatch.setitem(mistakes.EDITS, "a_new_mistake", [("eps", "eps")])
    with pytest.raises(AssertionError):
        test_public_messages.test_every_mistake_has_an_expectation()
    with pytest.raises(AssertionError):
        test_mistakes_graded.test_every_mistake_has_its_expected_charge()
    monkeypatch.setitem(test_public_messages.EXPECTED, "a_new_mistake", ("test_part_a.py::x", ["words"]))
    test_public_messages.test_every_mistake_has_an_expectation()
