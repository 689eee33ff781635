"""Sandbox accounts: the unprivileged users a root grader runs submissions as.

A submission never runs as root. As root, the grader takes one account of a small
pool (``rmsnorm-sbx0`` ... ``rmsnorm-sbx7``, see config.py) for each job, under a lock
that only root can take: while the job runs, no other job uses that account. After the
job every process of the account is killed and every file it left in the shared
temporary folders is removed, so nothing of one grading reaches another, and any number
of gradings can run at once (as many as there are accounts; more wait their turn).

Run as an ordinary user, the grader runs submissions as that user (the TA's own trust
model: see docs/ta-guide.md); no account is needed then.

    python -m autograder.accounts create     # as root: create the missing accounts (make sandbox-accounts)
    python -m autograder.accounts list
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import config
from .errors import GraderError

SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")     # folders every account can write to


def create_fix() -> str:
    """How staff create the pool that is missing."""
    prefix = config.ACCOUNT_PREFIX
    return (f"create {prefix}0..{prefix}{config.POOL_SIZE - 1} as root: `make sandbox-accounts` in the repository, "
            f"or `python3 -m autograder.accounts create`" + (f" with RMSNORM_SANDBOX_ACCOUNTS={prefix}"
                                                            if prefix != config.DEFAULT_ACCOUNT_PREFIX else "")
            + "; on Gradescope, rebuild the autograder image (setup.sh creates them)")


def names(prefix: str | None = None, size: int = config.POOL_SIZE) -> list[str]:
    prefix = config.ACCOUNT_PREFIX if prefix is None else prefix
    return [f"{prefix}{i}" for i in range(size)]


def existing(prefix: str | None = None) -> list:
    """The pool's accounts that exist (pwd entries), in order."""
    found = []
    for name in names(prefix):
        try:
            found.append(pwd.getpwnam(name))
        except KeyError:
            pass
    return found


def create(prefix: str | None = None, size: int = config.POOL_SIZE) -> list[str]:
    """Create the pool's missing accounts (root only): system users without a home or a login shell."""
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    nologin = next((s for s in ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false") if os.path.exists(s)), "/bin/false")
    made = []
    for name in names(prefix, size):
        try:
            pwd.getpwnam(name)
            continue
        except KeyError:
            pass
        p = subprocess.run([useradd, "--system", "--no-create-home", "--home-dir", "/nonexistent",
                            "--shell", nologin, "--user-group", name], capture_output=True, text=True)
        if p.returncode:
            raise GraderError(f"could not create the sandbox account {name}: {p.stderr.strip() or p.returncode}",
                              "run the grader as root on a Linux machine with useradd, or as an ordinary user")
        made.append(name)
    return made


def remove(prefix: str) -> None:
    """Delete a pool's accounts (the project's tests remove the pools they made)."""
    for pw in existing(prefix):
        kill_processes(pw.pw_uid)
        subprocess.run(["userdel", pw.pw_name], capture_output=True)


# --- one job's account --------------------------------------------------------------------------------------

@contextlib.contextmanager
def for_job():
    """The account a job runs as: a free pool account, locked until the job is over; None when not root."""
    if os.geteuid() != 0:
        yield None
        return
    pool = existing()
    if not pool:
        raise GraderError(f"the grader runs as root, and none of the sandbox accounts {config.ACCOUNT_PREFIX}0.."
                          f"{config.ACCOUNT_PREFIX}{config.POOL_SIZE - 1} exists: a submission never runs as root",
                          create_fix())
    locks = _lock_dir()
    deadline = time.monotonic() + config.ACCOUNT_WAIT_S
    while True:
        for pw in pool:
            fd = _try_lock(locks / f"{pw.pw_name}.lock")
            if fd is None:
                continue
            try:
                clean(pw.pw_uid)                 # whatever a grader that died mid-job left behind
                yield pw
            finally:
                clean(pw.pw_uid)
                os.close(fd)                     # releases the lock
            return
        if time.monotonic() > deadline:
            raise GraderError(f"all {len(pool)} sandbox accounts stayed busy for {config.ACCOUNT_WAIT_S:.0f} s",
                              "run fewer gradings at once, or create more accounts (config.POOL_SIZE)")
        time.sleep(0.2)


def _lock_dir() -> Path:
    """root's private folder of lock files; refuses one that another user could have prepared."""
    d = Path(tempfile.gettempdir()) / "rmsnorm-sandbox-locks"
    try:
        d.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise GraderError(f"{d} is not a private folder of the grader's (owner {st.st_uid}, mode "
                          f"{stat.filemode(st.st_mode)}): someone else may have made it",
                          f"remove {d}; the grader recreates it")
    return d


def _try_lock(path: Path):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return fd
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None
        raise


def clean(uid: int) -> None:
    """Kill every process of ``uid`` and remove what it left in the shared temporary folders."""
    kill_processes(uid)
    for top in SHARED_TMP:
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for e in entries:
            try:
                if e.stat(follow_symlinks=False).st_uid != uid:
                    continue
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path, ignore_errors=True)
                else:
                    os.unlink(e.path)
            except OSError:
                pass


def kill_processes(uid: int, rounds: int = 50) -> None:
    """SIGKILL every process whose real, effective or saved user is ``uid``, until none is left."""
    if uid == 0 or uid == os.getuid():
        return
    for _ in range(rounds):
        pids = [pid for pid in _pids() if uid in _uids(pid)]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.01)


def tasks_of(uid: int) -> int:
    """Processes and threads of ``uid`` now (what RLIMIT_NPROC counts)."""
    n = 0
    for pid in _pids():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            n += int(fields.get("Threads", "1"))
    return n


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _uids(pid: int) -> set:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                return {int(u) for u in line.split()[1:]}
    except OSError:
        pass
    return set()


def main(argv) -> int:
    what = argv[0] if argv else "list"
    if what == "create":
        if os.geteuid() != 0:
            me = pwd.getpwuid(os.getuid()).pw_name
            print(f"not root: submissions run as {me}, no sandbox account needed. Warning: they then have {me}'s "
                  f"rights (its files, this checkout); grade untrusted submissions as root, where each runs as a "
                  f"sandbox account")
            return 0
        made = create()
        print(f"sandbox accounts: created {', '.join(made)}" if made else
              f"sandbox accounts: {', '.join(names())} exist")
        return 0
    if what == "list":
        have = [pw.pw_name for pw in existing()]
        print("\n".join(have) if have else f"none of {', '.join(names())} exists")
        return 0
    print("usage: python -m autograder.accounts [create|list]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
