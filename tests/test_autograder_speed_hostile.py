"""Item 10 against the tricks of tests/speed_hostile.py: none earns more than the slow honest control.

On the CPU: the scan refuses exactly the entries it is named for, and a lazy output (a tensor subclass)
is refused by the simulator's grading as it is by the GPU job. On a GPU: every entry is graded (item 10
only, as calibrate.py grades it) and scores at most the control's item-10 points, while the reference
solution scores all 10; the table goes to docs/perf.md.
"""
import json
import os
import sys
from pathlib import Path

import pytest
import torch
from rmsnorm_testkit import scan

from autograder import config, rubric

sys.path.insert(0, str(Path(__file__).resolve().parent))
import speed_hostile  # noqa: E402
import speed_hostile_more  # noqa: E402
from conftest import ROOT  # noqa: E402
from grade_in_process import verdicts  # noqa: E402

TRICKS = {**speed_hostile.HOSTILE, **speed_hostile_more.MORE}   # on the timing, and in its process
SPEED_PARTS = {n: p.points for n, p in rubric.PARTS.items() if n.startswith("10.")}


def test_the_corpus_has_a_dozen_tricks_on_one_honest_control():
    assert len(speed_hostile.HOSTILE) >= 12
    assert scan.scan(speed_hostile.CONTROL) == ([], [])
    assert speed_hostile.CONTROL.count("for _ in range(REPEAT):") == 2


@pytest.mark.parametrize("name", sorted(TRICKS))
def test_the_scan_refuses_exactly_the_tricks_it_is_named_for(name):
    _, how, source = TRICKS[name]
    missing, problems = scan.scan_rules(source)
    assert not missing
    if how == "scan":
        assert problems and {rule for rule, _ in problems} <= {"imports", "patches"}, problems
    else:
        assert problems == [], problems


def test_a_lazy_output_is_refused_on_the_simulator_too(tmp_path):
    """The lazy y at every shape: the simulator's job refuses the subclass as the GPU job does, and says so."""
    path = tmp_path / "lazy" / "rmsnorm.py"
    path.parent.mkdir()
    path.write_text(speed_hostile.LAZY.replace(speed_hostile.TIMING_SHAPE, "True", 1))
    got = verdicts({"lazy": path})["lazy"]
    assert "1" in got["failed"], got["failed"]
    assert "LazyY, a subclass of torch.Tensor: return a plain torch.Tensor" in got["failed"]["1"], got["failed"]["1"]


# -- on a GPU ---------------------------------------------------------------------------------------------

def _item_10(path: Path, results: Path) -> tuple[float, dict]:
    """(item 10's points, {part: message}) of one grading of item 10 alone."""
    from autograder import grade
    env = dict(os.environ, **{config.GPU_TASKS_VAR: "speed"})
    res = grade.grade(path, results, env=env, select="gpu_speed")
    parts = {t["number"]: t for t in res["tests"] if t["number"] in SPEED_PARTS}
    assert set(parts) == set(SPEED_PARTS), res
    return sum(t["score"] for t in parts.values()), {n: t.get("output", "") for n, t in parts.items()}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="item 10 is graded on a GPU")
def test_on_a_gpu_no_trick_earns_more_of_item_10_than_the_slow_control(tmp_path):
    entries = {"solution": ("the reference solution", "-", (ROOT / "solution" / "rmsnorm.py").read_text()),
               "control": ("the slow honest control", "-", speed_hostile.CONTROL), **TRICKS}
    only = os.environ.get("SPEED_HOSTILE_ONLY")       # names, comma-separated: a share of the corpus, on a short lease
    if only:
        entries = {k: v for k, v in entries.items() if k in only.split(",") or k == "control"}
    table, report = {}, os.environ.get("SPEED_HOSTILE_REPORT")
    for name, (what, how, source) in entries.items():
        path = tmp_path / name / "rmsnorm.py"
        path.parent.mkdir()
        path.write_text(source)
        table[name] = (how, *_item_10(path, tmp_path / f"{name}.json"))
        if report:                                   # written as it goes: a table to record in docs/perf.md
            Path(report).write_text(_table(table) + "\n\n" + json.dumps(table, indent=1))
    print(_table(table))
    assert "solution" not in table or table["solution"][1] == 10, table["solution"]
    for name in set(TRICKS) & set(table):
        assert table[name][1] <= table["control"][1], (name, table[name])


def _table(table) -> str:
    lines = ["| submission | stopped by | item 10 | first message |", "| --- | --- | --- | --- |"]
    for name, (how, score, said) in table.items():
        first = next((m for m in said.values() if m), "")
        lines.append(f"| {name} | {how} | {score:g} / 10 | {first[:160].replace('|', '/')} |")
    return "\n".join(lines)
