"""Where the judge charges a finding (autograder/judge/charge.py): the part that owns its cause, once, and the other
parts that see it keep their points and say where it was charged."""
import pytest

from autograder import rubric
from autograder.judge.charge import Finding, Ledger, charge


def ledgers(**found) -> dict:
    """{part: Ledger} of every part: ``found`` {part (with "_" for "."): [cause, ...]} findings of y (of dx for
    formula_bwd), one output checked right beside them in each part."""
    out = {}
    for part in rubric.PARTS:
        L = Ledger()
        L.right()
        for cause in found.get(part.replace(".", "_"), []):
            name = rubric.OWNER_ONLY.get(cause, ("y",))[0]
            L.add(Finding(name, f"{name} differs ({cause} in {part})", cause))
        out[part] = L
    return out


def failed(verdicts) -> list:
    return [p for p, v in verdicts.items() if v.failure]


@pytest.mark.parametrize("cause, owner", [("formula_fwd", "1"), ("formula_bwd", "2")])
def test_a_value_no_known_formula_explains_is_charged_once_where_its_owner_finds_it(cause, owner):
    verdicts = charge(ledgers(**{owner: [cause], "4_2": [cause], "4_5": [cause]}))
    assert failed(verdicts) == [owner]
    assert all(f"charged once, in part {owner}" in n for p in ("4.2", "4.5") for n in verdicts[p].notes)


@pytest.mark.parametrize("cause, owner, named", [("formula_fwd", "1", "held_in_16_bits_fwd"),
                                                 ("formula_bwd", "2", "second_term_sign")])
def test_a_value_no_known_formula_explains_is_excused_where_its_owner_finds_the_output_wrong_for_another_cause(
        cause, owner, named):
    """A 15-bit r: many of its elements off in item 1's case ("held in 16 bits"), a few of y's in 4.6's, where it
    matches no formula. One mistake, charged in item 1."""
    out = rubric.OWNER_ONLY[cause][0]
    found = ledgers()
    found[owner].add(Finding(out, f"{out} differs ({named})", named))
    for part in ("4.2", "4.6"):
        found[part].add(Finding(out, f"{out} differs (no known formula)", cause))
    verdicts = charge(found)
    assert failed(verdicts) == [owner]
    assert all(f"charged once, in part {owner}" in n for p in ("4.2", "4.6") for n in verdicts[p].notes)


@pytest.mark.parametrize("cause", sorted(rubric.OWNER_ONLY))
def test_a_value_no_known_formula_explains_is_not_excused_by_a_cause_the_owner_does_not_own(cause):
    """Item 1 sees eps left out, which 4.5 owns and charges: item 1 charges nothing, so it cannot stand for the
    4.x parts' unknown formula."""
    owner = rubric.CAUSE_OWNERS[cause]
    out = rubric.OWNER_ONLY[cause][0]
    found = ledgers(**{"4_5": ["eps_forgotten"]})
    found[owner].add(Finding(out, f"{out} differs (eps)", "eps_forgotten"))
    found["4.2"].add(Finding(out, f"{out} differs (no known formula)", cause))
    assert failed(charge(found)) == ["4.2", "4.5"]


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


def test_a_sum_of_squares_in_16_bits_is_item_1s_where_item_1_finds_fp32_inputs_held_in_16_bits():
    """One .to(tl.float16) of x: fp32 inputs held in 16 bits in item 1's cases, 16-bit inputs summed in 16 bits in
    4.1's. Where item 1 finds nothing, 4.1 charges its own."""
    both = charge(ledgers(**{"1": ["held_in_16_bits_fwd"], "4_1": ["sum_in_16_bits"]}))
    assert failed(both) == ["1"] and "charged once, in part 1" in both["4.1"].notes[0]
    assert failed(charge(ledgers(**{"4_1": ["sum_in_16_bits"]}))) == ["4.1"]
    assert failed(charge(ledgers(**{"1": ["y_without_g"], "4_1": ["sum_in_16_bits"]}))) == ["1", "4.1"]


@pytest.mark.parametrize("owner, there, elsewhere", [("2", "formula_bwd", "held_in_16_bits_bwd"),
                                                      ("1", "r_is_rms", "y_without_g")])
def test_a_cause_of_a_formulas_item_is_charged_there_where_that_item_finds_its_outputs_wrong(owner, there, elsewhere):
    """dx with the ½ of the derivative dropped: item 2 finds no known formula; 4.5's zero rows make the error small,
    so there it reads as a 16-bit rounding. One mistake, item 2's."""
    verdicts = charge(ledgers(**{owner: [there], "4_5": [elsewhere]}))
    assert failed(verdicts) == [owner]
    assert f"charged once, in part {owner}" in verdicts["4.5"].notes[0]


def test_dg_over_some_rows_is_the_rows_the_backward_never_stored_where_item_2_finds_them():
    """A step where only g requires grad returns no dx: the rows the grid missed show as dg over some rows."""
    verdicts = charge(ledgers(**{"2": ["rows_not_stored_bwd"], "4_6": ["dg_some_rows"]}))
    assert failed(verdicts) == ["2"]
    assert failed(charge(ledgers(**{"3": ["dg_some_rows"]}))) == ["3"]


def test_a_charge_rule_added_as_the_readme_shows_moves_the_charge(monkeypatch):
    """The README's recipe "where a mistake seen in several parts is charged": a rule beside CAUSE_OWNERS, here a
    SHOWN_AS pair, is what charge() follows, with nothing else to change."""
    found = {"4_3": ["x_rows_by_n"], "4_6": ["dy_modified"]}
    assert failed(charge(ledgers(**found))) == ["4.3", "4.6"]
    monkeypatch.setitem(rubric.SHOWN_AS, "x_rows_by_n", "dy_modified")
    verdicts = charge(ledgers(**found))
    assert failed(verdicts) == ["4.6"] and "charged once, in part 4.6" in verdicts["4.3"].notes[0]
