"""Hidden cases live in one file: the TA guide's example adds one to a copy of the grader, changing
autograder/hidden/cases.py alone, and a grading with that copy runs it. Also: the guide's rubric
table agrees with rubric.py."""
import json
import re
import shutil
import subprocess
import sys

import pytest
import torch

from autograder import config, rubric, runner
from autograder.hidden import cases as hidden_cases
from conftest import ROOT

GUIDE = (ROOT / "docs" / "ta-guide.md").read_text()


def guide_example():
    """The python block of the guide's "Adding a hidden case" section."""
    section = GUIDE[GUIDE.index("### Adding a hidden case"):]
    return re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)


@pytest.mark.usefixtures("sandbox_accounts")          # grades through the sandbox (conftest.py)
def test_a_hidden_case_and_new_points_added_as_the_guide_shows_are_graded(grader_copy, tmp_path):
    """Two recipes in one grading: the guide's hidden case, and points changed in rubric.py alone (4.4 from 3
    to 4 points, so item 4 from 15 to 16)."""
    example = guide_example()
    assert example.startswith("# autograder/hidden/cases.py")
    cases = grader_copy / "autograder" / "hidden" / "cases.py"
    cases.write_text(cases.read_text() + "\n" + example)          # the one file changed for the case
    rubric_py = grader_copy / "autograder" / "rubric.py"
    text = rubric_py.read_text()
    for old, new in (('Part("4.4", "N not a power of two, N = 1, large N, M = 1", 3)',
                      'Part("4.4", "N not a power of two, N = 1, large N, M = 1", 4)'),
                     ('Item("4", "Robustness", 15,', 'Item("4", "Robustness", 16,')):
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    rubric_py.write_text(text)                                     # the one file changed for the points
    sub = tmp_path / "rmsnorm.py"                                  # right everywhere but at N = 5000
    sub.write_text((ROOT / "tests" / "corpus" / "simple.py").read_text().replace(
        "def rmsnorm_forward(x, g, eps=1e-5):\n",
        "def rmsnorm_forward(x, g, eps=1e-5):\n    eps = 0.5 if x.shape[-1] == 5000 else eps\n"))
    p = subprocess.run([sys.executable, "-m", "autograder.grade", str(sub), str(tmp_path / "r.json")],
                       cwd=grader_copy, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "4.4" in p.stdout and "x of shape (4, 5000) fp32 (N = 5000: longer than 4096, not a power of 2)" \
        in p.stdout, p.stdout
    assert "87 / 91" in p.stdout, p.stdout                          # 4.4 (now 4 points) lost, nothing else
    results = json.loads((tmp_path / "r.json").read_text())
    assert [t["max_score"] for t in results["tests"] if t.get("number") == "4.4"] == [4.0]
    # the recipe's last step: the mistakes graded again with the new case (two of them here, `-k` as the guide says)
    section = GUIDE[GUIDE.index("### Adding a hidden case"):].split("\n### ", 1)[0]
    assert "python -m pytest tests/test_mistakes_graded.py" in section and "-k NAME" in section
    for folder in ("tests", "solution"):
        shutil.copytree(ROOT / folder, grader_copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "starter" / "generate.py", grader_copy / "starter")      # the mistakes are edits of it
    part_44 = 'Part("4.4", "N not a power of two, N = 1, large N, M = 1", {})'
    rubric_py.write_text(rubric_py.read_text().replace(part_44.format(4), part_44.format(3))
                         .replace('Item("4", "Robustness", 16,', 'Item("4", "Robustness", 15,'))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "tests/test_mistakes_graded.py", "-k",
                        "costs_points and (eps_left_out_of_backward or block_capped_at_4096)"],
                       cwd=grader_copy, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0 and "2 passed" in p.stdout, p.stdout[-3000:]


def test_the_guides_rubric_table_matches_the_rubric():
    rows = re.findall(r"^\| (\d+) ([^|]+?) \| (\d+(?:\.\d+)?) \|", GUIDE, flags=re.M)
    table = {num: (name.strip(), float(points)) for num, name, points in rows}
    for item in rubric.ITEMS:
        name, points = table.pop(item.number)
        assert name.startswith(item.name) and points == item.points, (item, name, points)
        assert ("extra credit" in name) == item.extra_credit
    assert not table, f"rows the rubric does not have: {table}"


def test_adding_a_case_changes_no_other_cases_inputs():
    from autograder.hidden.cases import ROBUST, case, make_inputs
    some = {k: ROBUST[k] for k in ("fp16", "3d", "n1")}
    before = make_inputs(some)
    after = make_inputs({"new": case((4, 5000), part="4.4"), **dict(reversed(list(some.items())))})
    for k in some:
        for t in ("x", "g", "dy"):
            assert torch.equal(before[k][t], after[k][t]), (k, t)


def test_every_robust_case_names_a_part_of_item_4_that_the_rubric_grades():
    from autograder.hidden.cases import GPU_ROBUST, ROBUST, robust_parts
    for name, c in {**ROBUST, **GPU_ROBUST}.items():
        assert c.part in rubric.PARTS and c.part.startswith("4."), (name, c.part)
    assert sorted(robust_parts()) == ["4.1", "4.2", "4.3", "4.4", "4.5", "4.6"]
    assert sum(map(len, robust_parts().values())) == len(ROBUST)


def test_each_autograd_task_says_which_inputs_require_grad_and_only_4_6_asks_for_fewer_than_both():
    """The choice travels from the Case to the task (host.py makes those inputs leaves that require grad);
    job/submission/tasks.py runs the GPU's steps with both, so every GPU case has both."""
    from autograder.hidden.cases import GPU_ROBUST, ROBUST, gpu_jobs, sim_jobs, task_name
    tasks = {k: v for job in [*sim_jobs().values(), *gpu_jobs().values()] for k, v in job.items()}
    fewer = {k for k, c in ROBUST.items() if c.requires_grad != ("x", "g")}
    assert {ROBUST[k].requires_grad for k in fewer} == {("x",), ("g",), ()}
    assert {ROBUST[k].part for k in fewer} == {"4.6"} and not any(c.forward_only for c in map(ROBUST.get, fewer))
    for name, task in tasks.items():
        if task["op"] == "autograd":
            case = name.removeprefix("ag_").removesuffix("_again")
            want = list(ROBUST[case].requires_grad) if case in ROBUST else ["x", "g"]
            assert task["requires_grad"] == want, name
    assert all(c.requires_grad == ("x", "g") for c in GPU_ROBUST.values())
    assert tasks[task_name("ag", "no_grad")]["requires_grad"] == []


def test_a_long_case_takes_every_power_of_2_chunk_with_a_last_chunk_partly_past_the_row():
    """Rows longer than the single-pass limit (16384 in fp32), N odd: whatever power-of-2 chunk a file picks, its
    last chunk is partly masked, in the forward alone and through autograd."""
    from autograder.hidden.cases import ROBUST
    long_odd = [c for c in ROBUST.values() if c.shape[-1] > 16384 and c.shape[-1] % 2 and c.dtype == "float32"]
    assert {c.forward_only for c in long_odd} == {True, False} and {c.part for c in long_odd} == {"4.4"}


def _grads_outcome(tensors, only_x_info):
    """An outcome of the core step "d" (x and g both requiring grad) and of 4.6's step where only x does."""
    from autograder.hidden.cases import task_name
    return runner.Outcome(tensors, {task_name("ag", "d"): {"ok": True}, task_name("ag", "only_x_grad"): only_x_info},
                          None, None)


def test_a_gradient_asked_for_that_the_step_with_both_gets_is_named_by_needs_input_grad():
    from autograder.hidden.cases import task_name
    from autograder.judge.outputs import needs_input_grad
    d, only_x = task_name("ag", "d"), task_name("ag", "only_x_grad")
    none = {"ok": True, "not_tensors": {"dx": "NoneType", "dg": "NoneType"}}
    found = needs_input_grad(_grads_outcome({f"{d}.dx": torch.ones(2, 3), f"{d}.dg": torch.ones(3)}, none), only_x,
                             ("x",), "x of shape (2, 3) fp32")
    assert found.cause == "needs_input_grad" and rubric.CAUSE_OWNERS[found.cause] == "4.6"
    assert found.message.startswith("x.grad is None after y.backward(dy) for x of shape (2, 3) fp32")
    assert "ctx.needs_input_grad[0] is True" in found.message and "[0] is x's, [1] is g's" in found.message
    # missing in the step with both too: not a matter of the flags (output() names it where it shows)
    assert needs_input_grad(_grads_outcome({f"{d}.dg": torch.ones(3)}, none), only_x, ("x",), "x") is None
    # the gradient asked for came back, none for g: nothing to say before the values
    given = {"ok": True, "not_tensors": {"dg": "NoneType"}}
    assert needs_input_grad(_grads_outcome({f"{only_x}.dx": torch.ones(2, 3)}, given), only_x, ("x",), "x") is None
    # g.grad set although g does not require grad
    extra = needs_input_grad(_grads_outcome({f"{only_x}.dx": torch.ones(2, 3), f"{only_x}.dg": torch.ones(3)},
                                            {"ok": True}), only_x, ("x",), "x")
    assert extra.cause == "needs_input_grad" and extra.message.startswith("g.grad is set after y.backward(dy)")


def test_the_names_a_job_uses_come_from_one_place():
    from autograder.hidden.cases import again, input_key, kind_of, sim_jobs, task_name
    from autograder.job.wire.protocol import output_key
    jobs = sim_jobs()
    tasks = {k: v for job in jobs.values() for k, v in job.items()}
    assert task_name("fwd", "d") in tasks and again(task_name("bwd", "d")) in tasks
    assert {kind_of(t) for t in tasks} == {"fwd", "bwd", "ag"}
    assert tasks[task_name("bwd", "a")]["tensors"]["r"] == input_key("r", "a")
    assert output_key("fwd_a", "y", "stored") == "fwd_a.y.stored" and output_key("fwd_a", "y") == "fwd_a.y"


def test_a_core_case_s_eps_is_the_one_the_judge_and_the_given_r_use(monkeypatch):
    """A TA who edits a core case's eps gets it everywhere: in the r handed to the backward task and in the
    judge's reference of each core output (items 1-3)."""
    from autograder import runner
    from autograder.hidden import cases
    from autograder.judge import correctness
    seen = {}
    monkeypatch.setitem(cases.CORE, "a", cases.CORE["a"]._replace(eps=0.01))
    monkeypatch.setattr(correctness, "forward_outputs", lambda L, o, task, x, g, eps, story: seen.update({task: eps}))
    monkeypatch.setattr(correctness, "backward_outputs",
                        lambda dx, dg, o, task, x, g, dy, eps, story, r: seen.update({task: eps}))
    inputs = cases.sim_inputs(lambda x, g, eps: torch.full((x.shape[0],), eps))
    tasks = [cases.task_name(kind, k) for k in cases.CORE for kind in ("fwd", "bwd")]
    outcome = runner.Outcome({}, {t: {"ok": True} for t in tasks}, None, None)
    correctness.item_1(inputs, outcome)
    correctness.items_2_3(inputs, outcome)
    assert seen[cases.task_name("fwd", "a")] == seen[cases.task_name("bwd", "a")] == 0.01
    assert seen[cases.task_name("fwd", "b")] == 1e-5 and float(inputs["a"]["r"][0]) == pytest.approx(0.01)


def test_a_rerun_that_returns_none_twice_is_not_called_nondeterministic():
    """4.7 compares what both runs returned, None included: a missing dg is charged where it is owned, once."""
    from autograder import runner
    from autograder.hidden import cases
    from autograder.judge import correctness
    first = cases.task_name("bwd", "d")
    second = cases.again(first)
    dx = torch.ones(3, 4)
    info = {"ok": True, "not_tensors": {"dg": "NoneType"}}
    outcome = runner.Outcome({f"{first}.dx": dx, f"{second}.dx": dx.clone()}, {first: info, second: dict(info)},
                             None, None)
    assert correctness._same(outcome, first, second, "dg") and correctness._same(outcome, first, second, "dx")
    info2 = {"ok": True}
    outcome = runner.Outcome({f"{first}.dg": dx}, {first: info2, second: dict(info)}, None, None)
    assert not correctness._same(outcome, first, second, "dg")


def test_each_gpu_part_runs_in_a_job_of_its_own_so_a_slow_case_costs_its_own_part_only():
    """4.4's large N (where an autotuned kernel compiles longest), 4.7's rerun and item 10's timings: a time-out
    in one job leaves the others' tasks graded."""
    C = hidden_cases
    jobs = C.gpu_jobs()
    assert set(jobs) == {"robust", "rerun", "speed"} and set(C.gpu_jobs(speed_only=True)) == {"speed"}
    part_of = {C.task_name("ag", k): c.part for k, c in C.GPU_ROBUST.items()}
    assert {part_of[t] for t in jobs["robust"]} == {"4.4"}
    assert {part_of.get(t.removesuffix(C.again(""))) for t in jobs["rerun"]} == {"4.7"}
    assert len(jobs["rerun"]) == 2 and {C.kind_of(t) for t in jobs["speed"]} == {"speed"}
    slow = runner.Outcome({}, {}, "timed out after 300 s while compiling", None)
    done = lambda job: runner.Outcome({}, {t: {"ok": True} for t in jobs[job]}, None, None)  # noqa: E731
    every = runner.Combined({"robust": (set(jobs["robust"]), slow), "rerun": (set(jobs["rerun"]), done("rerun")),
                             "speed": (set(jobs["speed"]), done("speed"))})
    assert all(every.task_error(t).startswith("timed out") for t in jobs["robust"])
    assert all(every.task_error(t) is None for t in [*jobs["rerun"], *jobs["speed"]])


def test_a_grading_may_last_as_long_as_its_jobs_limits_together():
    """The project's own pytest timeout (pyproject.toml, 600 s) is not the grading's: on the H200 an autotuned
    library file compiled past it, and the whole grading ended as 19 errors. The grading's pytest runs without a
    per-test timeout, under a whole-run limit that covers every job's limits, compile allowance included."""
    assert len(hidden_cases.gpu_jobs()) == config.GPU_JOBS
    every_job = 2 * config.SIM_LIMITS.timeout_s + config.GPU_JOBS * (config.GPU_LIMITS.timeout_s
                                                                     + config.GPU_LIMITS.compile_s)
    assert config.grading_s() > every_job
    source = (ROOT / "autograder" / "grade.py").read_text()
    assert '"-p", "no:timeout"' in source and "timeout=config.grading_s()" in source


def test_the_traffic_items_read_a_shape_and_dtype_drawn_for_each_grading():
    """Items 5 and 6 read the core cases and one shape and dtype no source names: drawn when the grader's process
    imports the cases, in the range the handout states, never a core shape; items 1-3 do not grade it."""
    from autograder.hidden import cases
    draws = {cases._drawn_shape() for _ in range(200)}
    assert len(draws) > 100 and not draws & {c.shape for c in cases.CORE.values()}
    assert all(cases.DRAWN_ROWS[0] <= m <= cases.DRAWN_ROWS[1] and cases.DRAWN_COLS[0] <= n <= cases.DRAWN_COLS[1]
               for m, n in draws)
    assert list(cases.traffic_cases()) == [*cases.CORE, "drawn"]
    tasks = {**cases.sim_jobs()["forward"], **cases.sim_jobs()["autograd"]}
    assert cases.task_name("fwd", "drawn") in tasks and cases.task_name("bwd", "drawn") in tasks
    assert cases.task_name("ag", "drawn") not in tasks
    handout = " ".join((ROOT / "handout" / "README.md").read_text().split())
    assert f"({cases.DRAWN_ROWS[0]} to {cases.DRAWN_ROWS[1]} rows of {cases.DRAWN_COLS[0]} to {cases.DRAWN_COLS[1]} " \
           f"columns, in fp32, fp16 or bf16)" in handout
    assert cases.DRAWN_DTYPES == ("float32", "float16", "bfloat16")


def test_item_9_asks_for_a_fused_deterministic_backward_at_the_drawn_shape_too(tmp_path):
    """The solution with its backward's dg built by float atomics at every shape but the core ones: right and
    deterministic at (256, 128), where item 9 reads the buffer and dg, so only the drawn shape shows it, and item 9
    alone is charged (4.7 reads the core case d twice; atomics are no race)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from grade_in_process import verdicts
    from mistakes import SOLUTION, mistake
    atomic = mistake("dg_by_atomic_add")
    start = atomic.index("@triton.jit\ndef rmsnorm_bwd_kernel(")
    kernel = atomic[start:atomic.index("\n@", start + 1)].replace("def rmsnorm_bwd_kernel(", "def bwd_kernel_atomic(")
    src = SOLUTION.read_text()
    for old, new in (("    rmsnorm_bwd_kernel[(programs,)](",
                      "    core = (m, n) in {(37, 100), (24, 256), (6, 513), (256, 128)}\n"
                      "    (rmsnorm_bwd_kernel if core else bwd_kernel_atomic)[(programs,)]("),
                     ("alloc = torch.empty if single else torch.zeros", "alloc = torch.zeros"),
                     ("\ndef rmsnorm_backward(", f"\n{kernel}\n\n\ndef rmsnorm_backward(")):
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    path = tmp_path / "atomic_elsewhere" / "rmsnorm.py"
    path.parent.mkdir()
    path.write_text(src)
    failed = verdicts({"atomic_elsewhere": path})["atomic_elsewhere"]["failed"]
    assert list(failed) == ["9"], failed
    assert "not deterministic" in failed["9"] and "a shape drawn for this grading)" in failed["9"], failed["9"]


def test_item_9_reads_the_buffer_bound_at_a_second_drawn_shape_of_many_rows(tmp_path):
    """Item 9's partial buffer (at most M·N/8) and dg are read at d and at a shape of many rows drawn for each grading
    (a multiple of 8, so that M / 8 programs of 8 rows meet the bound exactly): the solution keeps its extra credit
    at the smallest such shape, and a file that gives each program one row except at the shapes the grader's source
    names loses it there, the shape named, and nothing else."""
    sys.path.insert(0, str(ROOT / "tests"))
    import hostile
    from grade_in_process import verdicts
    from autograder.hidden import cases
    draws = {cases._tall_shape() for _ in range(200)}
    assert all(cases.TALL_ROWS[0] <= m <= cases.TALL_ROWS[1] and m % 8 == 0 and n in cases.TALL_COLS
               for m, n in draws) and len(draws) > 20
    assert cases.task_name("bwd", "tall") in cases.sim_jobs()["autograd"]
    assert cases.task_name("fwd", "tall") not in cases.sim_jobs()["forward"]
    paths = {"solution": ROOT / "solution" / "rmsnorm.py", "core_only": tmp_path / "core_only" / "rmsnorm.py"}
    paths["core_only"].parent.mkdir()
    paths["core_only"].write_text(hostile.HOSTILE["improved_only_at_core_shapes"][3])
    got = verdicts(paths, tall=(cases.TALL_ROWS[0], 64))
    assert got["solution"]["failed"] == {}, got["solution"]["failed"]
    failed = got["core_only"]["failed"]
    assert list(failed) == ["9"], failed
    assert f"for x of shape ({cases.TALL_ROWS[0]}, 64) fp32, a shape drawn for this grading)" in failed["9"], failed
    handout = " ".join((ROOT / "handout" / "README.md").read_text().split())
    cols = ", ".join(str(n) for n in cases.TALL_COLS[:-1]) + f" or {cases.TALL_COLS[-1]}"
    assert f"{cases.TALL_ROWS[0]} to {cases.TALL_ROWS[1]} rows, a multiple of 8, of {cols} columns" in handout


def test_a_persistent_grid_of_a_fixed_size_keeps_its_points_at_a_drawn_shape_of_few_rows(tmp_path):
    """The solution with 32 programs whatever M (its buffer M·N/8 at (256, 128)): at a drawn shape of 20 rows, 12 of
    them have no rows and store a row of zeros each; that is no extra pass (items 6 and 9 keep their points)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from grade_in_process import verdicts
    from mistakes import SOLUTION
    old = ("    programs = _num_programs_bwd(m, per_sm, x.device)\n"
           "    rows_per_program = cdiv(m, programs)\n"
           "    programs = cdiv(m, rows_per_program)                 # no program left without rows\n")
    src = SOLUTION.read_text()
    assert src.count(old) == 1
    path = tmp_path / "fixed_grid" / "rmsnorm.py"
    path.parent.mkdir()
    path.write_text(src.replace(old, "    programs = 32\n    rows_per_program = cdiv(m, programs)\n"))
    failed = verdicts({"fixed_grid": path}, drawn=(20, 200))["fixed_grid"]["failed"]
    assert failed == {}, failed


def test_wrong_outputs_at_the_drawn_shape_are_charged_in_5_and_6_naming_the_shape_once(tmp_path):
    """Kernels that read x once but compute wrong outputs where the file takes the shape for the drawn one, right at
    the core shapes: items 1-3 never read the drawn shape, so 5 and 6 say what is wrong there, naming it once."""
    sys.path.insert(0, str(ROOT / "tests"))
    import hostile
    from grade_in_process import verdicts
    path = tmp_path / "wrong_at_drawn" / "rmsnorm.py"
    path.parent.mkdir()
    path.write_text(hostile.HOSTILE["cheap_wrong_kernels_at_the_drawn_shape"][3])
    failed = verdicts({"wrong": path}, drawn=(20, 200))["wrong"]["failed"]
    assert sorted(failed) == ["5", "6", "9"], failed
    for part, output in (("5", "r from rmsnorm_forward differs"), ("6", "from rmsnorm_backward differs")):
        assert output in failed[part] and failed[part].count("(20, 200)") == 1, failed[part]
        assert failed[part].count("a shape drawn for this grading") == 1, failed[part]
