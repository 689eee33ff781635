"""Hidden rubric tests (items 1-3, 5, 6, 8). Weights come from autograder/rubric.py."""
import pytest
from gradescope_utils.autograder_utils.decorators import number, visibility, weight

from autograder.rubric import BY_NUMBER
from rmsnorm_check import compare, reference, reference_grads

from conftest import SHAPES


def item(n):
    """Decorate a test with rubric item n's number and points."""
    def deco(fn):
        return number(n)(weight(BY_NUMBER[n].points)(visibility("visible")(fn)))
    return deco


def _need(outcome, task):
    err = outcome.task_error(task)
    if err:
        pytest.fail(err, pytrace=False)


def _check(outcome, key, name, expected, x):
    got = outcome.tensors.get(key)
    if got is None:
        pytest.fail(f"{name} was not returned", pytrace=False)
    msg = compare(name, got, expected, x)
    if msg:
        pytest.fail(msg, pytrace=False)


@item("1")
def test_forward_correctness(run):
    inputs, outcome = run
    for k in SHAPES:
        _need(outcome, f"fwd_{k}")
        x, g = inputs[f"x_{k}"], inputs[f"g_{k}"]
        _check(outcome, f"fwd_{k}.y", "y", reference(x, g), x)
        r = x.double().pow(2).mean(-1).add(1e-5).rsqrt().reshape(-1)
        _check(outcome, f"fwd_{k}.r", "r", r, x)


def _check_gradient(run, name, index):
    """Compare gradient ``name`` (index into reference_grads) on every shape."""
    inputs, outcome = run
    for k in SHAPES:
        _need(outcome, f"ag_{k}")
        x, g, dy = inputs[f"x_{k}"], inputs[f"g_{k}"], inputs[f"dy_{k}"]
        _check(outcome, f"ag_{k}.{name}", name, reference_grads(x, g, dy)[index], x)


@item("2")
def test_backward_dx(run):
    _check_gradient(run, "dx", 1)


@item("3")
def test_backward_dg(run):
    _check_gradient(run, "dg", 2)


@item("5")
def test_fused_forward(run):
    inputs, outcome = run
    _need(outcome, "fwd_d")
    M, N = SHAPES["d"]
    launches = outcome.info["fwd_d"]["launches"]
    if not launches:
        pytest.fail("your forward launched no kernel", pytrace=False)
    loaded = sum(a["loaded"] for L in launches for a in L["args"].values() if a["numel"] == M * N)
    stored = sum(a["stored"] for L in launches for a in L["args"].values() if a["numel"] == M * N)
    if loaded != M * N:
        pytest.fail(f"your forward loaded x {loaded / (M * N):.1f} times per element; a fused kernel reads it "
                    f"once", pytrace=False)
    if stored != M * N:
        pytest.fail(f"your forward stored {stored / (M * N):.1f} elements of size-M·N tensors per element of "
                    f"y; a fused kernel writes y once", pytrace=False)


@item("6")
def test_fused_backward(run):
    inputs, outcome = run
    _need(outcome, "ag_d")
    M, N = SHAPES["d"]
    launches = outcome.info["ag_d"]["launches"]
    loaded = sum(a["loaded"] for L in launches for a in L["args"].values() if a["numel"] == M * N)
    stored = sum(a["stored"] for L in launches for a in L["args"].values() if a["numel"] == M * N)
    # forward (x once, y once) plus backward (x, dy once; dx once); a partial dg buffer of M·N counts too
    if loaded > 3 * M * N + M * N:
        pytest.fail(f"forward+backward loaded {loaded / (M * N):.1f} M·N elements; fused kernels need 3 "
                    f"(x twice and dy once), plus the partial dg buffer", pytrace=False)
    if stored > 2 * M * N + M * N:
        pytest.fail(f"forward+backward stored {stored / (M * N):.1f} M·N elements; fused kernels need 2 "
                    f"(y and dx), plus the partial dg buffer", pytrace=False)


@item("8")
def test_race_free(run):
    _, outcome = run
    for k in SHAPES:
        err = outcome.task_error(f"ag_{k}")
        if err and "DataRaceError" in err:
            pytest.fail(err, pytrace=False)
        _need(outcome, f"ag_{k}")
