"""Grades a TA can trust: the grader's own failures are autograder errors, never a student's
zero; gradings that run at once leave each other alone; a submission never runs as root.

The tests that need root (creating accounts, switching users) skip without it: run as an
ordinary user, the whole suite is itself the ordinary-user case.
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder import accounts, grade, grade_all
from autograder.errors import STUDENT_MESSAGE
from conftest import ROOT

pytestmark = pytest.mark.usefixtures("sandbox_accounts")      # grades through the sandbox (conftest.py)

SOLUTION = ROOT / "solution" / "rmsnorm.py"
AS_ROOT = os.geteuid() == 0 and shutil.which("useradd") is not None
needs_root = pytest.mark.skipif(not AS_ROOT, reason="needs root (creating accounts, switching users)")


def grade_cli(python, results, env=None, preexec_fn=None, submission=SOLUTION, cwd=ROOT):
    """``python -m autograder.grade SUBMISSION RESULTS`` as `make grade` runs it."""
    return subprocess.run([str(python), "-m", "autograder.grade", str(submission), str(results)], cwd=cwd,
                          env=env or dict(os.environ), capture_output=True, text=True, timeout=600,
                          preexec_fn=preexec_fn)


@pytest.fixture
def private_venv():
    """The grader's venv reached through a folder only root may enter (like pyenv under /root, mode 700)."""
    d = Path(tempfile.mkdtemp(prefix="rmsnorm-private-"))            # mode 700
    (d / "bin").mkdir()
    os.symlink(os.path.realpath(sys.executable), d / "bin" / "python")
    shutil.copy(Path(sys.prefix) / "pyvenv.cfg", d / "pyvenv.cfg")
    os.symlink(Path(sys.prefix) / "lib", d / "lib")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@needs_root
def test_an_interpreter_the_sandbox_account_cannot_run_is_an_autograder_error(private_venv, tmp_path):
    results = tmp_path / "results.json"
    p = grade_cli(private_venv / "bin" / "python", results)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "AUTOGRADER ERROR" in p.stderr and f"cannot enter {private_venv}" in p.stderr, p.stderr
    assert "Fix:" in p.stderr
    res = json.loads(results.read_text())
    assert res["tests"] == [] and res["score"] == 0 and res["output"] == STUDENT_MESSAGE, res


@needs_root
def test_as_root_without_the_sandbox_accounts_the_grading_is_an_autograder_error(tmp_path):
    results = tmp_path / "results.json"
    p = grade_cli(sys.executable, results, env=dict(os.environ, RMSNORM_SANDBOX_ACCOUNTS="rmsnorm-nosuch"))
    assert p.returncode == 1 and "none of the sandbox accounts rmsnorm-nosuch0" in p.stderr, p.stderr
    assert "make sandbox-accounts" in p.stderr
    assert json.loads(results.read_text())["output"] == STUDENT_MESSAGE


@pytest.fixture
def ordinary_user():
    """An ordinary (non-root) account to run the grader as, removed afterwards."""
    accounts.create("rmsnorm-tatest", 1)
    pw = accounts.existing("rmsnorm-tatest")[0]
    yield pw
    accounts.remove("rmsnorm-tatest")


@needs_root
def test_an_ordinary_user_grades_with_submissions_running_as_that_user(ordinary_user, grader_copy):
    """A TA's own checkout (a readable copy of the grader), graded as that TA."""
    out = Path(tempfile.mkdtemp(prefix="rmsnorm-ta-"))
    out.chmod(0o777)
    try:
        def become():
            os.setgroups([])
            os.setgid(ordinary_user.pw_gid)
            os.setuid(ordinary_user.pw_uid)
        env = dict(os.environ, HOME=str(out))
        shutil.copy(SOLUTION, out / "rmsnorm.py")
        (out / "rmsnorm.py").chmod(0o644)
        p = grade_cli(sys.executable, out / "results.json", env=env, preexec_fn=become, submission=out / "rmsnorm.py",
                      cwd=grader_copy)
        assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
        assert "90 / 90" in p.stdout and "+ 5 extra credit" in p.stdout
    finally:
        shutil.rmtree(out, ignore_errors=True)


@needs_root
def test_grading_as_root_takes_other_users_rights_off_the_checkout_but_its_venv(tmp_path):
    for name in ("solution", "autograder", ".git", ".venv"):
        (tmp_path / name).mkdir()
        (tmp_path / name).chmod(0o755)
    (tmp_path / "Makefile").write_text("")
    (tmp_path / "Makefile").chmod(0o644)
    assert grade.keep_checkout_private(tmp_path) == [".git", "Makefile", "autograder", "solution"]
    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.iterdir()}
    assert modes == {"solution": 0o750, "autograder": 0o750, ".git": 0o750, ".venv": 0o755, "Makefile": 0o640}
    assert grade.keep_checkout_private(tmp_path) == []                  # already private: nothing to say


@needs_root
def test_as_root_the_results_and_the_log_are_roots_alone(tmp_path):
    """Submissions graded at the same moment run as sandbox accounts: another student's feedback, and the
    staff-only log, must stay unreadable to them wherever RESULTS points."""
    out = tmp_path / "results.json"
    tmp_path.chmod(0o755)
    res = grade.grade(ROOT / "tests" / "corpus" / "simple.py", out)
    assert res["tests"]
    assert out.stat().st_mode & 0o777 == 0o600 and out.with_suffix(".log").stat().st_mode & 0o777 == 0o600


def test_eight_gradings_four_at_a_time_give_eight_identical_rows(tmp_path):
    """`make grade-all JOBS=4` over 8 copies of the reference solution: no grading disturbs another."""
    export = tmp_path / "export"
    export.mkdir()
    meta = []
    for i in range(8):
        (export / f"submission_{i}").mkdir()
        shutil.copy(SOLUTION, export / f"submission_{i}" / "rmsnorm.py")
        meta.append(f"submission_{i}:\n  :submitters:\n  - :name: Student {i}\n    :sid: '{i}'\n"
                    f"    :email: s{i}@example.edu\n")
    (export / "submission_metadata.yml").write_text("".join(meta))
    assert grade_all.main([str(export), "--jobs", "4", "--out", str(tmp_path / "grades.csv")]) == 0
    rows = list(csv.DictReader((tmp_path / "grades.csv").open()))
    scores = [{k: v for k, v in r.items() if k not in ("name", "sid", "email", "submission")} for r in rows]
    assert len(rows) == 8 and all(s == scores[0] for s in scores), scores
    assert float(scores[0]["total"]) == 90 and float(scores[0]["extra credit"]) == 5, scores[0]


def test_a_cuda_build_of_torch_without_a_gpu_is_an_autograder_error(monkeypatch):
    import torch

    from autograder import preflight
    from autograder.errors import GraderError
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(GraderError, match="is a CUDA build") as e:
        preflight.probe()
    assert "download.pytorch.org/whl/cpu" in e.value.fix


def test_torch_that_does_not_load_under_the_cap_is_an_autograder_error_not_a_crash(tmp_path):
    from autograder import runner, sandbox
    from autograder.errors import GraderError
    sub = tmp_path / "rmsnorm.py"
    sub.write_text("def rmsnorm_forward(x, g, eps=1e-5):\n    return x, x\n")
    with pytest.raises(GraderError, match="does not load .*under the sandbox's address-space cap") as e:
        runner.run_job(sub, {}, {}, limits=sandbox.Limits(timeout_s=60, memory_bytes=200 * 1024 ** 2))
    assert "CPU build" in e.value.fix
