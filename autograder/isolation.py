"""A private view of the file system for each job: it sees only what grading needs.

A sandbox account cannot read the grader's private files, but it can read whatever on the machine
is world-readable: another student's submission in a folder a TA left open, a class export in
/tmp. So, as root on Linux, each job runs in a mount namespace of its own (the kernel feature behind
containers), whose root is a fresh, empty tmpfs holding only

- the system, read-only: /usr, /etc and the top-level links into /usr (/bin, /lib, /lib64, ...);
- /dev, /proc and /sys, which the GPU driver and torch need;
- the Python that runs the job (its venv and the installation the venv points to), the runtime
  folder (the job, mini_triton, the files they share) and the folders CUDA is configured in, read-only;
- the job's own folder, writable, and an empty /tmp.

It also gets a network namespace of its own, with no interface up: no connection leaves the job.

``pivot_root`` makes that tmpfs the job's ``/`` and the old root is detached, so no path leads back
to the machine's files. All of it happens in the child between fork and exec, as root, before it
becomes the sandbox account; the namespace disappears with the job's last process.

Where the kernel refuses (not root, or a container without CAP_SYS_ADMIN), jobs run without it
and the grader says so once (:func:`note`): the sandbox account then reads what any user may read.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
from pathlib import Path

CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine)     # the syscall's number (no libc wrapper)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
SYSTEM = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32")      # read-only, as they are
DEVICES = ("dev", "proc", "sys")                                             # the GPU driver's files
OFF_VAR = "RMSNORM_ISOLATION"          # "off": no private file system (the project's tests of its absence)

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _call(name, *args):
    if getattr(_libc, name)(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}{tuple(a.decode() if isinstance(a, bytes) else a for a in args)}: "
                           f"{os.strerror(err)}")


def _mount(source, target, fstype=None, flags=0, data=None):
    enc = lambda s: None if s is None else str(s).encode()  # noqa: E731
    _call("mount", enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))


def _bind(path: Path, root: Path, writable=False):
    """Show ``path`` (a folder) at the same place under ``root``; read-only unless ``writable``."""
    target = root / path.relative_to("/")
    target.mkdir(parents=True, exist_ok=True)
    _mount(path, target, flags=MS_BIND | MS_REC)
    if not writable:
        _mount(None, target, flags=MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)


def readable_paths(runtime_root) -> list:
    """Folders a job reads besides the system: its Python, the runtime, CUDA's folders. Each once,
    outermost first (a folder inside another shown one is already there)."""
    env = os.environ
    wanted = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
              runtime_root, env.get("CUDA_HOME"), env.get("TRITON_PTXAS_PATH") and
              os.path.dirname(env["TRITON_PTXAS_PATH"]), *env.get("LD_LIBRARY_PATH", "").split(":")]
    paths = sorted({Path(os.path.realpath(p)) for p in wanted if p and os.path.isdir(p)}, key=lambda p: len(p.parts))
    shown = [Path("/", name) for name in SYSTEM]
    out = []
    for p in paths:
        if not any(p == s or s in p.parents for s in shown + out):
            out.append(p)
    return out


def enter(new_root: Path, job: Path, readable: list):
    """In the job's child, as root: make ``new_root`` (an empty folder) the root of a private view that
    holds the system, ``readable`` (read-only) and ``job`` (writable), then detach the old root. The job gets a
    network namespace of its own too, where one can be made: no interface but a loopback that is down, so it
    reaches no socket of the machine's and nothing beyond it (its channel to the judge is a socket pair, made
    before)."""
    try:
        _call("unshare", CLONE_NEWNS | CLONE_NEWNET)
    except OSError:                                              # a kernel or container without network namespaces
        _call("unshare", CLONE_NEWNS)
    _mount(None, "/", flags=MS_REC | MS_PRIVATE)                 # nothing below propagates back
    _mount("tmpfs", new_root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=16m")
    for name in SYSTEM:
        top = Path("/", name)
        if top.is_symlink():
            (new_root / name).symlink_to(os.readlink(top))
        elif top.is_dir():
            _bind(top, new_root)
    for name in DEVICES:
        if Path("/", name).is_dir():
            (new_root / name).mkdir()
            _mount(Path("/", name), new_root / name, flags=MS_BIND | MS_REC)
    for path in readable:
        _bind(path, new_root)
    (new_root / "tmp").mkdir(mode=0o1777, exist_ok=True)
    os.chmod(new_root / "tmp", 0o1777)
    _bind(job, new_root, writable=True)
    if (new_root / "dev" / "shm").is_dir():
        _mount("tmpfs", new_root / "dev" / "shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
    old = new_root / ".old_root"
    old.mkdir()
    os.chdir(new_root)
    _call("syscall", ctypes.c_long(PIVOT_ROOT), b".", b".old_root")    # pivot_root(2)
    os.chdir("/")
    _call("umount2", b"/.old_root", MNT_DETACH)
    os.rmdir("/.old_root")
    os.chdir(job)


def wanted() -> bool:
    """Should jobs get a private view? As root on Linux, unless RMSNORM_ISOLATION=off."""
    return (os.geteuid() == 0 and sys.platform.startswith("linux") and PIVOT_ROOT is not None
            and os.environ.get(OFF_VAR) != "off")


@functools.lru_cache(maxsize=None)
def available() -> bool:
    """Can this machine make a private mount namespace? Tried once, in a throw-away child."""
    if not wanted():
        return False
    pid = os.fork()
    if pid == 0:                                                   # the child: try, and report by exit code
        try:
            _call("unshare", CLONE_NEWNS)
            _mount(None, "/", flags=MS_REC | MS_PRIVATE)
            os._exit(0)
        except BaseException:                                      # noqa: BLE001
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


_NOTED = []


def note() -> str | None:
    """Once per process, when jobs get no private view of the file system: what that means (None otherwise)."""
    if _NOTED or available() or os.environ.get(OFF_VAR) == "off":
        return None
    _NOTED.append(True)
    if os.geteuid() != 0:
        return ("note: not root, so submissions run as you and can read every file you can; as root they run as "
                "sandbox accounts, each job in a private view of the file system (docs/ta-guide.md, the sandbox)")
    return ("note: this machine does not let the grader give each job a private view of the file system "
            "(no mount namespaces here): a submission can read every world-readable file, so keep other "
            "submissions in folders only their owner can read (chmod go-rwx)")
