"""`make grade-all`: a Gradescope export regraded into one CSV row per student, resumable."""
import csv
import json
import os
import re
import shutil

import pytest

from autograder import grade_all
from autograder.regrade import run, shards
from autograder.regrade.export import export_folder, read_metadata, submissions
from conftest import ROOT

pytestmark = pytest.mark.usefixtures("sandbox_accounts")      # grades through the sandbox (conftest.py)

# As Gradescope writes it: besides :submitters:, each submission carries its :results:,
# whose tests have name:, score:, output: keys (the old regex reader took them for students).
METADATA = """\
---
submission_1001:
  :submitters:
  - :name: Ada Lovelace
    :sid: '001'
    :email: ada@example.edu
  :created_at: 2026-11-20 10:00:00.000000000 -08:00
  :score: 90.0
  :results:
    score: 90.0
    execution_time: 41.2
    output: ''
    tests:
    - name: static checks
      number: '0'
      score: 0.0
      max_score: 0.0
      output: ''
    - name: Forward correctness
      number: '1'
      score: 15.0
      max_score: 15.0
      output: |-
        name: y matches
        sid: not a student
submission_1002:
  :submitters:
  - :name: Alan Turing
    :sid: '002'
    :email: alan@example.edu
  - :name: Grace Hopper
    :sid: '003'
    :email: grace@example.edu
  :created_at: 2026-11-20 11:00:00.000000000 -08:00
  :results:
    tests:
    - name: static checks
      number: '0'
      score: 0.0
      max_score: 0.0
      output: "rmsnorm.py: the starter's TODOs are still there"
submission_1003:
  :submitters:
  - :name: Empty Handed
    :sid: '004'
    :email: empty@example.edu
"""

# A larger Gradescope-like file: numeric sids, multi-line outputs, a submission's :history:.
GRADESCOPE_METADATA = """\
---
submission_2001:
  :submitters:
  - :name: Barbara Liskov
    :sid: 12345
    :email: barbara@example.edu
  - :name: "Edsger W. Dijkstra"
    :sid: '0067'
    :email: edsger@example.edu
  :created_at: 2026-11-21 09:15:02.123456789 -08:00
  :score: 42.5
  :results:
    score: 42.5
    execution_time: 63.0
    output: "Graded on the CPU: item 10 on the GPU machine"
    tests:
    - name: static checks
      number: '0'
      score: 0.0
      max_score: 0.0
      output: ''
    - name: 'Backward dx: dx matches'
      number: '2'
      score: 0.0
      max_score: 15.0
      output: |-
        Traceback (most recent call last):
          name: dx
          email: nobody@example.edu
        AssertionError: max error 3.1e-2
      visibility: visible
  :history:
  - :id: 1999
    :score: 10.0
    :created_at: 2026-11-20 08:00:00.000000000 -08:00
    :active: false
submission_2002:
  :submitters:
  - :name: Donald Knuth
    :sid: 7
    :email: knuth@example.edu
  :score: 0.0
  :results:
    tests:
    - name: Forward correctness
      number: '1'
      score: 0.0
      max_score: 15.0
      output: >-
        name: y differs
        at row 3
"""


def fake_grade(submission, results, env=None):
    """Stands in for grade.grade: 15 points for item 1, no grading run."""
    results.write_text(json.dumps({"tests": [{"number": "1", "score": 15.0, "max_score": 15.0, "output": ""}]}))


def stand_in_grader(monkeypatch) -> list:
    """Replace the grader by a stand-in that gives item 1's 15 points and a finished grading; returns the list
    of submission folders it is asked to grade, in order."""
    graded = []

    def stand_in(sub, out, env=None):
        graded.append(sub.parent.name)
        out.write_text(json.dumps({"tests": [{"number": "1", "score": 15.0, "max_score": 15.0, "output": ""}],
                                   "complete": True}))
    monkeypatch.setattr(grade_all.grade, "preflight", lambda: None)
    monkeypatch.setattr(grade_all.grade, "grade", stand_in)
    return graded


def make_export(d):
    d.mkdir()
    (d / "submission_metadata.yml").write_text(METADATA)
    (d / "submission_1001").mkdir()
    shutil.copy(ROOT / "solution" / "rmsnorm.py", d / "submission_1001" / "rmsnorm.py")
    (d / "submission_1002" / "hw").mkdir(parents=True)
    shutil.copy(ROOT / "starter" / "rmsnorm.py", d / "submission_1002" / "hw" / "rmsnorm.py")
    (d / "submission_1003").mkdir()
    (d / "submission_1003" / "notes.txt").write_text("sorry")
    return d


def test_metadata_reader_names_every_submitter(tmp_path):
    (tmp_path / "m.yml").write_text(METADATA)
    meta = read_metadata(tmp_path / "m.yml")
    assert [p["name"] for p in meta["submission_1002"]] == ["Alan Turing", "Grace Hopper"]
    assert meta["submission_1001"][0] == {"name": "Ada Lovelace", "sid": "001", "email": "ada@example.edu"}


def test_export_is_regraded_into_one_row_per_student_and_resumes(tmp_path, capsys):
    export = make_export(tmp_path / "export")
    out = tmp_path / "grades.csv"
    assert grade_all.main([str(export), "--out", str(out), "--jobs", "2"]) == 0
    rows = list(csv.DictReader(out.open()))
    assert [r["name"] for r in rows] == ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Empty Handed"]
    ada, alan, grace, empty = rows
    assert float(ada["total"]) == 90 and float(ada["extra credit"]) == 5 and float(ada["5 Fused forward"]) == 10
    assert float(alan["total"]) == 0 == float(grace["total"]) and alan["submission"] == "submission_1002"
    assert empty["note"].startswith("NOT GRADED: No rmsnorm.py was found") and "notes.txt" in empty["note"]
    assert empty["total"] == "" and empty["1 Forward correctness"] == ""
    assert float(ada["gradescope score"]) == 90 and ada["changed"] == "2, 3, 4, 5, 6, 7, 8, 9"
    assert "NotImplementedError: TODO" in alan["note"]           # every part failed for one reason: it is the note
    err = capsys.readouterr().err
    assert "3 submissions, 0 already graded" in err
    import torch
    if not torch.cuda.is_available():                           # item 10 not graded here: empty, never 0
        assert ada["10 GPU speed"] == "" and empty["10 GPU speed"] == ""
        assert "item 10 (GPU speed) was not graded" in err

    first = (export / "regrade" / "submission_1001.json").stat().st_mtime_ns
    (export / "regrade" / "submission_1002.json").unlink()           # as if interrupted
    grade_all.main([str(export), "--out", str(out)])
    assert "3 submissions, 2 already graded" in capsys.readouterr().err
    assert (export / "regrade" / "submission_1001.json").stat().st_mtime_ns == first
    assert json.loads((export / "regrade" / "submission_1002.json").read_text())["tests"]
    assert list(csv.DictReader(out.open())) == rows


def test_metadata_reader_takes_only_the_submitters(tmp_path):
    (tmp_path / "m.yml").write_text(GRADESCOPE_METADATA)
    assert read_metadata(tmp_path / "m.yml") == {
        "submission_2001": [
            {"name": "Barbara Liskov", "sid": "12345", "email": "barbara@example.edu"},
            {"name": "Edsger W. Dijkstra", "sid": "0067", "email": "edsger@example.edu"},
        ],
        "submission_2002": [{"name": "Donald Knuth", "sid": "7", "email": "knuth@example.edu"}],
    }


def test_numeric_sids_become_strings(tmp_path):
    (tmp_path / "m.yml").write_text(GRADESCOPE_METADATA)
    meta = read_metadata(tmp_path / "m.yml")
    sids = [p["sid"] for people in meta.values() for p in people]
    assert sids == ["12345", "0067", "7"]
    assert all(type(v) is str for people in meta.values() for p in people for v in p.values())


def test_top_level_folder_of_the_export_is_accepted(tmp_path, monkeypatch, capsys):
    inner = tmp_path / "download" / "assignment_123_export"
    inner.mkdir(parents=True)
    (inner / "submission_metadata.yml").write_text(METADATA)
    for sub in ("submission_1001", "submission_1002", "submission_1003"):
        (inner / sub).mkdir()
        (inner / sub / "rmsnorm.py").write_text("# not graded here\n")
    monkeypatch.setattr(grade_all.grade, "grade", fake_grade)
    assert grade_all.main([str(tmp_path / "download")]) == 0
    rows = list(csv.DictReader((inner / "regrade.csv").open()))
    assert [(r["name"], r["sid"], r["submission"]) for r in rows] == [
        ("Ada Lovelace", "001", "submission_1001"), ("Alan Turing", "002", "submission_1002"),
        ("Grace Hopper", "003", "submission_1002"), ("Empty Handed", "004", "submission_1003")]
    assert all(float(r["total"]) == 15 for r in rows)
    assert "warning" not in capsys.readouterr().err
    assert export_folder(tmp_path / "download") == inner
    assert export_folder(inner) == inner


def test_missing_metadata_names_the_folder_searched(tmp_path):
    export = tmp_path / "not_an_export"
    (export / "submission_1001").mkdir(parents=True)
    (export / "submission_1002").mkdir()
    with pytest.raises(SystemExit) as exc:
        grade_all.main([str(export)])
    assert isinstance(exc.value.code, str)              # printed to stderr, exit status 1
    assert f"submission_metadata.yml not found in {export}" in exc.value.code
    assert "unzipped Gradescope export" in exc.value.code
    assert not (export / "regrade").exists()


def test_malformed_metadata_names_the_file_and_line(tmp_path):
    bad = tmp_path / "submission_metadata.yml"
    bad.write_text("submission_1001:\n  :submitters:\n  - :name: Ada\n   :sid: '001'\n")
    with pytest.raises(SystemExit, match=re.escape(str(bad)) + r" is not valid YAML at line 4\b"):
        read_metadata(bad)


def test_metadata_without_submissions_is_refused(tmp_path):
    empty = tmp_path / "submission_metadata.yml"
    empty.write_text("---\n# nothing exported\n")
    with pytest.raises(SystemExit, match=re.escape(str(empty)) + " lists no submissions"):
        read_metadata(empty)


def test_unlisted_folders_are_graded_and_both_mismatches_warned(tmp_path, capsys):
    export = tmp_path / "export"
    export.mkdir()
    (export / "submission_metadata.yml").write_text(METADATA)
    for sub in ("submission_1001", "submission_1003", "submission_9999"):
        (export / sub).mkdir()
    subs = submissions(export)
    assert [(name, folder is not None, people) for name, folder, people in subs] == [
        ("submission_1001", True, [{"name": "Ada Lovelace", "sid": "001", "email": "ada@example.edu"}]),
        ("submission_1002", False, [{"name": "Alan Turing", "sid": "002", "email": "alan@example.edu"},
                                    {"name": "Grace Hopper", "sid": "003", "email": "grace@example.edu"}]),
        ("submission_1003", True, [{"name": "Empty Handed", "sid": "004", "email": "empty@example.edu"}]),
        ("submission_9999", True, [])]
    err = capsys.readouterr().err
    assert "warning: submission_9999 is not in submission_metadata.yml" in err
    assert "warning: submission_metadata.yml lists submission_1002 but" in err


def test_a_listed_submission_without_a_folder_keeps_its_students_rows_marked_not_graded(tmp_path, monkeypatch,
                                                                                         capsys):
    export = tmp_path / "export"
    export.mkdir()
    (export / "submission_metadata.yml").write_text(METADATA)
    for sub in ("submission_1001", "submission_1003"):
        (export / sub).mkdir()
        (export / sub / "rmsnorm.py").write_text("# graded by the stand-in below\n")
    graded = stand_in_grader(monkeypatch)
    out = tmp_path / "grades.csv"
    assert grade_all.main([str(export), "--out", str(out)]) == 0
    assert sorted(graded) == ["submission_1001", "submission_1003"]
    if os.geteuid() == 0:                           # names, sids and grades: root's alone, wherever it is written
        assert out.stat().st_mode & 0o777 == 0o600
    rows = {r["name"]: r for r in csv.DictReader(out.open())}
    assert list(rows) == ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Empty Handed"]
    for name in ("Alan Turing", "Grace Hopper"):
        row = rows[name]
        assert row["total"] == "" and row["1 Forward correctness"] == "" and row["note"].startswith("NOT GRADED")
        assert "no submission_1002 folder" in row["note"]
    assert float(rows["Ada Lovelace"]["1 Forward correctness"]) == 15
    err = capsys.readouterr().err
    assert "2 submissions, 0 already graded" in err
    assert "1 submission(s) listed in submission_metadata.yml have no folder" in err and "submission_1002" in err


def test_an_autograder_error_marks_the_row_and_fails_the_regrade(tmp_path, monkeypatch, capsys):
    from autograder.errors import GraderError
    export = make_export(tmp_path / "export")

    def broken(sub, out, env=None):
        raise GraderError("the sandbox is broken", "fix it")
    monkeypatch.setattr(grade_all.grade, "preflight", lambda: None)
    monkeypatch.setattr(grade_all.grade, "grade", broken)
    out = tmp_path / "grades.csv"
    assert grade_all.main([str(export), "--out", str(out)]) == 1
    rows = {r["submission"]: r for r in csv.DictReader(out.open())}
    bad = rows["submission_1001"]
    assert bad["total"] == "" and bad["note"].startswith("NOT GRADED: autograder error") and \
        "sandbox is broken" in bad["note"]
    err = capsys.readouterr().err
    assert "the sandbox is broken" in err and "Fix: fix it" in err and "2 submission(s) not graded" in err


def test_a_grading_cut_short_is_graded_again_and_a_cpu_grading_is_redone_on_a_gpu(tmp_path):
    from autograder.rubric import PARTS, item_of
    cpu_parts = [n for n in PARTS if not item_of(n).gpu_only]
    done = lambda numbers: {"tests": [{"number": n, "score": 0.0, "max_score": 1.0} for n in numbers]}  # noqa: E731
    cases = {"interrupted": (done(["0"]), False, False),                     # Ctrl-C: pytest wrote what it had
             "cpu_complete": (done(["0", *cpu_parts]), True, False),          # item 10 is the GPU machine's
             "all": (done(["0", *PARTS]), True, True),
             "no_rmsnorm": ({"tests": [], "complete": True}, True, True),
             "autograder_error": ({"tests": [], "extra_data": {"autograder_error": True}}, False, False)}
    for name, (res, on_cpu, on_gpu) in cases.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(res))
        assert run.graded_already(tmp_path / f"{name}.json", gpu=False) == on_cpu, name
        assert run.graded_already(tmp_path / f"{name}.json", gpu=True) == on_gpu, name
    assert not run.graded_already(tmp_path / "missing.json")


def test_ctrl_c_says_how_to_resume_without_a_traceback(tmp_path, monkeypatch, capsys):
    export = make_export(tmp_path / "export")

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(grade_all, "regrade", interrupted)
    assert grade_all.main([str(export)]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "Run the same command to resume" in err and "Traceback" not in err


def test_the_export_is_made_readable_by_its_owner_only(tmp_path, capsys):
    export = make_export(tmp_path / "export")
    export.chmod(0o755)
    run.keep_private(export)
    assert export.stat().st_mode & 0o777 == 0o700
    assert "made readable by its owner only" in capsys.readouterr().err


def test_shares_differ_by_one_at_most_and_cover_the_class_once():
    sids = [f"submission_{k}" for k in (7, 3, 11, 100, 42)]
    shares = [shards.shard_of(sids, (k, 3)) for k in (1, 2, 3)]
    assert sorted(map(len, shares)) == [1, 2, 2] and set().union(*shares) == set(sids)
    assert shards.shard_of(list(reversed(sids)), (2, 3)) == shares[1]      # the same on every machine


def test_a_grading_made_with_the_scan_off_is_graded_again_with_it_on(tmp_path, monkeypatch):
    from autograder import config
    from autograder.rubric import PARTS
    res = {"tests": [{"number": n, "score": 0.0, "output": config.SCAN_SKIPPED + ": nothing was checked"
                      if n == "0" else ""} for n in ["0", *PARTS]]}
    (tmp_path / "r.json").write_text(json.dumps(res))
    assert not run.graded_already(tmp_path / "r.json", gpu=True)
    monkeypatch.setenv("RMSNORM_SCAN", "off")
    assert run.graded_already(tmp_path / "r.json", gpu=True)


FIVE = "".join(f"""\
submission_{k}:
  :submitters:
  - :name: {name}
    :sid: '{k}'
    :email: s{k}@example.edu
{extra}""" for k, name, extra in (
    (1, "Same Score", "  :score: 15.0\n  :results:\n    score: 15.0\n    tests:\n    - number: '1'\n      score: 15.0\n"
                      "    - number: '2'\n      score: 0.0\n"),
    (2, "Regraded Up", "  :score: 0.0\n  :results:\n    tests:\n    - number: '1'\n      score: 0.0\n"),
    (3, "Two Files", "  :score: 0.0\n"),
    (4, "No Folder", "  :score: 12.5\n"),
    (5, "No Results", "")))


def test_the_csv_carries_gradescope_s_score_the_items_that_changed_and_not_graded_rows(tmp_path, monkeypatch):
    """Five submissions: one as on Gradescope, one whose item 1 rose, one with two rmsnorm.py files, one
    listed without a folder, one Gradescope has no score for."""
    export = tmp_path / "export"
    export.mkdir()
    (export / "submission_metadata.yml").write_text(FIVE)
    for sid in ("submission_1", "submission_2", "submission_5"):
        (export / sid).mkdir()
        (export / sid / "rmsnorm.py").write_text("# graded by the stand-in\n")
    (export / "submission_3" / "a").mkdir(parents=True)
    (export / "submission_3" / "a" / "rmsnorm.py").write_text("# one\n")
    (export / "submission_3" / "rmsnorm.py").write_text("# two\n")
    monkeypatch.setattr(grade_all.grade, "preflight", lambda: None)
    monkeypatch.setattr(grade_all.grade, "grade", fake_grade)
    out = tmp_path / "grades.csv"
    assert grade_all.main([str(export), "--out", str(out)]) == 0
    rows = {r["name"]: r for r in csv.DictReader(out.open())}
    same, up, two, gone, none = (rows[n] for n in ("Same Score", "Regraded Up", "Two Files", "No Folder",
                                                    "No Results"))
    if os.geteuid() == 0:                                    # every results.json is root's alone
        assert (export / "regrade" / "submission_3.json").stat().st_mode & 0o777 == 0o600
    assert (float(same["gradescope score"]), same["changed"], float(same["total"])) == (15, "", 15)
    assert (float(up["gradescope score"]), up["changed"], float(up["total"])) == (0, "1", 15)
    assert (none["gradescope score"], none["changed"], float(none["total"])) == ("", "", 15)
    for row, why in ((two, "several rmsnorm.py files"), (gone, "the export has no submission_4 folder")):
        assert row["note"].startswith("NOT GRADED: ") and why in row["note"], row
        assert row["total"] == "" and row["extra credit"] == "" and row["changed"] == ""
        assert all(row[k] == "" for k in row if k[:2].strip().isdigit()), row
    assert float(gone["gradescope score"]) == 12.5 and float(two["gradescope score"]) == 0


def test_shards_grade_disjoint_shares_and_a_plain_run_then_writes_every_row(tmp_path, monkeypatch, capsys):
    export = tmp_path / "export"
    export.mkdir()
    sids = [f"submission_{k}" for k in range(1, 13)]
    (export / "submission_metadata.yml").write_text("".join(
        f"{sid}:\n  :submitters:\n  - :name: Student {sid[11:]}\n    :sid: '{sid[11:]}'\n" for sid in sids))
    for sid in sids:
        (export / sid).mkdir()
        (export / sid / "rmsnorm.py").write_text("# graded by the stand-in\n")
    graded = stand_in_grader(monkeypatch)
    out = tmp_path / "grades.csv"
    shares = []
    for k in (1, 2):
        graded.clear()
        assert grade_all.main([str(export), "--out", str(out), "--shard", f"{k}/2"]) == 0
        shares.append(set(graded))
        assert not out.exists()                          # a shard writes no CSV
        assert "run the same command without --shard" in capsys.readouterr().out
    assert shares[0] and shares[1] and not shares[0] & shares[1] and shares[0] | shares[1] == set(sids)
    graded.clear()
    assert grade_all.main([str(export), "--out", str(out)]) == 0
    assert graded == [] and len(list(csv.DictReader(out.open()))) == 12
    assert "12 submissions, 12 already graded" in capsys.readouterr().err
    for bad in ("0/2", "3/2", "1", "a/b"):
        with pytest.raises(SystemExit, match="--shard takes K/N"):
            grade_all.main([str(export), "--shard", bad])


def test_the_leaderboard_ranks_each_submission_by_its_mean_share_and_names_nobody_unless_asked(tmp_path):
    from autograder.regrade import leaderboard
    results = tmp_path / "regrade"
    results.mkdir()

    def board(shares, predicted=False):
        names = ["forward fp32", "forward bf16", "forward+backward fp32", "forward+backward bf16"]
        return {"tests": [], "leaderboard": [{"name": f"{n}, % of copy" + (" (predicted)" if predicted else ""),
                                              "value": v, "order": "desc"} for n, v in zip(names, shares)]}
    (results / "s1.json").write_text(json.dumps(board([90, 90, 40, 40])))
    (results / "s2.json").write_text(json.dumps(board([97, 96, 95, 94])))
    (results / "s3.json").write_text(json.dumps({"tests": []}))                  # not timed: no row
    subs = [("s1", results, [{"name": "Ada"}]), ("s2", results, [{"name": "Bo"}]), ("s3", results, [])]
    rows = leaderboard.write(subs, results, tmp_path)
    assert [(r["rank"], r["who"]) for r in rows] == [(1, "s2"), (2, "s1")]
    table = (tmp_path / "leaderboard.md").read_text()
    assert "| 1 | s2 | 97% | 96% | 95% | 94% | 96% |" in table and "Ada" not in table and "measured" in table
    assert "Ada" not in (tmp_path / "leaderboard.csv").read_text()
    named = leaderboard.write(subs, results, tmp_path, names=True)
    assert [r["who"] for r in named] == ["Bo", "Ada"] and "| 2 | Ada |" in (tmp_path / "leaderboard.md").read_text()
    (results / "s1.json").write_text(json.dumps(board([90, 90, 40, 40], predicted=True)))
    leaderboard.write(subs, results, tmp_path)
    assert "predicted from the simulator" in (tmp_path / "leaderboard.md").read_text()
