"""Run untrusted code in a child process that cannot hang, flood or outlive the grader.

The grader never imports a submission. Each run is a fresh interpreter in its
own session (so its whole process group can be killed), with rlimits on CPU
time, memory, file size and processes, its output read through a cap, and --
when the grader runs as root, as on Gradescope -- an unprivileged user that
cannot read the grader's files or write its results. Afterwards every process
of the run dies: its process group, every process of the unprivileged user, and
every process that inherited the run's environment token (a daemon that left
the process group with setsid()).
"""
from __future__ import annotations

import dataclasses
import os
import pwd
import resource
import secrets
import signal
import subprocess
import sys
import threading
import time

TOKEN_VAR = "RMSNORM_SANDBOX_TOKEN"   # marks every process of one run, even after setsid()
OUTPUT_CAP = 64 * 1024          # bytes of stdout/stderr kept from one run
# The unprivileged user a root grader runs submissions as (created by setup.sh on Gradescope).
# Set RMSNORM_SANDBOX_USER="" to run as the grader's own user (several jobs at once).
STUDENT_USER = os.environ.get("RMSNORM_SANDBOX_USER", "student") or None


@dataclasses.dataclass
class Limits:
    timeout_s: float = 60.0                 # wall clock, then the process group is killed
    cpu_s: int = 120                        # RLIMIT_CPU
    memory_bytes: int | None = 2 * 1024 ** 3   # RLIMIT_AS; None on a GPU (CUDA maps huge address ranges)
    file_bytes: int = 64 * 1024 ** 2        # RLIMIT_FSIZE
    processes: int = 256                    # RLIMIT_NPROC (counts all of the user's processes)


@dataclasses.dataclass
class Result:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


def _read_capped(stream, sink: list, cap: int):
    """Keep the first ``cap`` bytes; read and drop the rest so the child never blocks."""
    kept = 0
    while True:
        chunk = stream.read(65536)
        if not chunk:
            break
        if kept < cap:
            sink.append(chunk[: cap - kept])
            kept += len(sink[-1])
    stream.close()


def _drop_privileges(user: str | None):
    if user is None or os.geteuid() != 0:
        return None
    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        return None
    return pw.pw_uid, pw.pw_gid


def _preexec(limits: Limits, ids):
    def setup():                                      # runs in the child, between fork and exec
        os.setsid()                                   # a new session: killpg reaches every child
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
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
    return setup


def kill_user_processes(uid: int):
    """Kill every process of ``uid`` (daemons that left the process group included)."""
    if uid == 0 or uid == os.getuid():
        return
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid:
                os.kill(int(pid), signal.SIGKILL)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass


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


def run(argv, *, cwd=None, env=None, limits: Limits | None = None, user: str | None = STUDENT_USER,
        cap: int = OUTPUT_CAP, stdin: bytes | None = None) -> Result:
    """Run ``argv`` sandboxed; always returns, whatever the child does.

    ``stdin``: bytes the child can read once from its standard input (the worker's signing key).
    """
    limits = limits or Limits()
    ids = _drop_privileges(user)
    token = secrets.token_hex(8)
    env = dict(os.environ if env is None else env, **{TOKEN_VAR: token})
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=_preexec(limits, ids), close_fds=True)
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
    timed_out = False
    try:
        proc.wait(timeout=limits.timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)         # the child and anything it started
        except ProcessLookupError:
            pass
        if ids is not None:
            kill_user_processes(ids[0])
        kill_marked_processes(token)
        proc.wait()
    for t in readers:
        t.join(timeout=5)
    decode = lambda parts: b"".join(parts).decode("utf-8", "replace")  # noqa: E731
    return Result(None if timed_out else proc.returncode, decode(out), decode(err), timed_out,
                  time.monotonic() - start)


def python_argv(script, *args):
    """A fresh interpreter (-I: isolated from the environment and user site) running ``script``."""
    return [sys.executable, "-I", str(script), *map(str, args)]
