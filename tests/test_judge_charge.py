"""Where the judge charges a finding (autograder/judge/charge.py): the part that owns its cause, once, and the other
parts that see it keep their points and say where it was charged."""
import pytest

from autograder import rubric
from autograder.judge.charge import Finding, Ledger, charge


def ledgers(**found) -> dict:
    """{part: Ledger} of every part: ``found`` {part (with "_" for "."): [cause, ...]} findings of y, one output
    checked right beside them in each part."""
    out = {}
    for part in rubric.PARTS:
        L = Ledger()
        L.right()
        for cause in found.get(part.replace(".", "_"), []):
            L.add(Finding("y", f"y differs ({cause} in {part})", cause))
        out[part] = L
    return out


def failed(verdicts) -> list:
    return [p for p, v in verdicts.items() if v.failure]


@pytest.mark.parametrize("cause, owner", [("formula_fwd", "1"), ("formula_bwd", "2")])
def test_a_value_no_known_formula_explains_is_charged_once_where_its_owner_finds_it(cause, owner):
    verdicts = charge(ledgers(**{owner: [cause], "4_2": [cause], "4_5": [cause]}))
    assert failed(verdicts) == [owner]
    assert all(f"charged once, in part {owner}" in n for p in ("4.2", "4.5") for n in verdicts[p].notes)


@pytest.mark.parametrize("cause", sorted(rubric.OWNER_ONLY))
def test_a_value_no_known_formula_explains_costs_each_part_that_finds_it_when_its_owner_does_not(cause):
    """Two parts' own mistakes can look alike (a 3-D input's rows and a strided view's columns both read wrong):
    neither excuses the other."""
    verdicts = charge(ledgers(**{"4_2": [cause], "4_3": [cause]}))
    assert failed(verdicts) == ["4.2", "4.3"]


def test_a_named_cause_found_only_outside_its_owner_is_charged_once_in_the_first_part_that_finds_it():
    verdicts = charge(ledgers(**{"4_2": ["y_without_g"], "4_3": ["y_without_g"]}))
    assert failed(verdicts) == ["4.2"]
    assert "charged once, in part 4.2" in verdicts["4.3"].notes[0]


def test_owner_only_causes_are_owned_by_the_formulas_items_and_can_excuse_no_more_than_they_cost():
    """A file cannot trade points by making its formula wrong on purpose: the parts such a cause may excuse (4.1-4.6)
    are worth less than the item that owns it."""
    excusable = sum(rubric.PARTS[p].points for p in ("4.1", "4.2", "4.3", "4.4", "4.5", "4.6"))
    for cause in rubric.OWNER_ONLY:
        assert rubric.PARTS[rubric.CAUSE_OWNERS[cause]].points > excusable
