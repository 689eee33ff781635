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


# the sandbox's tests of hostile submissions: ~ and another job's folder read, /proc listed, a socket of the
# machine connected to, a fork bomb, 50 GB asked for, 10 GB written
HOSTILE = ("world_readable or graders_home or another_jobs_folder or only_its_own_processes or connect or "
           "fork_bomb or memory_bomb or file_size or children_it_spawns or two_jobs or namespaces_the_ta_guide")


@needs_root
def test_the_hostile_submission_tests_pass_as_an_ordinary_user(ordinary_user, grader_copy):
    """CI runs as root; a TA grades on a cluster node as an ordinary user. The sandbox's hostile-submission tests run
    again as an ordinary account: its jobs get the same private view, in a user namespace of their own, wherever
    this machine lets an ordinary user make one (else they run without it, and the isolation tests skip)."""
    for folder in ("tests", "solution", "docs"):
        shutil.copytree(ROOT / folder, grader_copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for path in grader_copy.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    home = Path(tempfile.mkdtemp(prefix="rmsnorm-ta-home-"))
    os.chown(home, ordinary_user.pw_uid, ordinary_user.pw_gid)

    def become():
        os.setgroups([])
        os.setgid(ordinary_user.pw_gid)
        os.setuid(ordinary_user.pw_uid)
    env = dict(os.environ, HOME=str(home), TMPDIR=str(home))
    try:
        probe = subprocess.run([sys.executable, "-c", "from autograder import isolation; print(isolation.available())"],
                               cwd=grader_copy, env=env, preexec_fn=become, capture_output=True, text=True, timeout=60)
        p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:xdist",
                            "tests/test_autograder_sandbox.py", "-k", HOSTILE, "--basetemp", str(home / "pytest")],
                           cwd=grader_copy, env=env, preexec_fn=become, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
        assert "failed" not in p.stdout and " passed" in p.stdout
        if probe.stdout.strip() == "True":
            assert "skipped" not in p.stdout, p.stdout[-2000:]
        else:
            assert "user namespaces allowed" in p.stdout, p.stdout[-2000:]
    finally:
        shutil.rmtree(home, ignore_errors=True)


@needs_root
def test_three_gradings_at_once_as_an_ordinary_user_give_three_identical_rows(ordinary_user, grader_copy):
    """`make grade-all JOBS=3` as a TA on a cluster node: each job in its own user namespace, none disturbs another."""
    home = Path(tempfile.mkdtemp(prefix="rmsnorm-ta-"))
    export = home / "export"
    export.mkdir()
    meta = []
    for i in range(3):
        (export / f"submission_{i}").mkdir()
        shutil.copy(SOLUTION, export / f"submission_{i}" / "rmsnorm.py")
        meta.append(f"submission_{i}:\n  :submitters:\n  - :name: Student {i}\n    :sid: '{i}'\n")
    (export / "submission_metadata.yml").write_text("".join(meta))
    for path in (home, *home.rglob("*")):
        os.chown(path, ordinary_user.pw_uid, ordinary_user.pw_gid)

    def become():
        os.setgroups([])
        os.setgid(ordinary_user.pw_gid)
        os.setuid(ordinary_user.pw_uid)
    try:
        p = subprocess.run([sys.executable, "-m", "autograder.grade_all", str(export), "--jobs", "3", "--out",
                            str(home / "grades.csv")], cwd=grader_copy, env=dict(os.environ, HOME=str(home)),
                           preexec_fn=become, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        rows = list(csv.DictReader((home / "grades.csv").open()))
        scores = [{k: v for k, v in r.items() if k not in ("name", "sid", "email", "submission")} for r in rows]
        assert len(rows) == 3 and all(sc == scores[0] for sc in scores), scores
        assert float(scores[0]["total"]) == 90 and float(scores[0]["extra credit"]) == 5, scores[0]
    finally:
        shutil.rmtree(home, ignore_errors=True)


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


def test_four_gradings_at_once_give_four_identical_rows(tmp_path):
    """`make grade-all JOBS=4` over 4 copies of the reference solution, all at once: no grading disturbs another."""
    export = tmp_path / "export"
    export.mkdir()
    meta = []
    for i in range(4):
        (export / f"submission_{i}").mkdir()
        shutil.copy(SOLUTION, export / f"submission_{i}" / "rmsnorm.py")
        meta.append(f"submission_{i}:\n  :submitters:\n  - :name: Student {i}\n    :sid: '{i}'\n"
                    f"    :email: s{i}@example.edu\n")
    (export / "submission_metadata.yml").write_text("".join(meta))
    assert grade_all.main([str(export), "--jobs", "4", "--out", str(tmp_path / "grades.csv")]) == 0
    rows = list(csv.DictReader((tmp_path / "grades.csv").open()))
    scores = [{k: v for k, v in r.items() if k not in ("name", "sid", "email", "submission")} for r in rows]
    assert len(rows) == 4 and all(s == scores[0] for s in scores), scores
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
