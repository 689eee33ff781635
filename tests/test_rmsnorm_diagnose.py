"""The shared diagnosis (starter/tests/rmsnorm_diagnose.py, its causes in rmsnorm_causes.py): it names
each known mistake from the output alone, checks elements never stored before any value, and says rounding
or formula when it knows neither."""
import sys

import pytest
import torch

from autograder import rubric
from conftest import ROOT

sys.path.insert(0, str(ROOT / "starter" / "tests"))
import rmsnorm_causes as C  # noqa: E402
import rmsnorm_diagnose as D  # noqa: E402
from rmsnorm_check import random_inputs, reference  # noqa: E402

X, G, DY = random_inputs((37, 100))
Y, R, DX, DG = reference(X, G, DY)
FORWARD = C.forward_alternatives(X, G, 0.1)
_, R_EPS, DX_EPS, DG_EPS = reference(X, G, DY, eps=0.1)      # a large eps: leaving it out shows
BACKWARD = C.backward_alternatives(X, G, DY, R_EPS, 0.1)


def test_every_cause_has_an_owner_in_the_rubric():
    assert set(C.CAUSES) <= set(rubric.CAUSE_OWNERS), set(C.CAUSES) - set(rubric.CAUSE_OWNERS)


@pytest.mark.parametrize("key", sorted(FORWARD))
def test_a_forward_computed_a_known_wrong_way_is_named(key):
    y, r = FORWARD[key]
    _, ref_r = C.forward_alternatives_plain(X, G, 0.1)
    ref_y = reference(X, G, eps=0.1)[0]
    found = [D.diagnose(n, got.float(), want, X, alternatives=C.pick(FORWARD, i), fmt={"eps": 0.1})
             for n, got, want, i in (("r", r, ref_r, 1), ("y", y, ref_y, 0))]
    found = [f for f in found if f is not None]
    assert found and {f.cause for f in found} == {key}, [(f.cause, f.message[:100]) for f in found]
    assert all(f.checked for f in found)


@pytest.mark.parametrize("key", sorted(BACKWARD))
def test_a_backward_computed_a_known_wrong_way_is_named(key):
    dx, dg = BACKWARD[key]
    found = [D.diagnose(n, got.float(), want, X, alternatives=C.pick(BACKWARD, i) + [C.dg_rows(X, DY, R_EPS)],
                        fmt={"eps": 0.1})
             for n, got, want, i in (("dx", dx, DX_EPS, 0), ("dg", dg, DG_EPS, 1))]
    found = [f for f in found if f is not None]
    assert found and {f.cause for f in found} == {key}, [(f.cause, f.message[:100]) for f in found]


def test_the_right_output_has_no_finding():
    assert D.diagnose("y", Y.float(), Y, X, alternatives=C.pick(FORWARD, 0)) is None


def test_elements_never_stored_come_before_values_and_are_classified():
    y = Y.float().clone()
    rows = torch.ones_like(y, dtype=torch.bool)
    rows[20:] = False
    found = D.diagnose("y", y.masked_fill(~rows, float("nan")), Y, X, stored=rows)
    assert found.cause == "rows_not_stored_fwd" and "rows 20-36 of 37" in found.message and found.checked
    columns = torch.ones((3, 300), dtype=torch.bool)
    columns[:, 128:] = False
    x3, g3, _ = random_inputs((3, 300))
    found = D.diagnose("y", torch.zeros(3, 300), reference(x3, g3)[0], x3, stored=columns)
    assert found.cause == "columns_not_stored" and "[0:3, 128:300]" in found.message
    assert "the elements that were stored are wrong too" in found.message
    one = torch.ones_like(y, dtype=torch.bool)
    one[:, 99] = False
    assert D.diagnose("y", y, Y, X, stored=one).cause == "elements_not_stored_fwd"
    assert D.diagnose("r", torch.zeros(37), R, X, stored=torch.zeros(37, dtype=torch.bool)).cause == "r_not_stored"


def test_dg_over_some_rows_names_the_rows():
    rows = DY.double() * X.double() * R.double()[:, None]
    found = D.diagnose("dg", rows[:30].sum(0).float(), DG, X, alternatives=[C.dg_rows(X, DY, R)])
    assert found.cause == "dg_some_rows" and "rows 0-29 only" in found.message


def test_nan_is_named_by_where_it_came_from():
    y = Y.float().clone()
    y[3] = float("nan")
    assert D.diagnose("y", y, Y, X).cause == "masked_nan"
    dg = DG.float().clone()
    dg[:] = float("nan")
    assert D.diagnose("dg", dg, DG, X).cause == "padding_nan"
    assert D.diagnose("dg", dg, DG, X, fmt={"old_memory": True}).cause == "old_memory_nan"
    found = D.diagnose("y", y, Y, X, nan_cause="masked_nan", if_zero=Y.float())
    assert found.cause == "lanes_undefined" and found.checked
    assert "with those lanes read as 0.0, it is right" in found.message and "undefined" in found.message


@pytest.mark.parametrize("wrong_with_zeros", ["y_without_g", None])
def test_nan_from_masked_lanes_that_are_wrong_even_as_zeros_is_charged_as_the_wrong_output(wrong_with_zeros):
    """Lanes read as 0.0 that still leave the output wrong: the formula it then matches is the mistake (the
    lanes are named after it); a formula no cause explains keeps the NaN's own cause."""
    y = Y.float().clone()
    y[3] = float("nan")
    alts = C.pick(C.forward_alternatives(X, G), 0)
    if_zero = dict(alts)[wrong_with_zeros].float() if wrong_with_zeros else Y.float() * 1.5
    found = D.diagnose("y", y, Y, X, alternatives=alts, nan_cause="masked_nan", if_zero=if_zero)
    assert found.cause == (wrong_with_zeros or "masked_nan"), found
    assert "other=0.0" in found.message


def test_a_row_of_zeros_without_eps_is_named_eps():
    x = X.clone()
    x[4] = 0
    y = reference(x, G)[0].float()
    y[4] = float("nan")                         # 0 · 1/sqrt(0)
    found = D.diagnose("y", y, reference(x, G)[0], x, alternatives=C.pick(C.forward_alternatives(x, G), 0))
    assert found.cause == "eps_forgotten"


def test_rounding_and_formula_are_told_apart():
    y = Y.float().clone()
    y[3, 4] += 3e-5
    assert "looks like rounding" in D.diagnose("y", y, Y, X).message
    found = D.diagnose("y", Y.float() * 1.1, Y, X)
    assert found.cause is None and "check the formula" in found.message and "rounding" not in found.message


def test_a_name_the_diagnosis_shares_with_the_grader_is_loaded_once():
    from autograder import check
    assert check.causes.CAUSES is sys.modules["rmsnorm_causes"].CAUSES or \
        set(check.causes.CAUSES) == set(C.CAUSES)
