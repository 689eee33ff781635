"""The grader's sandbox and job runner survive hostile submissions, and its own failures are
autograder errors, never a student's zero. Run as root, these tests use the sandbox accounts
(`make sandbox-accounts`); as an ordinary user, the submission runs as that user.

One file of about 730 lines, kept whole: every test here attacks the one sandbox (sandbox.py, isolation.py,
runner.py) through the same helpers and fixtures defined at its top, and its sections (the judge's process,
the GPU jobs' compile cache) are marked below."""
import ast
import os
import shutil
import signal
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

from rmsnorm_testkit import compare

from autograder import TESTKIT, accounts, config, isolation, runner, runtime, sandbox
from autograder.errors import GraderError
from conftest import ROOT

pytestmark = pytest.mark.usefixtures("sandbox_accounts")      # grades through the sandbox (conftest.py)

FAST = sandbox.Limits(timeout_s=8, cpu_s=20)
AS_ROOT = os.geteuid() == 0


@pytest.fixture
def box():
    """A folder the sandbox account can enter and write (pytest's tmp_path is private to root)."""
    d = Path(tempfile.mkdtemp(prefix="rmsnorm-sbx-test-"))
    d.chmod(0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def child(folder, code, limits=FAST, **kw):
    script = folder / "evil.py"
    script.write_text(textwrap.dedent(code))
    script.chmod(0o644)
    with accounts.for_job() as account:
        return sandbox.run(sandbox.python_argv(script), cwd=folder, limits=limits, account=account, **kw)



def test_infinite_loop_that_ignores_sigalrm_and_catches_baseexception_is_killed(box):
    r = child(box, """
        import signal
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            try:
                while True:
                    pass
            except BaseException:
                pass
    """, sandbox.Limits(timeout_s=2, cpu_s=20))
    assert r.timed_out and r.returncode is None and r.seconds < 10


COMPILES = """
    import time
    print("rmsnorm-job: compiled {said}", flush=True)
    time.sleep({sleep})
    print("done", flush=True)
"""

STILL_COMPILING = """
    import time
    print("rmsnorm-job: compiled 0.5", flush=True)
    print("rmsnorm-job: compiling 0.5", flush=True)
    time.sleep({sleep})
    print("done", flush=True)
"""


@pytest.mark.parametrize("said, sleep, finishes", [
    (3.0, 3.5, True),             # 2 s to run and 3 s compiling: the compiling is not counted
    (0.0, 3.5, False),            # nothing compiled: the plain limit
    (1000.0, 6.0, False),         # a line the submission forged: granted up to compile_s only
])
def test_time_a_job_says_it_spent_compiling_is_added_to_its_limit_up_to_a_cap(box, said, sleep, finishes):
    from autograder.job.wire.protocol import CompileClock
    limits = sandbox.Limits(timeout_s=2, cpu_s=20, compile_s=3.0)
    r = child(box, COMPILES.format(said=said, sleep=sleep), limits, extra=CompileClock())
    assert r.timed_out is not finishes and ("done" in r.stdout) is finishes, r
    assert r.seconds < 2 + 3 + 3


@pytest.mark.parametrize("sleep, finishes", [
    (4.0, True),                  # one compile still under way for 4 s: its time counts while it runs
    (9.0, False),                 # one that goes past the cap: stopped at the limit plus the cap
])
def test_a_compile_still_under_way_counts_as_compiling_up_to_the_cap(box, sleep, finishes):
    """A single autotune config has compiled for over six minutes on the H200 (docs/perf.md): a clock that
    counted finished compiles only stopped that job in the middle of its compile, as if the kernel ran."""
    from autograder.job.wire.protocol import CompileClock
    limits = sandbox.Limits(timeout_s=2, cpu_s=30, compile_s=4.0)
    clock = CompileClock()
    r = child(box, STILL_COMPILING.format(sleep=sleep), limits, extra=clock)
    assert r.timed_out is not finishes and ("done" in r.stdout) is finishes, r
    assert r.seconds < 2 + 4 + 3
    if not finishes:
        assert clock.compiling and clock.seconds >= 4.0, vars(clock)


def test_the_compile_clock_counts_finished_compiles_and_the_one_under_way():
    from autograder.job.wire.protocol import COMPILED, COMPILING, RUNNING, CompileClock
    now = [100.0]
    clock = CompileClock(now=lambda: now[0])
    assert clock("") == 0.0 and clock(f"{COMPILED}oops\n") == 0.0 and clock(f"{COMPILED}-50\n") == 0.0
    out = f"x\n{COMPILED}1.5\n{COMPILED}12.0\n{RUNNING}running y\n"
    assert clock(out) == 12.0 and not clock.compiling
    out += f"{COMPILING}12.0\n"
    assert clock(out) == 12.0 and clock.compiling          # counted from when the grader saw the line
    now[0] += 30.0
    assert clock(out) == 42.0 and clock.seconds == 42.0
    assert clock(out + f"{COMPILED}41.0\n") == 41.0 and not clock.compiling
    assert clock(out + f"{RUNNING}running z\n") == 12.0 and not clock.compiling   # a compile that raised


def test_the_gpu_job_s_compile_clock_prints_the_seconds_triton_spent_compiling(capsys):
    """Triton's hooks before and after each compile (triton.knobs.runtime) report the time between them; they
    never ask Triton to skip a compile. Where Triton has no such hooks the clock says it is not there."""
    knobs = pytest.importorskip("triton.knobs")
    from autograder.job.main import compile_clock
    from autograder.job.wire.protocol import COMPILED, COMPILING, CompileClock
    saved = knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook
    try:
        assert compile_clock()
        before, after = knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook
        assert before(key="k", repr="kernel", fn=None, compile={}, is_manual_warmup=False,
                      already_compiled=False) is False
        __import__("time").sleep(0.2)
        after(key="k", repr="kernel", fn=None, compile={}, is_manual_warmup=False, already_compiled=False)
        out = capsys.readouterr().out
        assert out.index(COMPILING) < out.index(COMPILED) and 0.15 <= CompileClock()(out) < 5
    finally:
        knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook = saved


def test_children_it_spawns_die_with_it(box):
    marker = box / "alive"
    r = child(box, f"""
        import os, time
        if os.fork() == 0:
            time.sleep(3)
            open({str(marker)!r}, "w").write("still alive")
            os._exit(0)
        os._exit(0)
    """)
    assert r.returncode == 0
    import time
    time.sleep(4)
    assert not marker.exists(), "a forked child outlived the job"


def test_huge_output_is_capped(box):
    r = child(box, """
        import sys
        for _ in range(20 * 1024):
            sys.stdout.write("x" * 1024)
    """)
    assert r.returncode == 0 and len(r.stdout) <= sandbox.OUTPUT_CAP


def test_memory_limit_stops_a_memory_bomb(box):
    """50 GB asked for, 1 GB at a time: the job's address-space cap stops it at the cap."""
    r = child(box, """
        blocks = []
        for _ in range(50):
            blocks.append(bytearray(1024 ** 3))
    """, sandbox.Limits(timeout_s=20, memory_bytes=512 * 1024 ** 2))
    assert not r.timed_out and r.returncode != 0 and "MemoryError" in r.stderr


def test_file_size_limit(box):
    """10 GB written, 64 MB at a time: the job's file-size cap stops it at the cap, and the file holds no more."""
    r = child(box, """
        block = b"x" * (64 * 1024 * 1024)
        with open("big", "wb") as f:
            for _ in range(160):
                f.write(block)
    """, sandbox.Limits(timeout_s=20, file_bytes=1024 * 1024))
    assert r.returncode == -signal.SIGXFSZ or "File too large" in r.stderr, (r.returncode, r.stderr[-500:])
    assert (box / "big").stat().st_size <= 1024 * 1024


def test_a_fork_bomb_costs_its_job_only(box):
    """A job that forks without end: its process cap stops it, and a job started beside it runs as usual."""
    bomb, calm = box / "bomb", box / "calm"
    bomb.mkdir(mode=0o777)
    calm.mkdir(mode=0o777)
    results = {}
    t = threading.Thread(target=lambda: results.update(bomb=child(bomb, """
        import os, time
        made = 0
        for _ in range(100000):
            try:
                if os.fork() == 0:
                    time.sleep(5)
                    os._exit(0)
                made += 1
            except OSError:
                break
        print("forked", made)
    """, sandbox.Limits(timeout_s=20, cpu_s=20, processes=32))))
    t.start()
    time.sleep(0.5)
    assert child(calm, "print('calm')").stdout.strip() == "calm"
    t.join()
    made = int(results["bomb"].stdout.split()[1])
    assert 0 < made <= 32, results["bomb"]


SOLUTION = ROOT / "solution" / "rmsnorm.py"


def inputs():
    torch.manual_seed(0)
    return {"x": torch.randn(37, 100), "g": torch.randn(100)}


def test_job_runs_the_solution_and_returns_plain_tensors():
    out = runner.run_job(SOLUTION, {"fwd": {"op": "forward", "tensors": {"x": "x", "g": "g"}}}, inputs(),
                         limits=sandbox.Limits(timeout_s=120))
    assert out.error is None and out.task_error("fwd") is None, (out.error, out.run.stderr[-2000:])
    x, g = inputs()["x"], inputs()["g"]
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * g
    torch.testing.assert_close(out.tensors["fwd.y"], ref)
    launches = out.info["fwd"]["fwd"]["launches"]
    assert launches and launches[0]["args"]["x_ptr"]["loaded"] == 37 * 100
    assert launches[0]["args"]["x_ptr"]["role"] == "x" and launches[0]["args"]["y_ptr"]["role"] == "y"


@pytest.mark.parametrize("code,expect", [
    ("import os\nos._exit(0)\n", "the submission ended the process while importing rmsnorm.py (exit code 0"),
    ("import os\nos._exit(3)\n", "the submission crashed while importing rmsnorm.py (exit code 3)"),
    ("raise SystemExit(0)\n", "failed: SystemExit: 0 (rmsnorm.py line 1): rmsnorm.py must not end the process"),
    ("x = [0] * 10 ** 10\n", "MemoryError:  (rmsnorm.py line 1): the grader caps a job's memory at "),
    ("def broken(:\n", "importing rmsnorm.py failed: SyntaxError"),
    ("import not_a_module\n", "importing rmsnorm.py failed: ModuleNotFoundError"),
    ("while True:\n    pass\n", "timed out after 8 s while importing rmsnorm.py: an infinite loop"),
])
def test_job_reports_broken_submissions_in_plain_words(tmp_path, code, expect):
    sub = tmp_path / "rmsnorm.py"
    sub.write_text(code)
    out = runner.run_job(sub, {"fwd": {"op": "forward", "tensors": {"x": "x", "g": "g"}}}, inputs(),
                         limits=sandbox.Limits(timeout_s=8, cpu_s=20))
    assert out.error is not None and expect in out.error, out.error


def test_outputs_of_a_tensor_subclass_are_refused_not_trusted(tmp_path):
    sub = tmp_path / "rmsnorm.py"
    sub.write_text(textwrap.dedent("""
        import torch
        class Liar(torch.Tensor):
            def __eq__(self, other):
                return True
        def rmsnorm_forward(x, g, eps=1e-5):
            return torch.zeros_like(x).as_subclass(Liar), torch.zeros(x.shape[0]).as_subclass(Liar)
    """))
    out = runner.run_job(sub, {"fwd": {"op": "forward", "tensors": {"x": "x", "g": "g"}}}, inputs(),
                         limits=sandbox.Limits(timeout_s=60))
    assert "fwd.y" not in out.tensors
    error = out.task_error("fwd")
    assert "Liar, a subclass of torch.Tensor: return a plain torch.Tensor" in error, error


def test_a_job_that_runs_out_of_cpu_time_is_told_so_not_that_it_crashed(tmp_path):
    sub = tmp_path / "rmsnorm.py"
    sub.write_text("def rmsnorm_forward(x, g, eps=1e-5):\n    while True:\n        pass\n")
    out = runner.run_job(sub, {"fwd": {"op": "forward", "tensors": {"x": "x", "g": "g"}}}, inputs(),
                         limits=sandbox.Limits(timeout_s=60, cpu_s=6))
    assert out.error.startswith("ran out of CPU time (6 s) while running rmsnorm_forward on x of shape (37, 100) "
                                "fp32: an infinite loop"), out.error
    assert out.run.seconds < 30


def test_a_job_runs_as_a_sandbox_account_when_root_and_as_the_grader_otherwise(box):
    r = child(box, "import os; print(os.getuid(), os.getgid(), os.getgroups())")
    uid, gid, groups = r.stdout.split(maxsplit=2)
    if AS_ROOT:
        pool = {pw.pw_uid for pw in accounts.existing()}
        assert int(uid) in pool and int(uid) != 0 and groups.strip() == "[]"
    else:
        assert int(uid) == os.getuid()


def test_two_jobs_at_once_do_not_kill_each_other(box):
    """A job's clean-up kills its own processes only: a slow job survives a fast one ending beside it."""
    slow, fast = box / "slow", box / "fast"
    slow.mkdir()
    fast.mkdir()
    results = {}
    t = threading.Thread(target=lambda: results.update(slow=child(slow, """
        import time
        time.sleep(4)
        print("slow job finished")
    """, sandbox.Limits(timeout_s=20, cpu_s=20))))
    t.start()
    for _ in range(3):
        assert child(fast, "print('fast')").stdout.strip() == "fast"
    t.join()
    assert results["slow"].returncode == 0 and "slow job finished" in results["slow"].stdout, results["slow"]


@pytest.mark.skipif(not AS_ROOT, reason="as an ordinary user the submission runs as that user: no account needed")
def test_as_root_without_sandbox_accounts_no_submission_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(config, "ACCOUNT_PREFIX", "rmsnorm-nosuch")
    sub = tmp_path / "rmsnorm.py"
    sub.write_text("import os\nassert os.getuid() != 0\n")
    with pytest.raises(GraderError, match="none of the sandbox accounts rmsnorm-nosuch0"):
        runner.run_job(sub, {}, {})
    with pytest.raises(GraderError, match="refusing to run a submission as root"):
        sandbox.run(sandbox.python_argv(sub), cwd=tmp_path, limits=FAST)


LEAKY = textwrap.dedent("""
    import os
    try:
        found = "READ:" + open({path!r}).read().strip()
    except OSError as e:
        found = "DENIED:" + type(e).__name__ + " / sees " + ",".join(sorted(os.listdir("/")))
    raise ImportError(found)
""")


NEEDS_NAMESPACES = pytest.mark.skipif(not isolation.available(), reason="a job's namespaces need Linux, as root or as "
                                                                      "an ordinary user with user namespaces allowed")


@NEEDS_NAMESPACES
def test_a_job_cannot_read_a_world_readable_file_outside_its_folder(tmp_path, monkeypatch):
    """Another student's submission left world-readable in /tmp (or another job's folder there): the job's private
    view does not hold it."""
    def run(sub):
        return runner.run_job(sub, {}, {}, limits=config.sim_limits(torch.cuda.is_available()))
    other = Path(tempfile.mkdtemp(prefix="other-student-"))
    try:
        other.chmod(0o755)
        (other / "rmsnorm.py").write_text("OTHER-STUDENTS-KERNEL\n")
        (other / "rmsnorm.py").chmod(0o644)
        sub = tmp_path / "rmsnorm.py"
        sub.write_text(LEAKY.format(path=str(other / "rmsnorm.py")))
        outcome = run(sub)
        assert "DENIED:FileNotFoundError" in outcome.error and "OTHER-STUDENTS-KERNEL" not in outcome.error, \
            outcome.error
        seen = set(outcome.error.split("/ sees ")[1].split(" ")[0].split(","))
        allowed = {*isolation.SYSTEM, *isolation.DEVICES, "tmp"} | {
            p.parts[1] for p in isolation.readable_paths(runtime.root())}
        assert {"usr", "tmp", "dev"} <= seen <= allowed, (seen, allowed)
        monkeypatch.setenv(isolation.OFF_VAR, "off")       # without the private view, the account reads it
        isolation.available.cache_clear()
        try:
            assert "READ:OTHER-STUDENTS-KERNEL" in run(sub).error
        finally:
            monkeypatch.delenv(isolation.OFF_VAR)
            isolation.available.cache_clear()
    finally:
        shutil.rmtree(other)


@NEEDS_NAMESPACES
def test_a_job_cannot_read_the_graders_home(monkeypatch):
    """A file in a folder only the grading user may enter, as a home is: the job's view does not hold it. Without
    the view, a sandbox account (as root) is refused by the folder's mode, and an ordinary user's job reads it."""
    home = Path(tempfile.mkdtemp(prefix="rmsnorm-home-"))           # mode 700, the grading user's
    try:
        (home / "notes.txt").write_text("THE-TAS-NOTES\n")
        sub = home.parent / f"{home.name}-job" / "rmsnorm.py"
        sub.parent.mkdir(mode=0o755)
        sub.write_text(LEAKY.format(path=str(home / "notes.txt")))
        sub.chmod(0o644)
        limits = config.sim_limits(torch.cuda.is_available())
        assert "DENIED:FileNotFoundError" in runner.run_job(sub, {}, {}, limits=limits).error
        monkeypatch.setenv(isolation.OFF_VAR, "off")
        isolation.available.cache_clear()
        try:
            error = runner.run_job(sub, {}, {}, limits=limits).error
            assert ("DENIED:PermissionError" if AS_ROOT else "READ:THE-TAS-NOTES") in error, error
        finally:
            monkeypatch.delenv(isolation.OFF_VAR)
            isolation.available.cache_clear()
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(home.parent / f"{home.name}-job", ignore_errors=True)


SLEEPS_WITH_A_SECRET = textwrap.dedent("""
    # SECRET-OF-JOB-A
    import time
    time.sleep(6)
    raise ImportError("A done")
""")
SNOOPS = textwrap.dedent("""
    import glob, os, tempfile, time
    time.sleep(2)
    found = []
    for path in glob.glob(os.path.join({tmp!r}, "rmsnorm-job-*", "rmsnorm.py")):
        try:
            if "SECRET-OF-" + "JOB-A" in open(path).read():     # not this file's own text
                found.append("READ")
        except OSError as e:
            found.append(type(e).__name__)
    raise ImportError("SNOOPED:" + (",".join(found) or "nothing"))
""")


@NEEDS_NAMESPACES
def test_a_job_cannot_read_another_jobs_folder(tmp_path, monkeypatch):
    """Two jobs at once: the second looks for the first's folder (its submission) where job folders live. In its
    private view it finds none; without the view, a sandbox account (as root) is refused by the folder's mode,
    and an ordinary user's job reads it."""
    a, b = tmp_path / "a" / "rmsnorm.py", tmp_path / "b" / "rmsnorm.py"
    for path, text in ((a, SLEEPS_WITH_A_SECRET), (b, SNOOPS.format(tmp=tempfile.gettempdir()))):
        path.parent.mkdir()
        path.write_text(text)
    limits = config.sim_limits(torch.cuda.is_available())

    def snoop():
        first = threading.Thread(target=runner.run_job, args=(a, {}, {}), kwargs={"limits": limits})
        first.start()
        try:
            return runner.run_job(b, {}, {}, limits=limits).error.split("SNOOPED:")[1].split()[0]
        finally:
            first.join()
    assert snoop() == "nothing"
    monkeypatch.setenv(isolation.OFF_VAR, "off")
    isolation.available.cache_clear()
    try:
        assert snoop() == ("nothing" if AS_ROOT else "READ")     # as root: a folder of another account (mode 700)
    finally:
        monkeypatch.delenv(isolation.OFF_VAR)
        isolation.available.cache_clear()


CONNECTS = textwrap.dedent("""
    import socket
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
        found = "CONNECTED"
    except OSError as e:
        found = "REFUSED:" + type(e).__name__ + ":" + str(e.errno)
    raise ImportError(found)
""")


@NEEDS_NAMESPACES
def test_a_job_cannot_connect_to_a_socket_of_the_machine(tmp_path, monkeypatch):
    """A server listening on the grading machine's loopback: the job's own network namespace has no way to it."""
    import socket
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    try:
        sub = tmp_path / "rmsnorm.py"
        sub.write_text(CONNECTS.format(port=server.getsockname()[1]))
        limits = config.sim_limits(torch.cuda.is_available())
        outcome = runner.run_job(sub, {}, {}, limits=limits)
        assert "REFUSED:OSError:101" in outcome.error, outcome.error          # ENETUNREACH: no interface is up
        monkeypatch.setenv(isolation.OFF_VAR, "off")       # without the job's namespaces, it connects
        isolation.available.cache_clear()
        try:
            assert "CONNECTED" in runner.run_job(sub, {}, {}, limits=limits).error
        finally:
            monkeypatch.delenv(isolation.OFF_VAR)
            isolation.available.cache_clear()
    finally:
        server.close()


LISTS_PROCESSES = textwrap.dedent("""
    import os, subprocess, sys, time
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    time.sleep(0.5)
    names = []
    for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            names.append(str(pid) + "=" + open(f"/proc/{{pid}}/cmdline", "rb").read().split(b"\\0")[0].decode())
        except OSError:
            pass
    raise ImportError("PROCESSES:" + " ".join(names) + " MINE:" + str(os.getpid()) + " MARK:{mark}")
""")


@NEEDS_NAMESPACES
def test_a_job_sees_only_its_own_processes(tmp_path, monkeypatch):
    """The submission lists /proc: it finds the job's few processes, numbered from 1, and not the grader nor any
    other process of the machine (their command lines would show what runs there)."""
    sub = tmp_path / "rmsnorm.py"
    sub.write_text(LISTS_PROCESSES.format(mark="pids"))
    limits = config.sim_limits(torch.cuda.is_available())

    def listed():
        error = runner.run_job(sub, {}, {}, limits=limits).error
        return error.split(" MINE:")[1].split()[0], {e.split("=")[0] for e in error.split("PROCESSES:")[1].split(
            " MINE:")[0].split()}
    mine, seen = listed()                                   # the job, the submission's process, its sleeping child
    assert len(seen) <= 4 and max(map(int, seen)) <= 4 and mine in seen, (mine, seen)
    monkeypatch.setenv(isolation.OFF_VAR, "off")            # without the job's namespaces, it sees the machine's
    isolation.available.cache_clear()
    try:
        mine, seen = listed()
        assert mine != "1" and str(os.getpid()) in seen
    finally:
        monkeypatch.delenv(isolation.OFF_VAR)
        isolation.available.cache_clear()


READS_NAMESPACES = textwrap.dedent("""
    import os
    raise ImportError("NS:" + " ".join(n + "=" + os.readlink("/proc/self/ns/" + n) for n in {names!r}))
""")
GUIDE_NAMES = {"mount": "mnt", "process id": "pid", "network": "net", "IPC": "ipc", "user": "user"}


def _guide_isolation_table():
    """{namespace: (as root, as an ordinary user)} from docs/ta-guide.md's "Isolation" table: does a job get it?"""
    text = (ROOT / "docs" / "ta-guide.md").read_text().split("### Isolation", 1)[1].split("\n#", 1)[0]
    rows = [line.split("|")[1:-1] for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    return {r[0].strip(): (r[2].strip().startswith("yes"), r[3].strip().startswith("yes")) for r in rows[1:]}


@NEEDS_NAMESPACES
def test_a_job_gets_the_namespaces_the_ta_guide_lists(tmp_path):
    """docs/ta-guide.md's "Isolation" table, row by row, against a job's own /proc/self/ns: a namespace the
    table gives the job (in this mode: root or an ordinary user) differs from the grader's, any other is the
    grader's own."""
    table = _guide_isolation_table()
    assert set(table) == set(GUIDE_NAMES), table
    names = list(GUIDE_NAMES.values())
    sub = tmp_path / "rmsnorm.py"
    sub.write_text(READS_NAMESPACES.format(names=names))
    error = runner.run_job(sub, {}, {}, limits=config.sim_limits(torch.cuda.is_available())).error
    job = dict(pair.split("=", 1) for pair in error.split("NS:")[1].split()[:len(names)])
    for row, name in GUIDE_NAMES.items():
        own = job[name] != os.readlink(f"/proc/self/ns/{name}")
        assert own == table[row][0 if AS_ROOT else 1], (row, job[name])


def test_the_runtime_holds_the_job_the_simulator_and_the_files_they_share_only(tmp_path):
    folder = runtime.copy_into(tmp_path / "runtime")
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    job = {p.relative_to(ROOT).as_posix() for p in (ROOT / "autograder" / "job").rglob("*.py")}
    assert {f for f in files if not f.startswith("mini_triton/")} == {
        "autograder/__init__.py", *job,
        *(f"starter/rmsnorm_testkit/{name}.py" for name in ("__init__", *runtime.FOR_JOBS))}
    assert "mini_triton/__init__.py" in files and (folder / runtime.ENTRY).is_file()


def imports_of(path, package=""):
    """(module, line) of every import in ``path``. A relative import is ".name", or, given the ``package`` the
    file is in, that package's module (``from .text import x`` in rmsnorm_testkit: rmsnorm_testkit.text); a name
    imported from a package (``from . import host``, ``from rmsnorm_testkit import text``) is its module."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                module = f"{package}.{node.module or ''}" if package else "." * node.level + (node.module or "")
            else:
                module = node.module
            module = module.rstrip(".")
            if node.module is None or node.module == "rmsnorm_testkit":
                out += [(f"{module}.{a.name}" if module else f".{a.name}", node.lineno) for a in node.names]
            else:
                out.append((module, node.lineno))
    return out


@pytest.mark.parametrize("path", sorted((ROOT / "autograder" / "job").rglob("*.py")) +
                         [TESTKIT / f"{name}.py" for name in runtime.FOR_JOBS],
                         ids=lambda p: p.relative_to(ROOT).as_posix().removeprefix("autograder/job/"))
def test_the_job_imports_nothing_of_the_grader_beyond_the_runtime(path):
    """What a job runs must import only what the runtime folder holds: the job, the test kit's modules it holds
    (each of them only those before it), the simulator, the standard library, torch and Triton (the GPU job runs
    on it); never another module of the grader."""
    kit = [f"rmsnorm_testkit.{name}" for name in runtime.FOR_JOBS]
    in_kit = path.parent == TESTKIT
    allowed = kit[:kit.index(f"rmsnorm_testkit.{path.stem}")] if in_kit else kit
    found = imports_of(path, "rmsnorm_testkit" if in_kit else "")
    assert found or path.name == "__init__.py" or path in (TESTKIT / "text.py", ROOT / "autograder/job/wire/phases.py")
    for module, line in found:
        top = module.split(".")[0]
        ok = (module in allowed or (not in_kit and (module.startswith(".") or module.startswith("autograder.job")))
              or top in ("torch", "mini_triton", "triton") or top in sys.stdlib_module_names)
        assert ok, f"{path.name} line {line} imports {module}"


# -- the judge's process: what the submission's process holds, and what feedback may carry ------------------
SNOOP = '''
_o = __builtins__['open'] if isinstance(__builtins__, dict) else __builtins__.open


def _read(path):
    try:
        return _o(path, "rb").read().decode(errors="replace").replace("\\0", " ")
    except OSError as e:
        return f"<{type(e).__name__}>"


def rmsnorm_forward(x, g, eps=1e-5):
    import os
    ancestors, pid = [], os.getpid()
    for _ in range(12):
        ancestors.append(_read(f"/proc/{pid}/cmdline"))
        try:
            pid = int(_read(f"/proc/{pid}/stat").rsplit(")", 1)[1].split()[1])
        except (ValueError, IndexError):
            break
    raise RuntimeError("job.json: " + _read("job.json")[:300] + " inputs.pt: " + _read("inputs.pt")[:40]
                       + " | " + " | ".join(ancestors))
'''


def test_the_submissions_process_holds_no_task_table_and_its_errors_no_grader_paths(tmp_path):
    """A submission (past the scan) that reads the job's files and every ancestor's command line into its
    error: the task table and the inputs are gone before it is imported, and the grader's paths are
    scrubbed from the feedback."""
    sub = tmp_path / "rmsnorm.py"
    sub.write_text(SNOOP)
    out = runner.run_job(sub, {"fwd_secret_case": {"op": "forward", "tensors": {"x": "x", "g": "g"}}}, inputs(),
                         limits=sandbox.Limits(timeout_s=60))
    error = out.task_error("fwd_secret_case")
    assert error.startswith("RuntimeError: job.json: <"), error
    assert "fwd_secret_case" not in error and "inputs.pt: <" in error, error
    for private in (str(ROOT), str(runtime.root())):
        assert private not in error, (private, error)
    assert "<grader>" in error


def test_scrub_hides_this_process_s_ancestors_paths_and_the_given_ones():
    from autograder.job.wire.errors import scrub
    own = [a for a in Path("/proc/self/cmdline").read_bytes().decode().split("\0") if "/" in a and len(a) >= 6]
    text = " and ".join(own + [f"{ROOT}/autograder/hidden", "/srv/secret/folder/x.py"])
    clean = scrub(text, extra=(str(ROOT), "/srv/secret/folder"))
    assert str(ROOT) not in clean and "/srv/secret" not in clean, clean
    assert not [a for a in own if a in clean], clean


def test_a_gpu_job_s_time_out_names_compiling_and_not_the_simulator():
    on_gpu, on_sim = compare.timed_out(300, " while running rmsnorm", on_gpu=True), compare.timed_out(30)
    assert "compiling a great many kernels" in on_gpu and "simulator" not in on_gpu
    assert "the simulator runs a kernel one block operation at a time" in on_sim



@pytest.mark.parametrize("compiling", [True, False])
def test_a_gpu_job_stopped_in_the_middle_of_a_compile_is_told_it_was_compiling(tmp_path, compiling):
    """fla's file at N = 32768 was stopped while one autotune config compiled, and was told "an infinite loop".
    A job stopped while Triton compiled is told so, with what to change; one stopped after its compiles is not."""
    from autograder.job.wire.protocol import COMPILED, COMPILING, READY, RUNNING, CompileClock
    now = [0.0]
    clock = CompileClock(now=lambda: now[0])
    out = f"{READY}\n{RUNNING}running rmsnorm on x of shape (64, 32768) fp32\n{COMPILING}97.0\n"
    out += "" if compiling else f"{COMPILED}98.0\n"
    clock(out)
    now[0] += 1300.0
    clock(out)
    limits = config.GPU_LIMITS
    res = sandbox.Result(None, out, "", True, limits.timeout_s + 1200.0, 0.0, limits)
    error = runner._collect(tmp_path, res, limits, b"k", None, clock).error
    assert error.startswith("timed out after 300 s while running rmsnorm on x of shape (64, 32768) fp32"), error
    assert ("Triton was still compiling when the time ran out" in error) is compiling, error
    assert ("infinite loop" in error) is not compiling, error
    if compiling:
        assert "Triton still compiling, 1397 s of compiling so far, of which 1200 s are not counted" in error

# -- a grading's GPU jobs share what Triton compiled -----------------------------------------------------------
CACHE_WRITER = '''
import os
_o = __builtins__['open'] if isinstance(__builtins__, dict) else __builtins__.open
_d = os.path.join(os.environ["HOME"], "triton-cache", "k")
try:
    _seen = _o(os.path.join(_d, "a.bin")).read()
except OSError as e:
    _seen = type(e).__name__
os.makedirs(_d, exist_ok=True)
_o(os.path.join(_d, "a.bin"), "w").write(_seen + "+")
if not os.path.lexists(os.path.join(_d, "link")):
    os.symlink("/etc/hostname", os.path.join(_d, "link"))
raise RuntimeError("saw " + _seen)
'''


def test_a_jobs_compile_cache_is_carried_to_the_next_job_of_the_grading_without_its_links(tmp_path):
    """What one job of a grading wrote to its Triton cache is there, its own account's, when the next job
    starts: an autotuned file compiles once per grading. Links are not carried."""
    sub = tmp_path / "rmsnorm.py"
    sub.write_text(CACHE_WRITER)
    carried = tmp_path / "compiled"
    carried.mkdir()
    errors = [runner.run_job(sub, {}, {}, limits=sandbox.Limits(timeout_s=60), compile_cache=carried).error
              for _ in range(2)]
    assert "saw FileNotFoundError" in errors[0] and "saw FileNotFoundError+" not in errors[0], errors
    assert "saw FileNotFoundError+" in errors[1], errors
    assert (carried / "k" / "a.bin").read_text() == "FileNotFoundError++"
    assert not (carried / "k" / "link").exists() and not (carried / "k" / "link").is_symlink()


def test_carrying_a_cache_copies_regular_files_only_and_stops_at_its_cap(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "a").mkdir(parents=True)
    (src / "a" / "small.bin").write_bytes(b"x" * 10)
    (src / "a" / "big.bin").write_bytes(b"y" * 100)
    os.mkfifo(src / "a" / "pipe")
    (src / "a" / "link").symlink_to(src / "a" / "small.bin")
    runner.carry_cache(src, dst, cap=50)
    assert sorted(p.name for p in (dst / "a").iterdir()) == ["small.bin"]
    assert (dst / "a" / "small.bin").read_bytes() == b"x" * 10


@pytest.mark.parametrize("euid", [0, 1000], ids=["as_root", "as_an_ordinary_user"])
def test_without_namespaces_the_grader_says_once_what_a_submission_can_read(monkeypatch, euid):
    """A machine that refuses the job's namespaces (a container; user namespaces restricted, as AppArmor does on
    Ubuntu 24.04): grading goes on, and the grader says once what a submission can then read, naming the TA
    guide's section that says how to allow them."""
    monkeypatch.setattr(isolation, "available", lambda: False)
    monkeypatch.setattr(isolation, "_NOTED", [])
    monkeypatch.setattr(isolation.os, "geteuid", lambda: euid)
    said = isolation.note()
    assert said is not None and isolation.note() is None                    # once per process
    if euid:
        assert "user namespaces" in said and "can read every file you can" in said and '"Isolation"' in said
        assert "### Isolation" in (ROOT / "docs" / "ta-guide.md").read_text()
    else:
        assert "every world-readable file" in said
