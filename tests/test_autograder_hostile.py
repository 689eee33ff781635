"""The hostile corpus (tests/hostile.py): a submission that tries a trick earns at most what its honest
control earns, and the defence that stops it is the one its entry names.

The static scan's refusals need no grading: a refused file earns nothing (hidden/conftest.py), so the
test checks the refusal and that the control passes the scan. The others are graded with the controls
(tests/grade_in_process.py: the job's code and the judge, without the sandbox, which the corpus tests
cover) and the points compared.
"""
import sys
from pathlib import Path

import pytest
from rmsnorm_testkit import scan

from autograder import rubric

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostile  # noqa: E402
from grade_in_process import Pool  # noqa: E402

CPU_PARTS = {n: p.points for n, p in rubric.PARTS.items() if not rubric.item_of(n).gpu_only}
BY = {how: [k for k, entry in hostile.HOSTILE.items() if entry[2] == how]
      for how in ("scan", "language", "provenance", "judge")}


def points(verdict) -> float:
    """The points of a grading (extra credit included), from the parts it failed."""
    return sum(p for n, p in CPU_PARTS.items() if n not in verdict["failed"])


class Graded:
    """{name: verdicts} of the entries and controls, each grading started at once (two at a time, in the tests'
    order) and waited for by the test that reads it: a slow one fails its own test, not the whole module."""

    def __init__(self, pool):
        self.pool = pool

    def __getitem__(self, name):
        return self.pool.verdict(name)


@pytest.fixture(scope="module")
def graded(request, tmp_path_factory):
    """The entries the selected tests read (`-k NAME` grades that one and its control alone)."""
    selected = {item.callspec.params["name"] for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec") and "name" in item.callspec.params}
    d = tmp_path_factory.mktemp("hostile")
    pool = Pool(each_s=600)
    try:
        for entry in [e for e in BY["language"] + BY["provenance"] + BY["judge"] if e in selected]:
            control, _, _, source = hostile.HOSTILE[entry]
            for name, text in ((f"control {control}", hostile.CONTROLS[control]), (entry, source)):
                path = d / name.replace(" ", "_") / "rmsnorm.py"
                if not path.exists():
                    path.parent.mkdir()
                    path.write_text(text)
                pool.start(name, path)
        yield Graded(pool)
    finally:
        pool.close()


def test_the_corpus_has_twenty_tricks_on_honest_controls():
    assert len(hostile.HOSTILE) >= 20
    assert all(control in hostile.CONTROLS for control, *_ in hostile.HOSTILE.values())
    for name, source in hostile.CONTROLS.items():
        assert scan.scan(source) == ([], []), name


@pytest.mark.parametrize("name", BY["scan"])
def test_a_trick_the_scan_refuses_earns_nothing(name):
    _, _, _, source = hostile.HOSTILE[name]
    missing, problems = scan.scan_rules(source)
    assert not missing and problems, name
    assert {rule for rule, _ in problems} <= {"interpreter", "patches", "simulator"}, problems


@pytest.mark.parametrize("name", BY["language"] + BY["provenance"] + BY["judge"])
def test_a_trick_earns_at_most_its_honest_control(graded, name):
    control, what, how, source = hostile.HOSTILE[name]
    assert scan.scan(source) == ([], []), "the scan is not what stops this one"
    got, honest = graded[name], graded[f"control {control}"]
    kept = [n for n in CPU_PARTS if n not in got["failed"] and n in honest["failed"]]
    assert points(got) <= points(honest), f"{what}: kept where the control lost:\n" + "\n".join(
        f"  {n} ({CPU_PARTS[n]} points): the trick's notes {got['notes'].get(n, [])}, causes {got['causes'].get(n)}; "
        f"the control's failure: {honest['failed'][n]}" for n in kept)
    if how == "language":           # refused as Triton's compiler refuses it, in the forward and the backward
        assert "1" in got["failed"] and "2" in got["failed"], got["failed"]
        assert "kernel" in got["failed"]["1"], got["failed"]["1"]
    if how == "provenance":         # the message says where the values came from
        assert any("from memory the host wrote" in m or "values the host computed" in m
                   for m in got["failed"].values()), got["failed"]


@pytest.mark.parametrize("name", [k for k, entry in hostile.HOSTILE.items() if entry[0] == "host_dots"][:1])
def test_the_hosts_row_dots_are_charged_once_in_item_7(graded, name):
    """The backward's row dots computed by torch on the host at every shape, N = 1 included, where one dot per row
    is as many values as dx: one mistake, charged in item 7 alone (item 9 is the control's lecture buffer)."""
    honest = graded[f"control {hostile.HOSTILE[name][0]}"]
    assert set(honest["failed"]) == {"7", "9"}, honest["failed"]
    assert "a kernel loaded its result" in honest["failed"]["7"], honest["failed"]["7"]


@pytest.mark.parametrize("name", ["refused_features_answered_quantized", "refused_features_answered_bit_packed"])
def test_an_output_of_a_dtype_the_grader_cannot_read_is_named_by_its_dtype(graded, name):
    """y returned as a quantized or bit-packed tensor is an output not returned, and the feedback says what came back
    (the autograd step then fails on it, as a GPU's would)."""
    dtype = {"refused_features_answered_quantized": "qint8", "refused_features_answered_bit_packed": "bits8"}[name]
    failed = graded[name]["failed"]
    assert f"(got a tensor of dtype {dtype}, which the grader cannot read)" in failed.get("4.2", ""), failed


def test_what_ctx_keeps_is_judged_by_the_judges_own_sight_not_by_the_submissions_report(tmp_path):
    """r kept as an attribute of ctx is charged in 4.6 from the offloaded step (the judge overwrites what the forward's
    kernels stored, and the backward reads it), also when the submission's side reports nothing kept on ctx, as a
    file that switched off the seal of the grader's code there could make it report."""
    from grade_in_process import verdicts_with_ctx_unseen
    path = tmp_path / "rmsnorm.py"
    path.write_text(hostile.CONTROLS["r_as_ctx_attribute"])
    got = verdicts_with_ctx_unseen(path)
    assert got["causes"].get("4.6") == ["ctx_tensors"], got["failed"]
    assert "saved-tensor hooks" in got["failed"]["4.6"] and "kept ctx.r" not in got["failed"]["4.6"], got["failed"]


@pytest.mark.parametrize("name", sorted(hostile.NARROW))
def test_a_file_fused_improved_or_race_free_only_where_the_core_shapes_lie_earns_nothing(tmp_path, name):
    """Fused only in fp32 or for rows up to 1024, an improved reduction only up to 512 rows, race-free only up to
    512 rows: graded with the draw that shows it (a 16-bit or a long-rowed drawn shape, a tall one of 1000 rows),
    each earns at most its control, which does the same everywhere."""
    from grade_in_process import verdicts
    control, what, source, (drawn, tall) = hostile.NARROW[name]
    assert scan.scan(source) == ([], []), name
    paths = {"trick": tmp_path / "trick" / "rmsnorm.py", "control": tmp_path / "control" / "rmsnorm.py"}
    for key, text in (("trick", source), ("control", hostile.CONTROLS[control])):
        paths[key].parent.mkdir()
        paths[key].write_text(text)
    got = verdicts(paths, drawn=drawn, tall=tall)
    assert points(got["trick"]) <= points(got["control"]), (what, got["trick"]["failed"], got["control"]["failed"])
    assert got["trick"]["failed"], what                       # the drawn shapes show it
