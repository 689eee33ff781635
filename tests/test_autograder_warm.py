"""The warm interpreter (autograder/warm.py): each pytest run forked from one server that imported torch once is
what ``python -m pytest`` would be: its own environment, folder, modules, output and exit code."""
import os
import subprocess
import sys
import textwrap
import time

import pytest

from autograder import warm
from conftest import ROOT

pytestmark = pytest.mark.skipif(not warm.available(), reason="no fork server on this platform")

TEST = textwrap.dedent("""
    import os, sys

    def test_sees_its_own_run():
        print("run", os.environ["WARM_RUN"], "in", os.getcwd())
        assert os.environ.get("WARM_OTHER") is None
        assert "torch" in sys.modules                       # imported by the server, before the fork
        assert "warm_probe" not in sys.modules              # what an earlier run imported is gone
        import warm_probe  # noqa: F401
        assert os.environ["WARM_RUN"] != "fail"
""")


def run(tmp_path, name, **env):
    folder = tmp_path / name
    folder.mkdir()
    (folder / "test_probe.py").write_text(TEST)
    (folder / "warm_probe.py").write_text("")
    out = tmp_path / f"{name}.out"
    out.write_text("")
    code = warm.pytest(["-q", "-s", "-p", "no:cacheprovider", "test_probe.py"], env={"PATH": "/usr/bin:/bin", **env},
                       cwd=folder, out=out, timeout=120)
    return code, out.read_text(), folder


def test_each_run_has_its_own_environment_folder_modules_and_output(tmp_path):
    for name in ("first", "second"):
        code, out, folder = run(tmp_path, name, WARM_RUN=name)
        assert code == 0, out
        assert f"run {name} in {folder}" in out and "1 passed" in out


def test_a_failing_run_gives_pytests_exit_code(tmp_path):
    code, out, _ = run(tmp_path, "fails", WARM_RUN="fail")
    assert code == 1 and "1 failed" in out, out


def test_a_run_past_its_time_limit_is_killed(tmp_path):
    (tmp_path / "test_sleeps.py").write_text("import time\n\ndef test_sleeps():\n    time.sleep(60)\n")
    out = tmp_path / "out"
    out.write_text("")
    start = time.monotonic()
    code = warm.pytest(["-q", "-p", "no:cacheprovider", "test_sleeps.py"], env={"PATH": "/usr/bin:/bin"},
                       cwd=tmp_path, out=out, timeout=3)
    assert code is None and time.monotonic() - start < 30


def test_the_grader_process_itself_never_imports_torch():
    """torch lives in the server and its children: the grader's own process stays small while jobs run."""
    probe = "import autograder.grade, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout


def test_a_gradings_server_leaves_out_what_only_the_public_tests_backward_needs(tmp_path):
    """A grading's server imports torch and pytest, not autograd's symbolic shapes (sympy: 0.3 s of CPU on each
    grading's critical path), which only a backward(gradient) in the run's own process needs: the public tests'.
    The hidden tests' run does without them (they run in its jobs)."""
    probe = textwrap.dedent("""
        import multiprocessing.forkserver, sys
        from pathlib import Path
        from autograder import grade
        res = grade.grade(Path("starter/rmsnorm.py"), Path(sys.argv[1]), select="static_checks")
        print(sorted(multiprocessing.forkserver._forkserver._preload_modules), len(res["tests"]))
    """)
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "results.json")], capture_output=True,
                         text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split("]")[0] + "]" == str(sorted(warm.GRADER_PRELOAD)) and out.stdout.split()[-1] == "1", out
    assert "torch" in warm.GRADER_PRELOAD and not any("symbolic" in m for m in warm.GRADER_PRELOAD)


def test_the_cpu_time_of_ended_runs_is_counted_with_their_children(tmp_path):
    """What resource.RUSAGE_CHILDREN counts of a fresh interpreter: a run's CPU time, a child it waited for
    included (a grading's jobs), once it has ended."""
    (tmp_path / "test_spins.py").write_text(textwrap.dedent("""
        import subprocess, sys

        def test_spins():
            subprocess.run([sys.executable, "-c", "import time\\nt = time.process_time()\\n"
                                                  "while time.process_time() - t < 1.5: pass"], check=True)
    """))
    out = tmp_path / "out"
    out.write_text("")
    before = warm.cpu_seconds()
    code = warm.pytest(["-q", "-p", "no:cacheprovider", "test_spins.py"], env={"PATH": "/usr/bin:/bin"},
                       cwd=tmp_path, out=out, timeout=120)
    assert code == 0, out.read_text()
    assert 1.5 <= warm.cpu_seconds() - before < 20


def test_a_run_reads_the_graders_modules_afresh_with_its_own_environment(tmp_path):
    """multiprocessing imports the grader's main module in each child (``python -m autograder.grade``): a run must
    not see it, nor the settings it read from the server's environment; it imports them again, from its own."""
    (tmp_path / "grader_main.py").write_text(textwrap.dedent(f"""
        import os, sys
        from autograder import config, warm
        assert config.ACCOUNT_PREFIX == "from-the-server"

        if __name__ == "__main__":
            out = os.path.join({str(tmp_path)!r}, "out")
            open(out, "w").close()
            env = dict(os.environ, RMSNORM_SANDBOX_ACCOUNTS="from-the-run")
            code = warm.pytest(["-q", "-p", "no:cacheprovider", "test_fresh.py"], env=env, cwd={str(tmp_path)!r},
                               out=out, timeout=120)
            print(open(out).read())
            sys.exit(code)
    """))
    (tmp_path / "test_fresh.py").write_text(textwrap.dedent("""
        import sys

        def test_the_graders_modules_are_the_runs_own():
            assert "__mp_main__" not in sys.modules
            from autograder import config
            assert config.ACCOUNT_PREFIX == "from-the-run"
    """))
    env = dict(os.environ, RMSNORM_SANDBOX_ACCOUNTS="from-the-server",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]))
    out = subprocess.run([sys.executable, "-m", "grader_main"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "1 passed" in out.stdout, out.stdout + out.stderr


def test_a_run_keeps_its_exit_code_when_the_server_is_lost_while_it_runs(tmp_path):
    """The server reports each child's exit code; if the server itself ends (killed, out of memory) while a run
    goes on, the run's own code still comes back, never the 255 that multiprocessing reports for a lost server."""
    import multiprocessing.forkserver
    import signal
    (tmp_path / "test_slow_fail.py").write_text("import time\n\ndef test_slow_fail():\n    time.sleep(2)\n"
                                                "    assert False\n")
    out = tmp_path / "out"
    out.write_text("")
    started = warm.start("pytest", ["-q", "-p", "no:cacheprovider", "test_slow_fail.py"],
                         env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path, out=out)
    server = multiprocessing.forkserver._forkserver._forkserver_pid
    time.sleep(0.5)
    os.kill(server, signal.SIGKILL)
    assert started.wait(60) == 1, out.read_text()
    assert "1 failed" in out.read_text()
    code, text, _ = run(tmp_path, "after", WARM_RUN="after")           # a new server serves the next run
    assert code == 0, text
