"""End to end: the hidden tests grade the solution and the starter as they should."""
import concurrent.futures
import json
import os
from pathlib import Path

import pytest

from autograder import config, grade, rubric
from autograder.job.main import load_submission
from autograder.job.submission.tasks import TASKS, run_task, run_tasks, saved_r
from conftest import ROOT

import gradescope_format

pytestmark = pytest.mark.usefixtures("sandbox_accounts")      # grades through the sandbox (conftest.py)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    d = tmp_path_factory.mktemp("grades")
    names = ("solution", "starter")
    env = dict(os.environ, **{config.PREDICT_VAR: "on"})                   # item 10's prediction, which tests read
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:      # two gradings at once, as root
        return dict(zip(names, pool.map(lambda n: grade.grade(ROOT / n / "rmsnorm.py", d / f"{n}.json", env=env),
                                        names)))


def test_solution_scores_full_marks_on_every_graded_part(graded):
    res = graded["solution"]
    graded_parts = [t for t in res["tests"] if t["number"] != "0"]
    import torch
    assert {t["number"] for t in graded_parts} == {p.number for i in rubric.ITEMS
                                                   if not i.gpu_only or torch.cuda.is_available()
                                                   for p in i.graded()}
    for t in graded_parts:
        assert t["status"] == "passed" and t["score"] == rubric.PARTS[t["number"]].points, t


def test_extra_credit_is_out_of_zero_so_the_maxima_add_up_to_the_regular_total(graded):
    for res in graded.values():
        extra = [t for t in res["tests"] if t["number"] in rubric.PARTS and rubric.item_of(t["number"]).extra_credit]
        assert extra and all(t["max_score"] == 0 for t in extra)
        assert "(extra credit)" in extra[0]["name"]
        assert sum(t["max_score"] for t in res["tests"]) == rubric.total(gpu=False)
    assert sum(t["score"] for t in graded["solution"]["tests"]) == rubric.total(gpu=False) + 5


def test_names_do_not_repeat_the_number_gradescope_shows(graded):
    names = {t["number"]: t["name"] for t in graded["solution"]["tests"]}
    assert names["1"] == "Forward correctness" and names["4.3"] == "Robustness: non-contiguous x and dy"
    assert not any(name[0].isdigit() for name in names.values())


def test_starter_scores_zero_with_todo_messages(graded):
    res = graded["starter"]
    parts = [t for t in res["tests"] if t["number"] != "0"]
    assert parts and all(t["score"] == 0 and "NotImplementedError: TODO" in t["output"] for t in parts), res


def test_gpu_parts_are_left_out_with_a_note_without_cuda(graded):
    import torch
    gpu = [t for t in graded["solution"]["tests"] if t["number"].startswith("10.")]
    if torch.cuda.is_available():
        assert len(gpu) == 4 and all(t["max_score"] == rubric.PARTS[t["number"]].points for t in gpu)
    else:
        out = graded["solution"]["output"]
        assert gpu == [] and out.startswith(rubric.GPU_NOTE + "\nPredicted on an H200"), out
        for part, pct in rubric.COPY_NEEDED.items():
            assert f"{rubric.PARTS[part].name} ≈ " in out and f"({part} needs {pct:.0f}%)" in out
        assert "No prediction of item 10: its steps did not run" in graded["starter"]["output"]


def test_results_follow_gradescopes_format(graded):
    import torch
    res = graded["solution"]
    assert isinstance(res["execution_time"], (int, float)) and res["stdout_visibility"] == "hidden"
    for t in res["tests"]:
        assert set(t) >= {"name", "number", "score", "max_score", "status", "output", "visibility"}
        assert t["status"] in ("passed", "failed")
    assert gradescope_format.problems(res) == []
    board = {e["name"]: e for e in res["leaderboard"]}
    suffix = "" if torch.cuda.is_available() else " (predicted)"
    for part in ("10.1", "10.2", "10.3", "10.4"):
        entry = board[f"{rubric.PARTS[part].name}, % of copy{suffix}"]
        assert entry["order"] == "desc" and 50 < entry["value"] <= 110, entry   # the solution: near a copy's
    json.dumps(res)


@pytest.mark.parametrize("failed, ranked", [(None, True), ("9", True), ("7", True), ("4.4", False), ("1", False)])
def test_a_submission_with_wrong_outputs_is_not_ranked_on_the_speed_leaderboard(failed, ranked):
    from autograder import plugin
    board = [{"name": "forward fp32, % of copy (predicted)", "value": 97.0, "order": "desc"},
             {"name": "GPU path", "value": "rows"}]
    tests = [{"number": n, "status": "failed" if n == failed else "passed"} for n in ("1", "4.4", "7", "9")]
    got = plugin.ranked(board, tests)
    assert got[1] == board[1]                                   # what is not a ranking stays
    if ranked:
        assert got == board
    else:
        assert got[0] == {"name": board[0]["name"], "value": f"not ranked: outputs wrong (part {failed} failed)"}
        assert gradescope_format.problems({"tests": [], "leaderboard": got}) == []


def test_the_format_check_finds_what_gradescope_refuses():
    bad = {"tests": [{"name": "a", "score": "1", "status": "ok"}], "stdout_visibility": "later",
           "leaderboard": [{"name": "speed", "value": None, "order": "up"}, {"value": 3}]}
    assert gradescope_format.problems(bad) == [
        "stdout_visibility 'later' is not one of ['after_due_date', 'after_published', 'hidden', 'visible']",
        "tests[0].score is not a number", "tests[0].status is 'ok', not passed or failed",
        "leaderboard[0].value is neither a number nor text", "leaderboard[0].order 'up' is not asc or desc",
        "leaderboard[1] has no name"]


def test_feedback_shows_no_hidden_test_code(graded):
    for t in graded["starter"]["tests"]:
        assert "def test_" not in t["output"] and "hidden" not in t["output"] and len(t["output"]) < 4001


def test_table_lists_every_item_and_the_total(graded):
    text = grade.table(graded["solution"])
    for item in rubric.ITEMS:
        assert item.name in text
    assert "90 / 90" in text and "+ 5 extra credit" in text and "on the course GPU machine only" in text
    assert "0 / 90" in grade.table(graded["starter"])


def test_a_folder_is_searched_for_its_one_rmsnorm_py_and_nothing_to_grade_says_so(tmp_path, capsys):
    (tmp_path / "hw" / "src").mkdir(parents=True)
    (tmp_path / "hw" / "src" / "rmsnorm.py").write_text("# a submission\n")
    assert grade.resolve(tmp_path / "hw") == tmp_path / "hw" / "src" / "rmsnorm.py"
    (tmp_path / "empty").mkdir()
    assert grade.main([str(tmp_path / "empty"), str(tmp_path / "r.json")]) == 2
    assert grade.main([str(tmp_path / "missing.py"), str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "No rmsnorm.py was found" in err and "missing.py: no such file or folder" in err


def test_table_says_when_a_part_failed_for_the_reason_above(graded):
    text = grade.table(graded["starter"])
    assert text.count("NotImplementedError: TODO: Part (c): run the forward") == 1
    assert "(the same reason as above)" in text


def test_a_repeated_reason_names_the_part_that_gave_it_unless_it_is_the_one_just_above():
    def t(number, output):
        return {"number": number, "score": 0.0, "max_score": 1.0, "status": "failed", "output": output}
    res = {"tests": [t("1", "reason A"), t("2", "reason A"), t("3", "reason B"), t("5", "reason A")]}
    lines = [ln.strip() for ln in grade.table(res).splitlines()]
    assert lines.count("reason A") == 1 and lines.count("reason B") == 1
    after = {lines[i - 1].split()[0]: ln for i, ln in enumerate(lines) if ln.startswith("(the same reason")}
    assert after == {"2": "(the same reason as above)", "5": "(the same reason as 1)"}


def test_a_job_dispatches_each_kind_of_task_from_its_table_and_refuses_others(tmp_path):
    import json
    from autograder.job import main
    assert set(TASKS) == {"forward", "backward", "autograd"}
    with pytest.raises(ValueError, match="unknown task 'fwd'"):
        run_task(None, {"op": "fwd"}, {}, None)
    for backend, ops, timed in (("triton", ["speed", "speed"], True), ("triton", ["speed", "autograd"], False),
                                ("mini_triton", ["speed"], False)):      # item 10's job: the judge times it
        (tmp_path / "job.json").write_text(json.dumps({"backend": backend, "tasks": {
            f"t{i}": {"op": op} for i, op in enumerate(ops)}}))
        assert main.timed_job(tmp_path) is timed


def test_a_job_reports_what_the_function_saved_and_finds_its_r():
    import torch

    class Saves(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, torch.ones(x.shape[0]))
            return x * 2

        @staticmethod
        def backward(ctx, dy):
            return dy * 2
    x = torch.randn(3, 4, requires_grad=True)
    r, kinds = saved_r(Saves.apply(x), rows=3)
    assert kinds == [[[3, 4], "float32"], [[3], "float32"]] and r.shape == (3,)
    assert saved_r(Saves.apply(x), rows=4) == (None, kinds)
    assert saved_r(x.detach(), rows=3) == (None, None)


def test_the_jobs_tasks_run_as_on_a_gpu_where_nothing_is_recorded(monkeypatch):
    """With real Triton a job records no launches (Phase.rec is None): every task of the GPU job's kinds
    must still run and report, with no stored masks and no simulator statistics. Run here with the
    simulator's kernels but no recording, which takes the same paths."""
    import sys

    from rmsnorm_testkit.compare import reference
    from autograder.hidden.cases import GPU_ROBUST, case, flat, make_inputs
    monkeypatch.setenv("MINI_TRITON", "1")
    monkeypatch.setattr(sys, "path", [str(ROOT), *sys.path])
    mod = load_submission(ROOT / "solution" / "rmsnorm.py")
    cases = {"small": case((6, 64)), **{k: v for k, v in GPU_ROBUST.items() if v.shape[-1] <= 1024}}
    inputs = make_inputs(cases)
    inputs["small"]["r"] = reference(inputs["small"]["x"], inputs["small"]["g"])[1].float()
    tasks = {"fwd": {"op": "forward", "tensors": {"x": "x.small", "g": "g.small"}},
             "bwd": {"op": "backward", "tensors": {t: f"{t}.small" for t in ("x", "g", "dy", "r")}},
             "ag": {"op": "autograd", "tensors": {t: f"{t}.small" for t in ("x", "g", "dy")}}}
    results, tensors = run_tasks(mod, tasks, flat(inputs), triton=None)
    assert all(r.get("ok") for r in results.values()), results
    assert not any(k.endswith(".stored") for k in tensors) and "ag.r_saved" in tensors


def test_a_job_that_cannot_start_makes_the_grading_an_autograder_error_not_a_grade(tmp_path, monkeypatch):
    """A grading runs no probe of its own: its jobs check the machine before they load the submission. A runtime
    folder whose job cannot start (a setup problem, never the student's) makes the whole grading the fallback (an
    autograder error), with the job's cause and the preflight as the fix to try."""
    from autograder import config, runtime
    broken = runtime.copy_into(tmp_path / "runtime")
    (broken / runtime.ENTRY).write_text("raise SystemExit('the runtime is broken')\n")
    monkeypatch.setenv(config.RUNTIME_VAR, str(broken))
    monkeypatch.setattr(grade, "start_preflight", lambda: pytest.fail("a grading started a preflight probe"))
    results = tmp_path / "results.json"
    with pytest.raises(grade.GraderError, match="the runtime is broken") as e:
        grade.grade(ROOT / "solution" / "rmsnorm.py", results)
    assert "before loading the submission" in e.value.cause and "autograder.preflight" in e.value.fix
    written = json.loads(results.read_text())
    assert {k: v for k, v in written.items() if k != "execution_time"} == \
        {k: v for k, v in grade.FALLBACK.items() if k != "execution_time"}, written


def test_a_job_that_reports_a_cuda_build_under_the_cpus_cap_is_the_graders_error(tmp_path, monkeypatch):
    """What the preflight refused before a grading, each job's own report now refuses: a CUDA build of torch under
    the address-space cap sized for the CPU build (the job's report is read before anything of the submission)."""
    from autograder import runner
    from autograder.config import Limits
    refused = runner.cuda_build_refused({"torch": "2.13.0+cu128", "cuda": "12.8"}, Limits())
    assert "is a CUDA build (CUDA 12.8)" in refused.cause and "whl/cpu torch==2.13.0" in refused.fix
    assert runner.cuda_build_refused({"torch": "2.13.0+cu128", "cuda": "12.8"}, Limits(memory_bytes=None)) is None
    assert runner.cuda_build_refused({"torch": "2.13.0+cpu", "cuda": None}, Limits()) is None
    seen = []
    monkeypatch.setattr(runner, "cuda_build_refused",
                        lambda facts, limits: seen.append(facts) or runner.GraderError("refused, as a CUDA build"))
    sub = tmp_path / "rmsnorm.py"
    sub.write_text("# nothing\n")
    with pytest.raises(runner.GraderError, match="refused, as a CUDA build"):
        runner.run_job(sub, {}, {})
    assert seen and {"torch", "cuda", "python"} <= set(seen[0])


def test_a_preflight_without_a_runtime_folder_gets_one_that_is_removed_after_it(monkeypatch, tmp_path):
    """A child forked from the warm server ends without its exit handlers, so the folder it would make for its
    jobs would stay behind: the grader makes it, hands it down, and removes it once the preflight is judged."""
    from autograder import config, warm
    seen = {}

    class Done:
        def wait(self, timeout=None):
            return 0

    def start(module, args, *, env, cwd, out, preload=None):
        seen["folder"] = env.get(config.RUNTIME_VAR)
        seen["held_job"] = (Path(seen["folder"]) / "autograder" / "job" / "__main__.py").is_file()
        return Done()
    monkeypatch.delenv(config.RUNTIME_VAR, raising=False)
    monkeypatch.setattr(warm, "start", start)
    monkeypatch.setattr(grade, "_PREFLIGHT_PASSED", set())
    grade.preflight()
    assert seen["folder"] and seen["held_job"] and not Path(seen["folder"]).exists()
