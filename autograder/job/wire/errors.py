"""An error of the submission's, in the student's terms: its type and message, where in rmsnorm.py, what to do.

The message is all the grader reports of a task that raised, so it says where the error was raised in
the student's file, and what to do when the cause is the grader's sandbox rather than the math.
"""
import dataclasses
import functools
import os
import traceback

from rmsnorm_testkit import text


HIDDEN = "<grader>"


def describe(e: BaseException) -> str:
    """The error: its type and message (cut to fit MESSAGE_CHARS), the line of rmsnorm.py, a hint."""
    where = ""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if frame.filename.endswith("rmsnorm.py"):
            where = f" (rmsnorm.py line {frame.lineno})"
            break
    hint = _hint(e)
    return f"{type(e).__name__}: {e}"[:text.MESSAGE_CHARS - len(where) - len(hint)] + where + hint


@dataclasses.dataclass(frozen=True)
class Crash:
    """A launch that raised, as the judge saw it: the error's type and message, the kernel, and the line of rmsnorm.py
    it was running (None: it raised before any line ran, binding its arguments, say). The grader charges a task's
    error once, wherever else it shows, only where it is such a launch's (judge.outputs.task_error): the judge's own
    record, never what the submission's process says of its error. ``launched``: the kernel the launch ran (the
    @jit function its grid was given to), where ``kernel`` may be a helper it called."""
    type: str
    message: str
    kernel: str
    line: int | None
    launched: str | None = None

    @classmethod
    def read(cls, d) -> "Crash | None":
        """The record as the grader reads it from a job's results (a dict), or None where it is not one."""
        if not isinstance(d, dict) or not all(isinstance(d.get(k), str) for k in ("type", "message", "kernel")):
            return None
        line, launched = d.get("line"), d.get("launched")
        return cls(d["type"], d["message"], d["kernel"], line if isinstance(line, int) else None,
                   launched if isinstance(launched, str) else None)

    @classmethod
    def of(cls, e: BaseException, request: dict, path: str) -> "Crash":
        """The record of ``e``, raised by the launch ``request`` asked for, in the kernels compiled from ``path``."""
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == path]
        ident = request.get("kernel")
        name = ident.get("name") if isinstance(ident, dict) else None
        launched = name if isinstance(name, str) else None
        if frames:                                   # the kernel, or the @jit helper it called, that was running
            return cls(type(e).__name__, str(e), frames[-1].name, frames[-1].lineno, launched)
        return cls(type(e).__name__, str(e), str(name or "a kernel"), None, launched)

    def site(self) -> str:
        """What stays the same from input to input, so that one crash met by several launches and parts is one
        mistake: the error's type, the line of rmsnorm.py and the kernel launched (judge.charge.one_crash takes the
        same error at one line, whichever kernel called the helper there, and the same error anywhere in one kernel,
        as one); or, before any line ran, the kernel and what the message says before its details."""
        if self.line is not None:
            launch = f" in a launch of {self.launched}" if self.launched and self.launched != self.kernel else ""
            return f"error: {self.type} in {self.kernel} line {self.line}{launch}"
        return f"error: {self.type} in {self.kernel}: {self.message.split(':', 1)[0][:80]}"

    def told(self, reported: str) -> bool:
        """Is ``reported``, a task's error as the submission's process described it (wire/errors.describe: its type,
        its message, cut), this launch's error, raised again there (client.py: of the same type, or a RuntimeError)?"""
        kind, colon, message = reported.partition(": ")
        if not self.message:                       # nothing to match but the type (or client.py's RuntimeError)
            return bool(colon) and kind in (self.type, "RuntimeError") and (not message.strip() or
                                                                            message.startswith(" (rmsnorm.py line"))
        k = min(120, len(message), len(self.message))
        return bool(colon) and k >= min(40, len(self.message)) and message[:k] == self.message[:k]


KERNEL_SIDE = ("mini_triton", "triton", os.path.join("autograder", "job"))   # a launch, served by the judge


def raised_in_file(e: BaseException) -> bool:
    """Was ``e`` raised on the host by rmsnorm.py's code: a ``raise`` or ``assert`` of its own, Python's error at one
    of its lines, or torch's error in a call it made? Only an error inside a launch (the simulator's, Triton's, the
    judge's report of a kernel's) is surely a crash that several parts meet by accident, charged once; one raised
    on the host may refuse an input on purpose (the grader cannot tell which), so the verdicts charge it wherever
    it stops a case."""
    frames = traceback.extract_tb(e.__traceback__)
    if not frames or not any(f.filename.endswith("rmsnorm.py") for f in frames):
        return False
    last = frames[-1].filename
    return last.endswith("rmsnorm.py") or not any(f"{os.sep}{part}{os.sep}" in last for part in KERNEL_SIDE)


def _hint(e: BaseException) -> str:
    """What to do about errors whose cause is the grader's sandbox rather than the math, or autograd's rules."""
    autograd = text.autograd_hint(str(e))
    if autograd:
        return autograd
    if isinstance(e, SystemExit):
        return ": rmsnorm.py must not end the process (exit(), sys.exit()); return the outputs instead"
    if isinstance(e, MemoryError) or "can't allocate memory" in str(e):
        try:
            import resource
            cap = resource.getrlimit(resource.RLIMIT_AS)[0]
        except (ImportError, OSError, ValueError):
            cap = -1
        size = f" at {cap / 2 ** 30:.0f} GiB" if cap > 0 else ""
        return (f": the grader caps a job's memory{size}; allocate only the outputs (y, r, dx, dg) and a small "
                f"partial-dg buffer, never a copy of the input per row or program")
    return ""


@functools.lru_cache(maxsize=None)
def _grader_strings(extra: tuple) -> tuple:
    """The paths this process and its ancestors were started with (their command lines, which any process can
    read in /proc), each with its parent folders, longest first: what feedback must never show."""
    found, pid = set(extra), os.getpid()
    for _ in range(64):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().decode("utf-8", "replace").split("\0")
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        found |= {a for a in args if "/" in a}
        if pid <= 1:
            break
    paths = set()
    for p in found:
        parts = p.rstrip("/").split("/")
        paths |= {p.rstrip("/")} | {"/".join(parts[:i]) for i in range(3, len(parts) + 1)}     # from /a/b on
    return tuple(sorted((p for p in paths if len(p) >= 6), key=len, reverse=True))


def scrub(message: str, extra=()) -> str:
    """``message`` without the grader's paths and command lines (and ``extra`` strings): a submission may put
    what it read of them into an error, and feedback must not carry them."""
    for s in _grader_strings(tuple(str(e) for e in extra)):
        if s in message:
            message = message.replace(s, HIDDEN)
    return message
