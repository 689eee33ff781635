"""What every public test shares: your rmsnorm.py as a fixture, a time limit per test, and a summary
that prints each failure's whole message, first failure first.

    RMSNORM_IMPL=path/to/rmsnorm.py     test another file than ../rmsnorm.py
    RMSNORM_TEST_TIMEOUT=120            seconds per test (default 30, as in the grader)
    MINI_TRITON_TRACEBACK=full          show the simulator's own frames in tracebacks
"""
import ast
import linecache
import os
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))             # rmsnorm_testkit, beside rmsnorm.py

from rmsnorm_testkit.compare import NO_PROGRESS_HINT, load_impl, timed_out  # noqa: E402
from rmsnorm_testkit.watch import Watch  # noqa: E402

TIME_LIMIT_S = float(os.environ.get("RMSNORM_TEST_TIMEOUT", 30))
SAMPLE_S = 0.25                  # how often the time limit looks at where your code is


def _impl_path():
    return Path(os.environ.get("RMSNORM_IMPL", HERE.parent / "rmsnorm.py")).resolve()


def pytest_sessionstart(session):
    """The autograder's static scan (rmsnorm_testkit/scan.py), before any test: a file it refuses scores 0, however
    well its tests go, so what it would refuse is said first, with the line and the rule."""
    from rmsnorm_testkit.scan import files_beside, scan_rules
    try:
        source = _impl_path().read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    missing, problems = scan_rules(source)
    beside = files_beside(source, _impl_path().parent)
    REFUSED.extend([*(message for _, message in problems), *beside])
    lines = []
    if problems:
        lines += [f"The autograder would refuse to run {_impl_path().name}, and give it 0 points (handout, section "
                  f"10):", *(f"  {message} (rule: {rule})" for rule, message in problems)]
    if beside:
        lines += [f"{_impl_path().name} imports a file of yours that the autograder will not have (you submit "
                  f"rmsnorm.py alone): its import would fail there, for 0 points:", *(f"  {m}" for m in beside)]
    if missing:
        lines += [f"{_impl_path().name} lacks names the assignment asks for (the autograder's test 0 lists them, for "
                  f"0 points; the tests of parts (a) and (b) launch the kernels by these names):",
                  *(f"  {message}" for message in missing)]
    _say(session, lines)


REFUSED = []                 # what the static scan would refuse, and imports of files beside rmsnorm.py: the run
                             # then fails, however its tests go


def _say(session, lines):
    out = session.config.pluginmanager.get_plugin("terminalreporter")
    for i, line in enumerate(lines):
        if out is not None:
            out.write_line(line, red=True, bold=i == 0)
        else:
            print(line)


def pytest_sessionfinish(session, exitstatus):
    """A file the autograder would refuse fails the run (exit status 1), even when every test passed."""
    if REFUSED and exitstatus == 0:
        session.exitstatus = 1


@pytest.fixture(scope="session")
def impl_path():
    """The path of the rmsnorm.py under test."""
    return _impl_path()


@pytest.fixture(scope="session")
def impl():
    """Your rmsnorm.py, on the backend it picks (a GPU if there is one, else mini_triton)."""
    return load_impl(_impl_path())


@pytest.fixture(scope="session")
def sim_impl():
    """Your rmsnorm.py on the mini_triton simulator, which counts memory traffic."""
    return load_impl(_impl_path(), backend="mini_triton")


# -- a time limit per test ---------------------------------------------------------------
class TestTimedOut(Exception):
    """A public test ran past its time limit (the message says where your code was)."""
    pending = ""                          # the message, for the timer thread, which can raise only a class

    def __init__(self, *args):
        super().__init__(*(args or (TestTimedOut.pending,)))


def _loop_around(path, line):
    """The first line of the innermost for/while loop of ``path`` that holds ``line``, or None."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    loops = [n.lineno for n in ast.walk(tree)
             if isinstance(n, (ast.For, ast.While)) and n.lineno <= line <= (n.end_lineno or n.lineno)]
    return max(loops, default=None)


def _where(frame) -> str:
    """' in rmsnorm_fwd_kernel, line 112 of rmsnorm.py (`c = start + cols`), inside the loop of line 110
    (`while start < n_cols:`)': the innermost frame of your file, and the loop it is in. When that frame
    is a helper called from a loop (a @triton.jit function, say), the caller and its loop are named too."""
    target = str(_impl_path())
    frames = []                                   # your file's frames, innermost first
    while frame is not None:
        if os.path.abspath(frame.f_code.co_filename) == target:
            frames.append(frame)
        frame = frame.f_back
    if not frames:
        return ""

    def at(f, file=""):
        code = linecache.getline(target, f.f_lineno).strip()
        return f"{f.f_code.co_name}, line {f.f_lineno}{file}" + (f" (`{code}`)" if code else "")
    where = f" in {at(frames[0], f' of {Path(target).name}')}"
    for f in frames:
        loop = _loop_around(target, f.f_lineno)
        if loop is None:
            continue
        if f is not frames[0]:
            where += f", called from {at(f)}"
        if loop != f.f_lineno:
            where += f", inside the loop of line {loop} (`{linecache.getline(target, loop).strip()}`)"
        break
    return where


def _timed_out(frame, watch) -> str:
    """The time-out message: where your code was, and, when a while loop's condition kept its values over the
    last samples, that the loop makes no progress (the grader says the same)."""
    stuck = watch.stuck()
    return timed_out(TIME_LIMIT_S, _where(frame) + (watch.progress() if stuck else ""),
                     hint=NO_PROGRESS_HINT if stuck else None)


@pytest.fixture(autouse=True)
def time_limit():
    """Stop a test after TIME_LIMIT_S with the grader's time-out message, sampling where your code is every
    SAMPLE_S: SIGALRM where there is one (Linux, macOS); on Windows a timer thread samples and raises the
    same exception in the test's thread."""
    watch, deadline = Watch(str(_impl_path()), SAMPLE_S), time.monotonic() + TIME_LIMIT_S
    alarm = os.environ.get("RMSNORM_TEST_TIMER", "alarm") == "alarm"      # "thread": what Windows gets
    if alarm and hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
        def tick(signum, frame):
            __tracebackhide__ = True          # pytest: the traceback ends at your line, not here
            watch.sample(frame)
            if time.monotonic() >= deadline:
                signal.setitimer(signal.ITIMER_REAL, 0)
                raise TestTimedOut(_timed_out(frame, watch))
        old = signal.signal(signal.SIGALRM, tick)
        signal.setitimer(signal.ITIMER_REAL, min(SAMPLE_S, TIME_LIMIT_S), SAMPLE_S)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
        return
    import ctypes
    target, done = threading.get_ident(), threading.Event()

    def sample():
        while not done.wait(SAMPLE_S):
            frame = sys._current_frames().get(target)
            watch.sample(frame)
            if time.monotonic() >= deadline:
                TestTimedOut.pending = _timed_out(frame, watch)
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(TestTimedOut))
                return
    timer = threading.Thread(target=sample, daemon=True)
    timer.start()
    try:
        yield
    finally:
        done.set()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.excinfo is not None and call.excinfo.errisinstance(TestTimedOut):
        # the tests after it would most likely wait out their time limit in the same loop
        items = item.session.items
        later = len(items) - 1 - items.index(item) if item in items else 0
        _NOT_RUN[:] = [item.nodeid, later]
        item.session.shouldstop = (f"{item.name} timed out" + (
            f", and the {later} test{'s' * (later != 1)} after it did not run" if later else "") +
            ": fix it first, then run the tests again")
    return outcome


_NOT_RUN = []                             # [the test that timed out, how many tests after it did not run]


def pytest_collection_modifyitems(items):
    # A last resort for code stuck outside Python (where no alarm reaches): pytest-timeout ends the run.
    for item in items:
        item.add_marker(pytest.mark.timeout(2 * TIME_LIMIT_S + 30, method="thread"))


# -- failures in full, first one first ---------------------------------------------------------
def pytest_configure(config):
    # this file prints failures in full below; pytest's own summary would cut them at the screen's edge
    if config.option.reportchars in ("fE", "fEsxXw"):
        config.option.reportchars = config.option.reportchars.replace("f", "")


def _message(report) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    return crash.message if crash is not None else str(report.longrepr).strip().splitlines()[-1]


def pytest_terminal_summary(terminalreporter):
    if REFUSED:
        terminalreporter.write_sep("=", f"the autograder would refuse this file, 0 points however the tests go: "
                                        f"{REFUSED[0]}", red=True)
    failed = terminalreporter.stats.get("failed", [])
    if not failed:
        return
    tw = terminalreporter
    if _NOT_RUN and _NOT_RUN[1]:
        nodeid, later = _NOT_RUN
        tw.write_sep("=", f"{later} test{'s' * (later != 1)} did not run: the run stopped at the time-out of "
                          f"{nodeid.split('::')[-1]}. Fix it, then run them again (make test)", yellow=True)
    width = max(60, tw.config.get_terminal_writer().fullwidth - 4)
    tw.write_sep("=", f"{len(failed)} failed: fix the first one first (later failures often follow from it)")
    if all("test_part_d.py" in r.nodeid for r in failed) and len(terminalreporter.stats.get("passed", [])) > 0:
        tw.write_line("Every failure is part (d)'s, the extra credit: the other tests that ran pass. Part (d) is "
                      "optional; a submission without it can earn every regular point.", green=True)
    previous = None
    for report in failed:
        tw.write_line(f"FAILED {report.nodeid}", red=True, bold=True)
        message = _message(report)
        if message == previous:
            tw.write_line("    (the same message as the test above)")
            continue
        previous = message
        for line in message.splitlines():
            for piece in textwrap.wrap(line, width, break_on_hyphens=False, break_long_words=False) or [""]:
                tw.write_line(f"    {piece}")
