"""Run untrusted code in a child process that cannot hang, flood or outlive the grader.

The grader never imports a submission. Each run is a fresh interpreter in its
own session (so its whole process group can be killed), with rlimits on CPU
time, memory, file size and processes, and its output read through a cap. When
the grader runs as root, as on Gradescope, the child runs as a sandbox account
of its own (accounts.py): it cannot read the grader's files, write its results,
or signal another job. A job (``private``) also gets a private view of the
machine in namespaces of its own (isolation.py), as root or, in a user namespace,
as an ordinary user. Afterwards every process of the run dies: its process
group, every process that inherited the run's environment token (a daemon that
left the process group with setsid()), and every process of its account.

A child that never started (an interpreter the account cannot execute) is the
grader's failure: :class:`~autograder.errors.GraderError`, never a student's zero.
"""
from __future__ import annotations

import dataclasses
import os
import resource
import secrets
import signal
import subprocess
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import accounts, isolation
from .config import TOKEN_VAR, Limits
from .errors import GraderError

__all__ = ["Limits", "Result", "run", "python_argv", "cannot_reach"]
OUTPUT_CAP = 64 * 1024          # bytes of stdout/stderr kept from one run


@dataclasses.dataclass
class Result:
    returncode: int | None      # None when the wall-clock limit stopped it; -N for signal N
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float              # wall clock
    cpu_seconds: float = 0.0    # user + system time of the child itself
    limits: Limits = dataclasses.field(default_factory=Limits)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def out_of_cpu(self) -> bool:
        """Stopped by RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one."""
        return self.returncode == -signal.SIGXCPU or (
            self.returncode == -signal.SIGKILL and self.cpu_seconds >= self.limits.cpu_s - 0.5)


def _read_capped(stream, sink: list, cap: int):
    """Keep the first ``cap`` bytes; read and drop the rest so the child never blocks. Each chunk is kept as it
    arrives (read1), so a line the child printed is seen while it still runs (its COMPILED lines)."""
    kept = 0
    read = getattr(stream, "read1", stream.read)
    while True:
        chunk = read(65536)
        if not chunk:
            break
        if kept < cap:
            sink.append(chunk[: cap - kept])
            kept += len(sink[-1])
    stream.close()


def _preexec(limits: Limits, ids, nproc: int, view=None):
    def setup():                                      # runs in the child, between fork and exec
        os.setsid()                                   # a new session: killpg reaches every child
        if view is not None:
            isolation.enter(*view)                    # before the change of user: the job's private view
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s + 5))
        if limits.memory_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if ids is not None:
            uid, gid = ids
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        if view is not None:
            isolation.die_with_parent()
    return setup


def kill_marked_processes(token: str):
    """Kill every process whose environment carries ``token``: forks that called setsid() included."""
    needle = f"{TOKEN_VAR}={token}".encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    os.kill(int(pid), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


def _wait(pid: int, timeout: float | None, extra=None):
    """(exit code, CPU seconds) of child ``pid``, or (None, None) if it still runs after ``timeout`` plus what
    ``extra()`` grants by then (seconds the child spent compiling, say; asked twice a second)."""
    start = time.monotonic()
    granted, asked = 0.0, start
    while True:
        done, status, usage = os.wait4(pid, 0 if timeout is None else os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime
        now = time.monotonic()
        if extra is not None and (now - asked >= 0.5 or now - start >= timeout + granted):
            granted, asked = max(granted, extra()), now     # asked at the deadline too: a grant just printed counts
        if now - start >= timeout + granted:
            return None, None
        time.sleep(0.02)


def run(argv, *, cwd=None, env=None, limits: Limits | None = None, account=None,
        cap: int = OUTPUT_CAP, stdin: bytes | None = None, private=None, extra=None) -> Result:
    """Run ``argv`` sandboxed; always returns, whatever the child does.

    ``account``: the pwd entry of the sandbox account to run as (accounts.for_job()); None runs
    as the grader's own user, which is refused when that user is root.
    ``stdin``: bytes the child can read once from its standard input (the job's signing key).
    ``private``: (job folder, folders to read) to run the child in a private view of the machine that holds only
    those and the system (isolation.py), where the machine allows it (Linux: as root, or as an ordinary user where
    user namespaces are allowed).
    ``extra``: extra(stdout so far) -> seconds to add to ``limits.timeout_s`` (at most ``limits.compile_s``).
    """
    limits = limits or Limits()
    if account is None and os.geteuid() == 0:
        raise GraderError("refusing to run a submission as root: no sandbox account was given",
                          accounts.create_fix())
    ids = (account.pw_uid, account.pw_gid) if account is not None else None
    # RLIMIT_NPROC counts every process of the user: the grader's own user has others running already
    nproc = limits.processes + (0 if ids else accounts.tasks_of(os.getuid()))
    token = secrets.token_hex(8)
    env = dict(os.environ if env is None else env, **{TOKEN_VAR: token})
    view_root = None
    if private is not None and (ids is not None or os.geteuid() != 0) and isolation.available():
        view_root = Path(tempfile.mkdtemp(prefix="rmsnorm-view-"))   # the private root's mount point
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=True,
                                preexec_fn=_preexec(limits, ids, nproc, view_root and (view_root, *private)))
    except (OSError, subprocess.SubprocessError) as e:
        if view_root is not None:
            view_root.rmdir()
        who = account.pw_name if account is not None else "the grader's user"
        raise GraderError(f"could not start {argv[0]} as {who}: {e}. {cannot_reach(argv[0], account)}".strip(),
                          _START_FIX) from e
    if stdin is not None:
        try:
            proc.stdin.write(stdin)
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
    out, err = [], []
    readers = [threading.Thread(target=_read_capped, args=(proc.stdout, out, cap), daemon=True),
               threading.Thread(target=_read_capped, args=(proc.stderr, err, cap), daemon=True)]
    for t in readers:
        t.start()
    try:
        grant = None
        if extra is not None and limits.compile_s:
            grant = lambda: min(limits.compile_s, extra(b"".join(out).decode("utf-8", "replace")))  # noqa: E731
        code, cpu = _wait(proc.pid, limits.timeout_s, grant)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)         # the child and anything it started
        except (ProcessLookupError, PermissionError):
            pass
        kill_marked_processes(token)
        if ids is not None:
            accounts.kill_processes(ids[0])
        if view_root is not None:
            try:
                view_root.rmdir()                       # its mounts lived in the job's namespace only
            except OSError:
                pass
    timed_out = code is None
    if timed_out:
        _, cpu = _wait(proc.pid, None)                  # reap the killed child
    proc.returncode = code if code is not None else -signal.SIGKILL
    for t in readers:
        t.join(timeout=5)
    decode = lambda parts: b"".join(parts).decode("utf-8", "replace")  # noqa: E731
    return Result(code, decode(out), decode(err), timed_out, time.monotonic() - start, cpu or 0.0, limits)


_START_FIX = ("the sandbox accounts must be able to enter every folder on the way to the interpreter and its "
              "packages (o+x) and read their files (o+r): `chmod o+x` the folder named above, or build the grader's "
              "venv from a Python outside private home folders: in a checkout, `rm -rf .venv && make setup` (it "
              "picks such a Python, or says what to install); for the Gradescope zip, run setup.sh with "
              "PYTHON=/usr/bin/python3 (or another Python 3.10-3.12 outside private homes)")


def cannot_reach(path, account) -> str:
    """Why ``account`` cannot reach ``path``: the first folder on the way it may not enter, if any."""
    if account is None:
        return ""
    for target in (Path(os.path.abspath(path)), Path(os.path.realpath(path))):   # the link's way, then the file's
        for p in reversed(target.parents):
            try:
                st = os.stat(p)
            except OSError:
                continue
            if not st.st_mode & 0o001 and st.st_uid != account.pw_uid:
                return (f"{account.pw_name} cannot enter {p} (mode {stat.filemode(st.st_mode)}, owner uid "
                        f"{st.st_uid}) on the way to {target}.")
    return ""


def python_argv(script, *args):
    """A fresh interpreter (-I: isolated from the environment and user site) running ``script``."""
    return [sys.executable, "-I", str(script), *map(str, args)]
