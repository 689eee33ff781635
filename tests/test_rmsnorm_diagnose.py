"""The shared diagnosis (starter/rmsnorm_testkit/diagnose.py, its causes in rmsnorm_testkit/causes.py): it names
each known mistake from the output alone, checks elements never stored before any value, and says rounding
or formula when it knows neither."""
import pytest
import torch
from rmsnorm_testkit import causes, diagnose
from rmsnorm_testkit.compare import random_inputs, reference

from autograder import rubric

X, G, DY = random_inputs((37, 100))
Y, R, DX, DG = reference(X, G, DY)
FORWARD = causes.forward_alternatives(X, G, 0.1)
_, R_EPS, DX_EPS, DG_EPS = reference(X, G, DY, eps=0.1)      # a large eps: leaving it out shows
BACKWARD = causes.backward_alternatives(X, G, DY, R_EPS, 0.1)


def test_every_cause_has_an_owner_in_the_rubric():
    assert set(causes.CAUSES) <= set(rubric.CAUSE_OWNERS), set(causes.CAUSES) - set(rubric.CAUSE_OWNERS)


@pytest.mark.parametrize("key", sorted(FORWARD))
def test_a_forward_computed_a_known_wrong_way_is_named(key):
    y, r = FORWARD[key]
    _, ref_r = causes.forward_alternatives_plain(X, G, 0.1)
    ref_y = reference(X, G, eps=0.1)[0]
    found = [diagnose.diagnose(n, got.float(), want, X, alternatives=causes.pick(FORWARD, i), fmt={"eps": 0.1})
             for n, got, want, i in (("r", r, ref_r, 1), ("y", y, ref_y, 0))]
    found = [f for f in found if f is not None]
    assert found and {f.cause for f in found} == {key.partition("@")[0]}, [(f.cause, f.message[:100]) for f in found]
    assert all(f.checked for f in found)


@pytest.mark.parametrize("key", sorted(BACKWARD))
def test_a_backward_computed_a_known_wrong_way_is_named(key):
    dx, dg = BACKWARD[key]
    found = [diagnose.diagnose(n, got.float(), want, X,
                               alternatives=causes.pick(BACKWARD, i) + [causes.dg_rows(X, DY, R_EPS)], fmt={"eps": 0.1})
             for n, got, want, i in (("dx", dx, DX_EPS, 0), ("dg", dg, DG_EPS, 1))]
    found = [f for f in found if f is not None]
    assert found and {f.cause for f in found} == {key.partition("@")[0]}, [(f.cause, f.message[:100]) for f in found]


def test_the_right_output_has_no_finding():
    assert diagnose.diagnose("y", Y.float(), Y, X, alternatives=causes.pick(FORWARD, 0)) is None


def test_elements_never_stored_come_before_values_and_are_classified():
    y = Y.float().clone()
    rows = torch.ones_like(y, dtype=torch.bool)
    rows[20:] = False
    found = diagnose.diagnose("y", y.masked_fill(~rows, float("nan")), Y, X, stored=rows)
    assert found.cause == "rows_not_stored_fwd" and "rows 20-36 of 37" in found.message and found.checked
    columns = torch.ones((3, 300), dtype=torch.bool)
    columns[:, 128:] = False
    x3, g3, _ = random_inputs((3, 300))
    found = diagnose.diagnose("y", torch.zeros(3, 300), reference(x3, g3)[0], x3, stored=columns)
    assert found.cause == "columns_not_stored" and "[0:3, 128:300]" in found.message
    assert "the elements that were stored are wrong too" in found.message
    one = torch.ones_like(y, dtype=torch.bool)
    one[:, 99] = False
    assert diagnose.diagnose("y", y, Y, X, stored=one).cause == "elements_not_stored_fwd"
    found = diagnose.diagnose("r", torch.zeros(37), R, X, stored=torch.zeros(37, dtype=torch.bool))
    assert found.cause == "r_not_stored"


def test_dg_over_some_rows_names_the_rows():
    rows = DY.double() * X.double() * R.double()[:, None]
    found = diagnose.diagnose("dg", rows[:30].sum(0).float(), DG, X, alternatives=[causes.dg_rows(X, DY, R)])
    assert found.cause == "dg_some_rows" and "rows 0-29 only" in found.message


def test_nan_is_named_by_where_it_came_from():
    y = Y.float().clone()
    y[3] = float("nan")
    assert diagnose.diagnose("y", y, Y, X).cause == "masked_nan"
    dg = DG.float().clone()
    dg[:] = float("nan")
    assert diagnose.diagnose("dg", dg, DG, X).cause == "padding_nan"
    assert diagnose.diagnose("dg", dg, DG, X, fmt={"old_memory": True}).cause == "old_memory_nan"
    found = diagnose.diagnose("y", y, Y, X, nan_cause="masked_nan", if_zero=Y.float())
    assert found.cause == "lanes_undefined" and found.checked
    assert "with those lanes read as 0.0, it is right" in found.message and "undefined" in found.message


@pytest.mark.parametrize("wrong_with_zeros", ["y_without_g", None])
def test_nan_from_masked_lanes_that_are_wrong_even_as_zeros_is_charged_as_the_wrong_output(wrong_with_zeros):
    """Lanes read as 0.0 that still leave the output wrong: the formula it then matches is the mistake (the
    lanes are named after it); a formula no cause explains is charged where it is found, as the same values
    without NaN would be (the NaN's own cause, item 1's, once excused every part of item 4 for any wrong values)."""
    y = Y.float().clone()
    y[3] = float("nan")
    alts = causes.pick(causes.forward_alternatives(X, G), 0)
    if_zero = dict(alts)[wrong_with_zeros].float() if wrong_with_zeros else Y.float() * 1.5
    found = diagnose.diagnose("y", y, Y, X, alternatives=alts, nan_cause="masked_nan", if_zero=if_zero)
    assert found.cause == wrong_with_zeros, found
    assert "other=0.0" in found.message


def test_a_row_of_zeros_without_eps_is_named_eps():
    x = X.clone()
    x[4] = 0
    y = reference(x, G)[0].float()
    y[4] = float("nan")                         # 0 · 1/sqrt(0)
    found = diagnose.diagnose("y", y, reference(x, G)[0], x,
                              alternatives=causes.pick(causes.forward_alternatives(x, G), 0))
    assert found.cause == "eps_forgotten"


def test_rounding_and_formula_are_told_apart():
    y = Y.float().clone()
    y[3, 4] += 3e-5
    assert "looks like rounding" in diagnose.diagnose("y", y, Y, X).message
    found = diagnose.diagnose("y", Y.float() * 1.1, Y, X)
    assert found.cause is None and "check the formula" in found.message and "rounding" not in found.message


@pytest.mark.parametrize("name, want, phase", [("y", Y, "fwd"), ("dx", DX, "bwd"), ("dg", DG, "bwd")])
def test_fp32_outputs_rounded_to_16_bits_are_named_a_16_bit_dtype(name, want, phase):
    """fp32 inputs whose output went through fp16 on the way: off in many elements, each by about one rounding to
    11 bits. Named as a 16-bit dtype, charged in the phase's own item; not for 16-bit inputs, whose tolerance is
    16 bits', and not for a formula's mistake of 1%, or a few elements off."""
    found = diagnose.diagnose(name, want.half().float(), want, X)
    assert found.cause == f"held_in_16_bits_{phase}" and found.checked, found.message   # every element bounded
    assert "a 16-bit dtype such as fp16" in found.message and "check the formula" not in found.message
    assert diagnose.diagnose(name, want.float() * 1.01, want, X).cause is None
    few = want.float().clone()
    few.view(-1)[:3] = want.view(-1)[:3].half().float() + 1e-3
    assert diagnose.diagnose(name, few, want, X).cause is None
    x16 = X.to(torch.bfloat16)
    bf16 = diagnose.diagnose(name, (want * 1.05).to(torch.bfloat16), want, x16)
    assert bf16 is not None and bf16.cause is None, bf16.message


@pytest.mark.parametrize("k", [1, 3])
def test_rows_stored_a_column_stride_apart_are_named_by_the_stride(k):
    """y stored with its column stride (1) passed as its row stride: the elements stored are the first (M−1)·k + N
    in memory, and the finding says which stride to pass; other patterns of missing elements say nothing of it."""
    stored = torch.zeros(37 * 100, dtype=torch.bool)
    stored[:36 * k + 100] = True
    found = diagnose.diagnose("y", Y.float(), Y, X, stored=stored.reshape(37, 100))
    assert f"step {k} element" in found.message and "y.stride(0), not its column stride" in found.message
    assert found.cause == "elements_not_stored_fwd", found.cause
    rows = torch.ones(37, 100, dtype=torch.bool)
    rows[20:] = False
    assert "stride" not in diagnose.diagnose("y", Y.float(), Y, X, stored=rows).message


def test_the_diagnosis_the_grader_uses_is_the_one_the_tests_import():
    from autograder.judge import outputs
    from autograder.judge.charge import Finding
    assert outputs.causes is causes and outputs.diagnose is diagnose and Finding is diagnose.Finding


# -- causes from the traffic: what the kernels read, before any formula ------------------------------------
M_, N_ = 6, 64


def _args(**loads):
    """(kernel, parameter, roles, elements loaded) for a backward kernel with the solution's parameter names."""
    return [("bwd", f"{role}_ptr", [role], n) for role, n in loads.items()]


@pytest.mark.parametrize("name, role", [("x_ptr", "x"), ("dY_ptr", "dy"), ("input_pointer", "x"),
                                        ("output_grad_pointer", "dy"), ("DX", "dx"), ("Y", "y"), ("W", None),
                                        ("n_cols", None), ("rstd_ptr", None)])
def test_a_parameters_name_gives_the_role_it_takes(name, role):
    assert diagnose.param_role(name) == role


@pytest.mark.parametrize("args, says", [
    (_args(x=2 * M_ * N_, dy=0, g=M_ * N_), "never load dy and load x 2.0 times per element"),
    (_args(x=0, dy=2 * M_ * N_, g=M_ * N_), "never load x and load dy 2.0 times per element"),
    (_args(x=M_ * N_, dy=0), "your backward's kernels never load dy"),
    ([("bwd", "x_ptr", ["dy"], M_ * N_), ("bwd", "dy_ptr", ["x"], M_ * N_)],
     "your backward passes dy as bwd's x_ptr, and x as dy_ptr"),
])
def test_the_traffic_names_a_tensor_read_for_another(args, says):
    key, message, _ = diagnose.traffic_cause("bwd", args, M_, N_)
    assert key == "wrong_tensor_bwd" and says in message, message


@pytest.mark.parametrize("args", [
    _args(x=M_ * N_, dy=M_ * N_, g=M_ * N_, r=M_),
    [("bwd", "X", ["x"], M_ * N_), ("bwd", "DY", ["dy"], M_ * N_), ("bwd", "DX", ["dx", "dy"], 0)],   # dx into dy
    [("bwd", "x_ptr", ["x"], M_ * N_), ("bwd", "dy_ptr", ["dy"], M_ * N_), ("bwd", "dw", [], 0)],        # scratch
    [("bwd", "X", ["copy"], M_ * N_), ("bwd", "DY", ["dy"], M_ * N_)],   # x.contiguous() on the host: a copy of x
])
def test_traffic_that_matches_the_references_names_nothing(args):
    assert diagnose.traffic_cause("bwd", args, M_, N_) is None


def test_check_the_formula_is_said_only_when_the_traffic_matches_the_references():
    """The same wrong dx: with a tensor read for another, that is named and the formula is not mentioned; with
    the reference's traffic, the formula is. When the gradients of the tensors read instead explain it, the
    finding says so (checked: the named mistake, exactly)."""
    x, g, dy = random_inputs((M_, N_))
    _, r, dx, _ = reference(x, g, dy)
    wrong = causes.backward_plain(x, g, x, r.float())[0]             # dy read from x's memory
    read = diagnose.traffic_cause("bwd", _args(x=2 * M_ * N_, dy=0, g=M_ * N_), M_, N_)
    instead = diagnose.read_instead(read, x, g, dy, r.float())
    named = diagnose.diagnose("dx", wrong, dx, x, alternatives=[(k, v[0], w) for k, v, w in instead], traffic=read[:2])
    assert named.cause == "wrong_tensor_bwd" and named.checked and "check the formula" not in named.message
    plain = diagnose.diagnose("dx", wrong, dx, x)
    assert plain.cause is None and "check the formula" in plain.message
    moved = diagnose.diagnose("dx", wrong * 1.5, dx, x, traffic=read[:2])     # read for another, and more wrong besides
    assert moved.cause == "wrong_tensor_bwd" and not moved.checked and "check the formula" not in moved.message


@pytest.mark.parametrize("phase, loads, role, says, step", [
    # a column stride of 1 passed as the row stride: every row read whole, the rows one element apart
    ("fwd", {"x": (M_ * N_, M_ - 1 + N_), "g": (M_ * N_, N_)}, "x", "1 element apart (x.stride(1) passed", 1),
    ("bwd", {"x": (M_ * N_, M_ * N_), "dy": (M_ * N_, N_), "g": (M_ * N_, N_)}, "dy", "0 elements apart", 0),
    # a loop that stops before the row's end: part of each row never read
    ("fwd", {"x": (M_ * (N_ - 16), M_ * (N_ - 16)), "g": (M_ * N_, N_ - 16)}, "x", "stop before the end", None),
])
def test_the_traffic_names_elements_of_a_needed_tensor_never_loaded(phase, loads, role, says, step):
    args = [(phase, f"{r}_ptr", [r], n, d) for r, (n, d) in loads.items()]
    key, message, instead = diagnose.traffic_cause(phase, args, M_, N_)
    assert key == f"unread_{phase}" and f"elements of {role}" in message and says in message, message
    assert instead == ({role: ("rows", step)} if step is not None else {})


def test_a_forward_that_reads_rows_one_element_apart_is_named_and_checked():
    """The outputs computed from the memory the kernels read (rows 1 apart) explain the wrong y exactly: the
    finding is the named cause, checked."""
    x, g = random_inputs((M_, N_))[:2]
    y, r = reference(x, g)[:2]
    overlapping = x.as_strided((M_, N_), (1, 1))
    wrong_y = causes.forward_alternatives_plain(overlapping, g, 1e-5)[0]
    read = diagnose.traffic_cause("fwd", [("fwd", "x_ptr", ["x"], M_ * N_, M_ - 1 + N_)], M_, N_)
    alts = [(k, v[0], w) for k, v, w in diagnose.read_instead_fwd(read, x, g)]
    named = diagnose.diagnose("y", wrong_y, y, x, alternatives=alts, traffic=read[:2])
    assert named.cause == "unread_fwd" and named.checked, named


def test_a_backward_that_reads_r_through_g_is_named():
    x, g, dy = random_inputs((M_, N_))
    _, r, dx, _ = reference(x, g, dy)
    wrong = causes.backward_plain(x, g, dy, g[:M_].float())[0]
    alts = [(k, v[0]) for k, v in causes.backward_alternatives(x, g, dy, r.float()).items()]
    found = diagnose.diagnose("dx", wrong, dx, x, alternatives=alts)
    assert found.cause == "r_read_from_g" and "g's pointer where r's is meant" in found.message, found


def test_alternatives_are_made_when_first_read_and_once():
    """A grader checks many outputs and most are right: diagnose reads the alternatives only of a wrong one."""
    made = []
    later = causes.Later(lambda: made.append(1) or [("eps_forgotten", torch.zeros(3))])
    assert diagnose.diagnose("r", R.float(), R, X, alternatives=later) is None and made == []
    assert [k for k, _ in later] == [k for k, _ in later] == ["eps_forgotten"] and made == [1]
    pair = causes.Made(lambda: made.append(2) or torch.ones(2), torch.zeros(1))
    assert pair[1] is pair.r and made == [1]                        # r alone: y not made
    y, r = pair
    assert torch.equal(y, torch.ones(2)) and torch.equal(pair[0], y) and made == [1, 2]


def test_the_forward_alternatives_y_is_the_formulas_when_made_late():
    x, g = random_inputs((6, 300))[:2]
    r0 = torch.rsqrt(x.double().pow(2).mean(-1))
    y, r = causes.forward_alternatives(x, g)["eps_forgotten"]
    assert torch.equal(r, r0) and torch.allclose(y, x.double() * r0[:, None] * g.double(), rtol=0, atol=1e-12)
    kept = x.double()[:, :256].pow(2).sum(-1) / 300                 # a loop that stops at 256 of 300 columns
    _, r_early = causes.forward_alternatives(x, g)["sum_stops_early@44"]
    assert torch.allclose(r_early, torch.rsqrt(kept + 1e-5), rtol=1e-12, atol=0)


def test_an_r_as_right_as_fp32_holds_it_is_near_no_wrong_formula():
    """closest_cause names a formula only for an r whose error, within its tolerance, is ten times nearer that
    formula; an r rounded once to fp32 is as right as it can be stored, whatever formula lies within a rounding."""
    near = [("eps_outside_sqrt", R * (1 + 2.0 ** -30))]
    assert diagnose.closest_cause(R.float(), R, near) is None
    off = R * (1 + 1e-5)                                             # within r's tolerance, but not a rounding
    assert diagnose.closest_cause(off.float(), R, [("eps_outside_sqrt", off)]) == "eps_outside_sqrt"
