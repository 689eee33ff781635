"""Pytest in a warm interpreter: torch imported once per grader process, each run a fresh fork.

A run of ``python -m pytest`` spends about 2 s of CPU importing torch before its first test: more than the
simulator spends grading a whole submission. So a grader process keeps one server process that has imported
torch and pytest (multiprocessing's fork server, started on first use), and runs each pytest in a child forked
from it: a process of its own, with the environment, working folder, output and exit code that
``python -m pytest ARGS`` would have. A process that grades many submissions (``make grade-all``, the project's
tests) pays for the import once; a single grading pays what it paid before.

Nothing of a grading lives in the server: it has imported the modules of ``PRELOAD`` and nothing else, each
child reads its grading's files and environment itself, and it ends with its run.

    start(module, args, env=..., cwd=..., out=path) -> Run: ``python -m MODULE ARGS``; Run.wait(timeout) -> exit code
    pytest(args, env=..., cwd=..., out=path, timeout=seconds) -> exit code, or None when it ran past ``timeout``
"""
from __future__ import annotations

import gc
import multiprocessing
import multiprocessing.forkserver
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

# torch, what autograd imports on its first backward(gradient) (torch.fx's symbolic shapes and sympy: about
# 0.5 s, which the public tests' runs pay), pytest, and what its plugins installed beside it import (pytest-xdist's
# execnet: 0.14 s of each run; not the plugins themselves, which pytest must import to rewrite their asserts)
PRELOAD = ["torch", "torch.fx.experimental.symbolic_shapes", "pytest", "execnet"]
# A grading's server: the hidden tests never run a backward in their own process (the jobs do), so autograd's
# symbolic shapes would be 0.3 s of CPU in vain on each grading's critical path
GRADER_PRELOAD = [m for m in PRELOAD if m != "torch.fx.experimental.symbolic_shapes"]
_CONTEXT = None


def available() -> bool:
    """Whether this platform has a fork server (not Windows): without one, each run is a fresh interpreter."""
    return "forkserver" in multiprocessing.get_all_start_methods()


def _context(preload=None):
    """The fork server's context; ``preload`` (default PRELOAD) counts only where it is the process's first use."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = multiprocessing.get_context("forkserver")
        _CONTEXT.set_forkserver_preload(PRELOAD if preload is None else preload)
    return _CONTEXT


def _child(module, args, env, cwd, out, code_file):
    """In the forked child: what ``python -m MODULE ARGS`` does in ``cwd`` with ``env``, its output appended to
    ``out``, its exit code written to ``code_file`` as it ends."""
    # What the server imported (torch's thousands of objects) lives as long as the run: the garbage collector leaves
    # it alone, as it leaves a fresh interpreter's nothing (pytest's two full collections at exit: 0.2 s of a run)
    gc.freeze()
    fd = os.open(out, os.O_WRONLY | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    _forget_the_graders_modules()
    sys.path.insert(0, cwd)                          # what `python -m` puts first
    sys.argv = [module, *args]
    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
        code = e.code if isinstance(e.code, int) else int(e.code is not None)
    except BaseException:                            # noqa: BLE001 -- as the interpreter would: a traceback, 1
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    with open(code_file, "w") as f:
        f.write(str(code))
    os._exit(code)


def _forget_the_graders_modules():
    """Before the run: drop the modules of the grader's own folder that this child imported before it got here
    (multiprocessing imports the grader's main module in it, ``python -m autograder.grade`` say, and this module),
    so that the run imports them afresh, as a fresh interpreter would, and they read the run's environment, not the
    one the server started with (config reads some at import)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    venv = os.path.abspath(sys.prefix) + os.sep
    for name, mod in list(sys.modules.items()):
        path = os.path.abspath(getattr(mod, "__file__", None) or os.sep)
        if name == "__mp_main__" or (path.startswith(root) and not path.startswith(venv)):
            del sys.modules[name]


class Run:
    """A started ``python -m MODULE``: ``wait(timeout)`` gives its exit code, or None (killed) past ``timeout``.

    The server reports each child's exit code as the child ends. Should the server itself end first (killed, out
    of memory), multiprocessing reports 255 at once, though the child may still run: so the child also writes its
    code to a file of its own, and a run whose server was lost is waited for by its pid and read from there."""

    def __init__(self, process, code_file=None):
        self.process, self.code_file = process, code_file

    def wait(self, timeout: float | None = None) -> int | None:
        if isinstance(self.process, subprocess.Popen):
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                return None
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self.process.join(timeout)
            if self.process.is_alive():
                self.process.kill()
                self.process.join()
                return None
            if self.process.exitcode != 255:
                return self.process.exitcode
            while _alive(self.process.pid):             # the server was lost: the child may still run
                if deadline is not None and time.monotonic() > deadline:
                    os.kill(self.process.pid, signal.SIGKILL)
                    return None
                time.sleep(0.05)
            written = Path(self.code_file).read_text().strip()
            if not written:
                raise ServerLost(f"the warm server ended while its run {self.process.pid} went on, and the run "
                                 f"ended without an exit code (killed, out of memory?)")
            return int(written)
        finally:
            Path(self.code_file).unlink(missing_ok=True)


class ServerLost(RuntimeError):
    """The warm server and its run both ended without the run's exit code: the grader's failure, never a grade."""


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (an orphan whose server ended is no child of ours to wait for)."""
    if not os.path.isdir("/proc/self"):                # macOS: init reaps orphans at once
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def start(module: str, args, *, env: dict, cwd, out, preload=None) -> Run:
    """Start ``python -m MODULE ARGS`` with ``env`` in ``cwd``, its output appended to the file ``out`` (which must
    exist): forked from the warm server where there is one (started with ``preload``, if this starts it), else a
    fresh interpreter."""
    if not available():
        with open(out, "ab") as f:
            return Run(subprocess.Popen([sys.executable, "-m", module, *map(str, args)], env=env, cwd=cwd,
                                        stdout=f, stderr=subprocess.STDOUT))
    fd, code_file = tempfile.mkstemp(prefix="rmsnorm-warm-", suffix=".code")
    os.close(fd)
    p = _context(preload).Process(target=_child, args=(module, [str(a) for a in args], dict(env), str(cwd),
                                                       str(out), code_file))
    p.start()
    return Run(p, code_file)


def cpu_seconds() -> float:
    """CPU seconds (user and system) of the runs that have ended, with the children each of them waited for (a
    grading's jobs): what the server's /proc entry counts of the children it reaped; 0.0 before any run."""
    server = getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None)
    if _CONTEXT is None or server is None:
        return 0.0
    with open(f"/proc/{server}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")     # cutime, cstime


def pytest(args, *, env: dict, cwd, out, timeout: float | None, preload=None) -> int | None:
    """The exit code of ``python -m pytest ARGS`` (``start``), or None if it ran past ``timeout`` seconds and was
    killed. A run lost with its server (ServerLost) is run once more, on a new server."""
    try:
        return start("pytest", args, env=env, cwd=cwd, out=out, preload=preload).wait(timeout)
    except ServerLost as e:
        with open(out, "a") as f:
            print(f"warm: {e}; running it again", file=f)
        return start("pytest", args, env=env, cwd=cwd, out=out, preload=preload).wait(timeout)
