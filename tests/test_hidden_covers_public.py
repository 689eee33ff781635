"""The hidden cases cover the public tests: whatever a public test gives the student's functions, some hidden
case gives them too, so a mistake the public tests catch cannot score full marks.

Both sides are run on the solution with the same recorder (tests/public_inputs.py): the public tests in a
pytest of their own with the recorder as a plugin, the hidden cases as the grader's simulator jobs run them
(hidden/cases.sim_jobs: each task's tensors, views, eps and the inputs that require grad). Each call becomes a
record of what it reached (functions and kernels), what it was given (dtype, dims, layouts, N against powers of
2, eps, a row of zeros, each kernel's path: in chunks, a last chunk partly past the row's end) and which
inputs required grad. A public record is covered when a hidden record reached all it reached and was given all
it was given; and, for a step through autograd, when a hidden record that reached as much had the same inputs
requiring grad (which inputs require grad is read in the Function's backward, whatever the input's form, so
it is matched apart). A new public test fails here until a hidden case covers it.
"""
import json
import os
import subprocess
import sys

import pytest
import torch
from rmsnorm_testkit.compare import apply_view, load_impl, reference

from autograder.hidden import cases
from autograder.job.submission.host import step_leaves
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests"))
from public_inputs import OUT_VAR, Recorder, input_features, layout, short_id  # noqa: E402

SOLUTION = ROOT / "solution" / "rmsnorm.py"


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    """The records of every public test, run on the solution."""
    out = tmp_path_factory.mktemp("public") / "records.json"
    env = {**os.environ, OUT_VAR: str(out), "RMSNORM_IMPL": str(SOLUTION), "MINI_TRITON": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    env.pop("TRITON_INTERPRET", None)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "public_inputs",
                          str(ROOT / "starter" / "tests")], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    return json.loads(out.read_text())


def hidden_records() -> list:
    """The records of the simulator jobs' tasks (a rerun once), run on the solution as the grader's jobs run them
    (job/judge/remote.py, job/submission/host.py)."""
    impl = load_impl(SOLUTION, backend="mini_triton", name="hidden_covers_public")
    inputs = cases.flat(cases.sim_inputs(lambda x, g, eps: reference(x, g, eps=eps)[1].float()))
    recorder = Recorder()
    for tasks in cases.sim_jobs().values():
        for name, task in tasks.items():
            if name.endswith(cases.again("")):
                continue
            t = {k: apply_view(inputs[v].clone(), task.get("view", {}).get(k)) for k, v in task["tensors"].items()}
            with recorder.watching([impl], name):
                run_task(impl, task, t)
    return recorder.records


def run_task(impl, task, t):
    """One task's calls, as host.py makes them."""
    kw = {"eps": task["eps"]} if "eps" in task else {}
    if task["op"] == "forward":
        impl.rmsnorm_forward(t["x"], t["g"], **kw)
    elif task["op"] == "backward":
        impl.rmsnorm_backward(t["dy"], t["x"], t["g"], t["r"])
    else:
        requires_grad = task.get("requires_grad", ("x", "g"))
        x, g = step_leaves(t["x"], t["g"], requires_grad)
        y = impl.rmsnorm(x, g, **kw)
        if requires_grad:
            y.backward(t["dy"])


@pytest.fixture(scope="module")
def hidden():
    return [r.plain() for r in hidden_records()]


def uncovered(public: list, hidden: list) -> list:
    """[(public record, what no hidden record gave it)] of the public records no hidden one covers."""
    missing = []
    for p in public:
        reached, given = set(p["reached"]), set(p["inputs"])
        same = [h for h in hidden if reached <= set(h["reached"])]
        closest = min((given - set(h["inputs"]) for h in same), key=len, default=given)
        if closest:
            missing.append((p, f"given {sorted(closest)}" if same else f"no hidden call reached {sorted(reached)}"))
        elif p["grads"] is not None and not any(h["grads"] == p["grads"] for h in same):
            missing.append((p, f"with {p['grads'] or 'neither x nor g'} requiring grad"))
    return missing


def said(missing) -> str:
    return "\n".join(f"{p['where']}: {p['call']} {sorted(p['inputs'])}: no hidden case {why}"
                     for p, why in missing)


def test_every_public_input_has_a_hidden_case_with_its_features(public, hidden):
    missing = uncovered(public, hidden)
    assert not missing, ("public tests whose inputs no hidden case gives (add a case to autograder/hidden/cases.py):\n"
                         + said(missing))


def test_every_public_test_that_calls_the_file_is_recorded(public):
    """The recorder sees each public test that calls the file under test: a test it missed would pass here unseen."""
    names = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
                            str(ROOT / "starter" / "tests")], cwd=ROOT, capture_output=True, text=True, timeout=300,
                           env={**os.environ, "RMSNORM_IMPL": str(SOLUTION), "MINI_TRITON": "1"}).stdout
    collected = {short_id(ln) for ln in names.splitlines() if ln.startswith("starter/tests/") and "::" in ln}
    assert collected and collected == {r["where"] for r in public}, collected ^ {r["where"] for r in public}


@pytest.mark.parametrize("dropped, public_tests", [
    (("long_odd", "long_odd_fwd"), ["test_part_a.py::test_long_rows_in_chunks[3x300-fp32]",
                                    "test_part_b.py::test_long_rows_in_chunks[3x300]"]),
    (("only_x_grad",), ["test_part_c.py::test_backward_reads_x_and_dy_once_and_writes_dx_once",
                        "test_part_c.py::test_only_the_inputs_that_require_grad[only_x]"]),
    (("no_grad",), ["test_part_c.py::test_the_eps_the_caller_passes"]),
], ids=["long rows in chunks", "only x requires grad", "neither requires grad"])
def test_a_hidden_case_left_out_leaves_the_public_tests_it_covered_uncovered(public, hidden, dropped, public_tests):
    """The check can fail: without these cases, the public tests whose inputs only they give have no counterpart."""
    kept = [h for h in hidden if h["where"].split("_", 1)[1] not in dropped]
    assert len(kept) < len(hidden)
    found = {p["where"] for p, _ in uncovered(public, kept)}
    assert set(public_tests) <= found, found


@pytest.mark.parametrize("view, words", [(None, "contiguous"), ([0, 80, 1], "rows apart"),
                                         ([0, None, 2], "columns apart"), ("T", "transposed")])
def test_a_layout_is_named_as_a_kernel_that_steps_through_rows_sees_it(view, words):
    assert layout(apply_view(torch.zeros(24, 160), view)) == words


def test_the_features_name_what_a_call_is_given():
    x = torch.randn(2, 3, 20001, dtype=torch.bfloat16)
    x[1, 2] = 0
    got = input_features(x, torch.ones(20001), x.transpose(0, 1), eps=0.1)
    assert got == {"x in bf16", "x contiguous", "x of 3 or more dims", "N not a power of 2",
                   "g in another dtype than x", "dy rows apart", "eps other than the default", "a row of zeros"}
