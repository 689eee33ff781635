"""The mutation harness (tests/mutation/, `make mutants`) makes the mutants it says and assesses them as it says:
each mutant one changed line of the student's code, and each property computed from a grading as the issue
defines it. The harness's runs, over the public tests and the grader, are a bench command (docs/mutation.md)."""
import ast
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "mutation"))
import mutants  # noqa: E402
import run  # noqa: E402

SOURCE = mutants.SOLUTION.read_text()


@pytest.fixture(scope="module")
def domain():
    return mutants.domain(SOURCE)


def test_the_student_lines_are_the_code_inside_the_todo_blocks():
    lines = mutants.student_lines(SOURCE)
    text = SOURCE.splitlines()
    assert len(lines) > 100
    assert all(text[n - 1].strip() and not text[n - 1].strip().startswith("#") for n in lines)
    kernel = text.index(next(t for t in text if t.startswith("def rmsnorm_fwd_kernel")))
    assert kernel + 1 not in lines                       # a kernel's signature is the starter's, not the student's


@pytest.mark.parametrize("operator", sorted(mutants.DOMAIN))
def test_each_domain_operator_changes_one_student_line_into_code_that_parses(domain, operator):
    made = [m for m in domain if m.operator == f"domain/{operator}"]
    if operator == "needs_input_grad_index" and "needs_input_grad" not in SOURCE:
        assert made == []                                # the solution has no site for it
        return
    assert made, operator
    allowed = mutants.student_lines(SOURCE)
    for m in made:
        ast.parse(m.source)
        diff = [i for i, (a, b) in enumerate(zip(SOURCE.splitlines(), m.source.splitlines())) if a != b]
        assert len(diff) == 1 and diff[0] + 1 == m.line and m.line in allowed, m.name
        assert m.before != m.after


def test_a_generic_operator_of_the_library_makes_mutants_of_student_lines_only():
    pytest.importorskip("cosmic_ray")
    made = mutants.generic(SOURCE, {"comparison": ["ReplaceComparisonOperator_Lt_LtE"]})
    assert len(made) >= 5 and all(m.line in mutants.student_lines(SOURCE) for m in made)
    assert all("<=" in m.after and m.before.count("<") > m.after.count("< ") for m in made)


def verdict(failed=None, notes=None):
    return {"failed": failed or {}, "notes": notes or {}, "causes": {}}


MASK = mutants.Mutant("domain/mask_dropped", 91, "tl.store(p, v, mask=m)", "tl.store(p, v)", "")


@pytest.mark.parametrize("public, got, holds", [
    ("FAILED test_part_a.py::test_forward", verdict({"1": "an out-of-bounds store: mask it"}),
     {"a": True, "c": True, "d": True, "d_public": False, "e": True, "silent": False}),
    ("FAILED test_part_a.py::test_forward AssertionError: an out-of-bounds store of y", verdict({"1": "x"}),
     {"a": True, "d": False, "d_public": True}),
    ("FAILED test_part_a.py::test_forward", verdict(), {"a": False, "silent": False}),        # a silent 90 / 90
    (None, verdict(), {"a": True, "d_public": None, "silent": True}),
    (None, verdict({"1": "check the formula", "4.2": "check the formula (that mistake is charged once, in part 6: x)"}),
     {"c": False, "d": False, "e": False}),
    (None, verdict({"4.4": "y was never written"}, {"5": ["(that mistake is charged once, in part 4.4: N)"]}),
     {"c": True, "d": False, "e": True}),
])
def test_the_properties_are_computed_from_the_public_tests_and_the_grading(public, got, holds):
    judged = run.assess(MASK, public, got)
    assert {k: judged[k] for k in holds} == holds, judged


HOST = "error: ValueError: g must have shape (N,) = ({n},), got (33,) (rmsnorm.py line 306) [{task}]"


@pytest.mark.parametrize("parts, causes, once", [
    (["2"], {"2": ["dot_not_divided"]}, True),
    (["2", "9"], {"2": ["dot_not_divided"], "9": ["dot_not_divided"]}, True),      # item 9 falls with the backward
    (["1", "2"], {"1": ["y_without_g"], "2": ["dot_not_divided"]}, False),
    (["4.1", "4.3", "4.6"], {p: [HOST.format(n=n, task=f"ag_{p}")] for p, n in (("4.1", 64), ("4.3", 200),
                                                                                ("4.6", 48))}, True),
    (["4.1", "4.3"], {"4.1": [HOST.format(n=64, task="a")], "4.3": [HOST.replace("306", "307").format(n=2, task="b")]},
     False),                                                                       # two lines: two errors
    (["4.1", "4.3"], {"4.1": [HOST.format(n=64, task="a")], "4.3": ["error: OutOfBoundsError: out-of-bounds load in k "
                                                                    "line 58"]}, False),   # a kernel's crash: once
])
def test_c_by_the_handouts_rules_allows_item_9_beside_another_part_and_a_host_error_where_it_stops(parts, causes,
                                                                                                   once):
    assert run.charged_once_by_the_rules(parts, causes) is once
    judged = run.assess(MASK, "FAILED x", {"failed": dict.fromkeys(parts, "m"), "notes": {}, "causes": causes})
    assert judged["c_rules"] is once and judged["c"] is (len(parts) == 1)


CRASH = "error: OutOfBoundsError in load_tile line 61"


@pytest.mark.parametrize("parts, causes, checked, once", [
    (["1", "4.2"], {"1": [CRASH], "4.2": [CRASH]}, {"1": 0, "4.2": 0}, True),     # nothing else of 4.2 to check
    (["1", "4.2"], {"1": [CRASH], "4.2": [CRASH]}, {"1": 0, "4.2": 3}, False),    # 4.2 had more: it keeps its points
    (["1", "4.2"], {"1": [CRASH], "4.2": [CRASH]}, None, False),                  # unknown: not by the rules
    (["1", "4.2"], {"1": [CRASH], "4.2": [CRASH.replace("61", "62")]}, {}, False),  # two lines: two crashes
    (["1", "4.2"], {"1": [CRASH], "4.2": [CRASH, "eps_forgotten"]}, {}, False),   # and another mistake
    (["1", "4.2", "4.5"], {p: ["r_not_stored", "rows_not_stored_fwd"] for p in ("1", "4.2", "4.5")},
     {"1": 2, "4.2": 0, "4.5": 0}, True),                                      # no rows stored: nothing to check
    (["1", "4.2"], {p: ["r_not_stored", "rows_not_stored_fwd"] for p in ("1", "4.2")}, {"1": 0, "4.2": 1}, False),
    (["1", "5"], {"1": ["r_not_stored", "rows_not_stored_fwd"], "5": ["rows_not_stored_fwd"]}, {"1": 0, "5": 0},
     True),                                                                    # some of the same symptoms: the same
    (["1", "5"], {"1": ["rows_not_stored_fwd"], "5": ["r_not_stored", "rows_not_stored_fwd"]}, {"1": 0, "5": 0},
     False),                                                                   # one more than the charging part saw
    (["1", "5"], {"1": ["rows_not_stored_fwd"], "5": []}, {"1": 0, "5": 0}, False),   # a cause no formula names
    (["1", "4.5"], {"1": ["masked_nan"], "4.5": ["formula_fwd", "masked_nan"]}, {"1": 0, "4.5": 0}, True),  # y's values
    (["2", "4.5"], {"2": ["masked_nan"], "4.5": ["formula_fwd", "masked_nan"]}, {"2": 0, "4.5": 0}, False),  # not dx's
    (["4.2", "4.6"], {"4.2": ["output_type"], "4.6": ["output_type"]}, {"4.2": 0, "4.6": 0}, True),  # y not returned
    (["4.2", "4.6"], {"4.2": ["eps_forgotten"], "4.6": ["output_type"]}, {"4.2": 0, "4.6": 0}, False),
])
def test_c_by_the_handouts_rules_allows_a_mistake_that_leaves_nothing_to_check_only_where_it_does(parts, causes,
                                                                                                 checked, once):
    assert run.charged_once_by_the_rules(parts, causes, checked) is once
    judged = run.assess(MASK, "FAILED x", {"failed": dict.fromkeys(parts, "m"), "notes": {}, "causes": causes,
                                           "checked": checked})
    assert judged["c_rules"] is once and judged["c"] is (len(parts) == 1)


def test_every_mutant_has_a_name_of_its_own(domain):
    twice = mutants.named(domain + domain)                # each code once, whatever made it
    assert len(twice) == len(domain) and len({m.name for m in twice}) == len(twice)
    assert any(m.nth for m in twice)                     # a line with two sites of one operator (two strides)


def test_the_sample_takes_every_operator_in_turn():
    every = [mutants.Mutant(f"g/{op}", i, "", "", f"{op}{i}") for op in "abc" for i in range(5)]
    chosen = run.sample(every, 6, seed=1)
    assert len(chosen) == 6 and sorted(m.operator for m in chosen) == ["g/a", "g/a", "g/b", "g/b", "g/c", "g/c"]
    assert run.sample(every, None, 0) == every


def test_only_takes_the_mutants_of_the_operators_named_and_refuses_a_name_that_makes_none(domain):
    every = domain
    chosen = run.only(every, ["stride_dim", "eps_dropped"])
    assert chosen and {m.operator for m in chosen} == {"domain/stride_dim", "domain/eps_dropped"}
    assert len(chosen) == sum(m.operator in ("domain/stride_dim", "domain/eps_dropped") for m in every)
    with pytest.raises(SystemExit, match="no_such_operator"):
        run.only(every, ["stride_dim", "no_such_operator"])

