"""A private view of the machine for each job: it sees only what grading needs.

A sandbox account cannot read the grader's private files, but it can read whatever on the machine
is world-readable: another student's submission in a folder a TA left open, a class export in
/tmp. So, on Linux, each job runs in a mount namespace of its own (the kernel feature behind
containers), whose root is a fresh, empty tmpfs holding only

- the system, read-only: /usr, /etc and the top-level links into /usr (/bin, /lib, /lib64, ...);
- /dev and /sys, which the GPU driver and torch need, and a /proc of its own;
- the Python that runs the job (its venv and the installation the venv points to), the runtime
  folder (the job, mini_triton, the files they share) and the folders CUDA is configured in, read-only;
- the job's own folder, writable, and an empty /tmp and /dev/shm.

It also gets a network namespace of its own, with no interface up: no connection leaves the job; a
process-id namespace of its own, whose first process it is, with its own /proc: it sees its own processes
only, and every process it starts ends when it ends; and an IPC namespace of its own.

``pivot_root`` makes that tmpfs the job's ``/`` and the old root is detached, so no path leads back
to the machine's files. All of it happens in the child between fork and exec; the namespaces disappear
with the job's last process. As root, the child then becomes the sandbox account. As an ordinary user
(a TA on a cluster node), it first makes a user namespace in which it keeps its own user id: the
capabilities that making the view takes hold over that namespace only, and the exec of the job drops them.

Why the system calls themselves (unshare, mount, pivot_root, through ctypes) and not bubblewrap or util-linux's
unshare(1): one code path makes the view for both modes, in the child between fork and exec, where the limits
and the change of user are set too; bwrap is not on Gradescope's image nor on most cluster nodes (its pip
package would be one more binary to pin and trust), and unshare(1) makes namespaces but not a view (no
pivot_root into a chosen set of read-only folders). The calls are few and each is checked (:func:`_call`).

Where the kernel refuses (a container without CAP_SYS_ADMIN; as an ordinary user, unprivileged user
namespaces turned off or restricted, as AppArmor does on Ubuntu 24.04), jobs run without it and the
grader says so once (:func:`note`): a submission then reads what its user may read.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import resource
import signal
import sys
from pathlib import Path

CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWIPC, CLONE_NEWUSER = (0x00020000, 0x40000000, 0x20000000,
                                                                     0x08000000, 0x10000000)
PR_SET_PDEATHSIG = 1
PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine)     # the syscall's number (no libc wrapper)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
MS_RELATIME = 1 << 21
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
        _mount(None, target, flags=MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | _kept_flags(target))


def _kept_flags(path) -> int:
    """The flags a remount of ``path`` must repeat: in a user namespace, the kernel refuses a remount that would
    drop one the mount already has (nodev, noexec, its atime rule)."""
    f = os.statvfs(path).f_flag
    kept = f & (os.ST_NODEV | os.ST_NOEXEC | os.ST_NOATIME | os.ST_NODIRATIME)      # the same bits as MS_*
    return kept | (MS_RELATIME if f & os.ST_RELATIME else 0)


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
    """In the job's child (as root, or as an ordinary user in a user namespace of its own): make ``new_root`` (an
    empty folder) the root of a private view that holds the system, ``readable`` (read-only) and ``job``
    (writable), then detach the old root. The job gets network, process-id and IPC namespaces of its own too,
    where they can be made: no interface but a loopback that is down, so it reaches no socket of the machine's
    and nothing beyond it (its channel to the judge is a socket pair, made before); its own /proc."""
    own_pids = _unshare()
    if own_pids:
        _become_first_process()
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
            if name == "proc" and own_pids:                      # the job's own processes only
                _mount("proc", new_root / name, "proc", MS_NOSUID | MS_NODEV)
            else:
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


def _unshare() -> bool:
    """Leave the machine's mount namespace, and its network, process-id and IPC namespaces where the kernel allows
    (a container may forbid one); returns whether the job gets process ids of its own. As an ordinary user, in a
    user namespace first (:func:`_own_user_namespace`)."""
    if os.geteuid() != 0:
        _own_user_namespace()
    for extra in (CLONE_NEWNET | CLONE_NEWPID, CLONE_NEWPID, CLONE_NEWNET, 0):
        try:
            _call("unshare", CLONE_NEWNS | CLONE_NEWIPC | extra)
            return bool(extra & CLONE_NEWPID)
        except OSError:
            continue
    _call("unshare", CLONE_NEWNS)
    return False


def _own_user_namespace():
    """As an ordinary user: a user namespace in which the job keeps its own user and group ids. Until it runs
    the job (exec), this process holds the capabilities that making the view takes, over that namespace only;
    the exec of a program by an id other than 0 drops them (user_namespaces(7))."""
    uid, gid = os.geteuid(), os.getegid()
    _call("unshare", CLONE_NEWUSER)
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _become_first_process():
    """A new process-id namespace holds the children of the process that made it: fork once, so that the job is
    the namespace's first process (its /proc then lists the job's processes only, and they all end when it
    does). The parent stays outside: it closes every file (the job's pipes and subprocess's error pipe are the
    job's), waits, and ends as the job ended, by its exit code or its signal, so that the grader sees the job."""
    pid = os.fork()
    if pid == 0:
        return
    os.closerange(0, 1 << 16)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status))


def die_with_parent():
    """In the job, last before exec (a change of user clears it): if the parent waiting outside its process-id
    namespace is killed, so is the job, and with it the namespace."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def wanted() -> bool:
    """Should jobs get a private view? On Linux, unless RMSNORM_ISOLATION=off."""
    return sys.platform.startswith("linux") and PIVOT_ROOT is not None and os.environ.get(OFF_VAR) != "off"


@functools.lru_cache(maxsize=None)
def available() -> bool:
    """Can this machine make a job's private view? Tried once, in a throw-away child: the namespaces (a user
    namespace first, as an ordinary user), a tmpfs and a read-only bind mount in them."""
    if not wanted():
        return False
    import tempfile
    spot = Path(tempfile.mkdtemp(prefix="rmsnorm-probe-"))
    try:
        pid = os.fork()
        if pid == 0:                                               # the child: try, and report by exit code
            try:
                _unshare()
                _mount(None, "/", flags=MS_REC | MS_PRIVATE)
                _mount("tmpfs", spot, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
                _bind(Path("/usr"), spot)
                os._exit(0)
            except BaseException:                                  # noqa: BLE001
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) == 0
    finally:
        spot.rmdir()


_NOTED = []


def note() -> str | None:
    """Once per process, when jobs get no private view of the file system: what that means (None otherwise)."""
    if _NOTED or available() or os.environ.get(OFF_VAR) == "off":
        return None
    _NOTED.append(True)
    if os.geteuid() != 0:
        return ("note: this machine does not let an ordinary user make namespaces (unprivileged user namespaces "
                "are turned off or restricted: AppArmor on Ubuntu 24.04, a sysctl, a container), so submissions run "
                "as you, see your processes and can read every file you can. Grade as root, or allow them "
                "(docs/ta-guide.md, \"Isolation\")")
    return ("note: this machine does not let the grader give each job a private view of the file system "
            "(no mount namespaces here): a submission can read every world-readable file, so keep other "
            "submissions in folders only their owner can read (chmod go-rwx)")
