"""The Gradescope zip, end to end, as the TA guide says to use it: built, unpacked under a
temporary AUTOGRADER_ROOT, set up with its own setup.sh (from a Python without the venv module,
as on a fresh Ubuntu: setup.sh installs python3-venv, here through a stand-in apt-get; a fresh
venv; the sandbox accounts when run as root; the preflight and the self-test), and run with its
own run_autograder on the solution, the starter and hostile submissions.
"""
import json
import os
import shutil
import stat
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pytest

from autograder import accounts, grade, isolation, package
from conftest import ROOT

import gradescope_format

POOL = "rmsnorm-sbxzip"               # the test's own sandbox accounts: created by setup.sh as root, removed after


def _world_readable_python():
    """A python3 whose installation every user can read (the sandbox user runs it), or None."""
    for cand in ("/usr/bin/python3", shutil.which("python3")):
        if not cand or not os.path.exists(cand):
            continue
        probe = subprocess.run([cand, "-c", "import sys, venv; print(sys.base_prefix)"], capture_output=True,
                               text=True)
        if probe.returncode:
            continue
        paths = [Path(os.path.realpath(cand)), Path(probe.stdout.strip())]
        if all(all(p.stat().st_mode & stat.S_IXOTH for p in [q, *q.parents] if p.is_dir()) for q in paths):
            return cand
    return None


PYTHON = _world_readable_python()
AS_ROOT = os.geteuid() == 0 and shutil.which("useradd") is not None and PYTHON is not None


def unzip(zip_path, dest):
    """Extract keeping the mode bits, as Gradescope's unzip does."""
    with zipfile.ZipFile(zip_path) as z:
        for info in z.infolist():
            target = dest / info.filename
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(info))
            target.chmod((info.external_attr >> 16) & 0o777 or 0o644)


FAKE_PYTHON = """#!/bin/bash
# {real}, as stock Ubuntu ships it: no venv or ensurepip until python3-venv is installed
if [ ! -e {flag} ]; then
    for a in "$@"; do
        case "$a" in *venv*|*ensurepip*) echo "No module named 'ensurepip' (simulated)" >&2; exit 1;; esac
    done
fi
exec {real} "$@"
"""
FAKE_APT_GET = """#!/bin/bash
echo "apt-get $*" >> {log}
case " $* " in *" install "*) touch {flag};; esac
"""


def stand_ins(folder: Path, real_python: str) -> Path:
    """python3 without venv (until apt-get installs it) and an apt-get that only records its calls."""
    folder.mkdir()
    flag, log = folder / "venv-installed", folder / "apt-get.log"
    (folder / "python3").write_text(FAKE_PYTHON.format(real=real_python, flag=flag))
    (folder / "apt-get").write_text(FAKE_APT_GET.format(log=log, flag=flag))
    for f in ("python3", "apt-get"):
        (folder / f).chmod(0o755)
    return log


@pytest.fixture(scope="module")
def gradescope():
    """A temporary /autograder after setup.sh; yields a function that grades one submission folder."""
    root = Path(tempfile.mkdtemp(prefix="autograder-root-", dir="/tmp"))
    root.chmod(0o755)
    apt_log = stand_ins(root / "fakebin", PYTHON or shutil.which("python3"))
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), TORCH_INDEX_URL="", RMSNORM_SANDBOX_ACCOUNTS=POOL,
               RMSNORM_PREDICT="on",                  # item 10's prediction (the tests/conftest.py default is off)
               PYTHON=str(root / "fakebin" / "python3"), PATH=f"{root / 'fakebin'}:{os.environ['PATH']}")
    env.pop("VIRTUAL_ENV", None)
    try:
        zip_path = package.build(root / "autograder.zip")
        unzip(zip_path, root / "source")
        setup = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env, cwd=root / "source",
                               capture_output=True, text=True, timeout=900)
        assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
        assert "install -y -qq python3-venv" in apt_log.read_text(), apt_log.read_text()
        assert "self-test: ok" in setup.stdout and "preflight: ok" in setup.stdout, setup.stdout
        shutil.copy(root / "source" / "run_autograder", root / "run_autograder")

        def run(files: dict, scan=True):
            sub = root / "submission"
            shutil.rmtree(sub, ignore_errors=True)
            sub.mkdir()
            for name, text in files.items():
                (sub / name).parent.mkdir(parents=True, exist_ok=True)
                (sub / name).write_text(text)
            (root / "results").mkdir(exist_ok=True)
            (root / "results").chmod(0o755)
            p = subprocess.run([str(root / "run_autograder")], env=env if scan else dict(env, RMSNORM_SCAN="off"),
                               cwd=root, capture_output=True, text=True, timeout=600)
            return p, json.loads((root / "results" / "results.json").read_text())
        yield root, run
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if AS_ROOT:
            accounts.remove(POOL)


def test_zip_has_the_scripts_at_its_root_and_no_solution(tmp_path):
    z = zipfile.ZipFile(package.build(tmp_path / "a.zip"))
    names = z.namelist()
    assert "setup.sh" in names and "run_autograder" in names
    assert (z.getinfo("run_autograder").external_attr >> 16) & stat.S_IXUSR
    assert not any(n.startswith("solution/") for n in names)
    answers = package.solution_lines()
    assert answers and not any(line in z.read(n).decode() for n in names for line in answers)
    assert "triton" not in z.read("requirements.txt").decode().replace("mini_triton", "")


def test_package_refuses_to_ship_solution_code(tmp_path, monkeypatch):
    leaked = tmp_path / "leak.py"
    leaked.write_text(next(iter(package.solution_lines())) + "\n")
    monkeypatch.setattr(package, "files", lambda: [("autograder/leak.py", leaked)])
    with pytest.raises(SystemExit, match="contains solution code"):
        package.build(tmp_path / "b.zip")


def test_solution_gets_full_marks_through_run_autograder(gradescope):
    root, run = gradescope
    proc, res = run({"rmsnorm.py": (ROOT / "solution" / "rmsnorm.py").read_text()})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert isinstance(res["execution_time"], (int, float)) and res["stdout_visibility"] == "hidden"
    assert all(t["status"] == "passed" for t in res["tests"]), res
    assert sum(t["score"] for t in res["tests"]) == 95                 # 90 on the CPU + 5 extra credit
    assert sum(t["max_score"] for t in res["tests"]) == 90             # what the TA guide says to set
    assert not [t for t in res["tests"] if t["number"].startswith("10.")]
    for t in res["tests"]:
        assert set(t) >= {"name", "number", "score", "max_score", "status", "output", "visibility"}
    assert "Fused forward" in res["output"] and "course GPU machine" in res["output"]
    assert "Predicted on an H200" in res["output"] and gradescope_format.problems(res) == []
    assert {e["name"] for e in res["leaderboard"]} >= {"forward fp32, % of copy (predicted)",
                                                        "forward+backward bf16, traffic in copies of x (predicted)"}
    assert "--- pytest log (staff only) ---" in proc.stdout and "passed" in proc.stdout


def test_starter_scores_zero_through_run_autograder(gradescope):
    root, run = gradescope
    _, res = run({"rmsnorm.py": (ROOT / "starter" / "rmsnorm.py").read_text()})
    parts = [t for t in res["tests"] if t["number"] != "0"]
    assert parts and sum(t["score"] for t in res["tests"]) == 0
    assert all("NotImplementedError: TODO" in t["output"] for t in parts), res


def test_run_autograders_fallback_is_the_graders_autograder_error():
    script = (ROOT / "autograder" / "zip" / "run_autograder").read_text()
    fallback = json.loads(next(ln for ln in script.splitlines() if ln.startswith("printf")).split("'")[3])
    assert fallback == grade.FALLBACK


def test_submission_inside_a_folder_is_found_and_a_missing_file_is_named(gradescope):
    root, run = gradescope
    _, res = run({"notes.txt": "hello"})
    assert res["tests"] == [] and "No rmsnorm.py" in res["output"] and "notes.txt" in res["output"]
    _, res = run({"hw/rmsnorm.py": "def broken(:\n"})
    assert res["tests"] and all("SyntaxError" in t["output"] for t in res["tests"] if t["max_score"] > 0)


PROBE = """
_o = __builtins__['open'] if isinstance(__builtins__, dict) else __builtins__.open
_seen = []
for _path, _mode in (({hidden!r}, 'r'), ({results!r}, 'w'), ({source!r}, 'r')):
    try:
        _o(_path, _mode).close()
        _seen.append('OPENED ' + _path)
    except OSError as _e:
        _seen.append(type(_e).__name__)

def rmsnorm_forward(x, g, eps=1e-5):
    raise RuntimeError('probe: ' + ' '.join(_seen))
"""


@pytest.mark.skipif(not AS_ROOT, reason="the sandbox user exists only when the grader runs as root")
def test_submission_cannot_read_the_grader_or_write_results(gradescope):
    root, run = gradescope
    probe = PROBE.format(hidden=str(root / "source" / "autograder" / "hidden" / "test_rubric.py"),
                         results=str(root / "results" / "results.json"),
                         source=str(root / "source" / "autograder" / "rubric.py"))
    _, res = run({"rmsnorm.py": probe}, scan=False)      # the probe evades the scan only with it off
    first = next(t for t in res["tests"] if t["number"] == "1")
    # with a private file system per job (isolation.py), the grader's files are not there at all
    denied = "FileNotFoundError" if isolation.available() else "PermissionError"
    assert f"probe: {denied} {denied} {denied}" in first["output"], first["output"]
    assert accounts.existing(POOL), "setup.sh created the sandbox accounts"
    assert "OPENED" not in json.dumps(res)


@pytest.mark.parametrize("attack", ["direct", "daemon"])
def test_results_forged_by_a_submission_do_not_survive(gradescope, attack):
    import time
    root, run = gradescope
    simple = (ROOT / "tests" / "corpus" / "simple.py").read_text()
    forge = (f"_o = __builtins__['open'] if isinstance(__builtins__, dict) else __builtins__.open\n"
             f"def _forge():\n"
             f"    try:\n"
             f"        _o({str(root / 'results' / 'results.json')!r}, 'w').write('{{\"score\": 1000}}')\n"
             f"    except OSError:\n"
             f"        pass\n")
    if attack == "direct":
        forge += "_forge()\n"
    else:
        forge += ("import os, time\n"
                  "if getattr(os, 'fo' + 'rk')() == 0:\n"
                  "    getattr(os, 'set' + 'sid')()\n"
                  "    time.sleep(3)\n"
                  "    _forge()\n"
                  "    getattr(os, '_ex' + 'it')(0)\n")
    _, res = run({"rmsnorm.py": forge + simple}, scan=False)
    time.sleep(4)
    on_disk = json.loads((root / "results" / "results.json").read_text())
    assert on_disk == res and on_disk.get("score") != 1000
    assert sum(t["score"] for t in on_disk["tests"]) == 90


def test_the_zip_and_a_dist_folder_made_for_it_are_private_from_birth(tmp_path):
    """The zip holds the hidden tests: readable by its owner only, from the moment it exists."""
    old = tmp_path / "dist" / "autograder.zip"
    old.parent.mkdir()
    old.write_bytes(b"an old, world-readable zip")
    old.chmod(0o644)
    for out in (old, tmp_path / "fresh" / "dist" / "autograder.zip"):
        package.build(out)
        assert out.stat().st_mode & 0o077 == 0, oct(out.stat().st_mode)
    assert (tmp_path / "fresh" / "dist").stat().st_mode & 0o077 == 0
    assert (tmp_path / "fresh").stat().st_mode & 0o077 == 0
