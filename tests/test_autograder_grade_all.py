"""`make grade-all`: a Gradescope export regraded into one CSV row per student, resumable."""
import csv
import json
import shutil

from autograder import grade_all
from conftest import ROOT

METADATA = """\
submission_1001:
  :submitters:
  - :name: Ada Lovelace
    :sid: '001'
    :email: ada@example.edu
  :created_at: 2026-11-20 10:00:00.000000000 -08:00
  :score: 90.0
submission_1002:
  :submitters:
  - :name: Alan Turing
    :sid: '002'
    :email: alan@example.edu
  - :name: Grace Hopper
    :sid: '003'
    :email: grace@example.edu
  :created_at: 2026-11-20 11:00:00.000000000 -08:00
submission_1003:
  :submitters:
  - :name: Empty Handed
    :sid: '004'
    :email: empty@example.edu
"""


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
    meta = grade_all.read_metadata(tmp_path / "m.yml")
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
    assert "no single rmsnorm.py" in empty["note"]
    assert "3 submissions, 0 already graded" in capsys.readouterr().err

    first = (export / "regrade" / "submission_1001.json").stat().st_mtime_ns
    (export / "regrade" / "submission_1002.json").unlink()           # as if interrupted
    grade_all.main([str(export), "--out", str(out)])
    assert "3 submissions, 2 already graded" in capsys.readouterr().err
    assert (export / "regrade" / "submission_1001.json").stat().st_mtime_ns == first
    assert json.loads((export / "regrade" / "submission_1002.json").read_text())["tests"]
    assert list(csv.DictReader(out.open())) == rows
