"""A kernel that never ends, stopped inside the judge's process, where it runs.

A launch runs on the judge's simulator (launches.py), so a kernel's endless ``while`` loop spins here, not in
the submission's process, and no wait on the channel ever looks at the group's CPU budget. While a launch
runs, a profiling timer (SIGPROF, counted in this process's CPU time) looks at the budget every
``SLICE_S``; once it is spent, the kernel stops where it is (:class:`OutOfTime`), and the group ends as a
time-out, saying which line of rmsnorm.py was running and whether its loop was getting anywhere: the
variables of a ``while`` loop's condition that kept their values across the last samples mean "no progress".
"""
from __future__ import annotations

import ast
import contextlib
import hashlib
import linecache
import os
import signal

import torch

SLICE_S = 0.25                 # CPU seconds between looks at the budget
STUCK_SAMPLES = 3              # the same loop, its condition's variables unchanged, this many looks in a row


class OutOfTime(BaseException):
    """The group's CPU budget ran out inside a kernel (a BaseException: the simulator's handlers of a
    kernel's own errors must not take it for one). ``where``: which line, and whether its loop progressed."""

    def __init__(self, where: str, stuck: bool):
        super().__init__(where)
        self.where, self.stuck = where, stuck


def loops(path: str) -> list:
    """(first line, last line, the names a ``while`` loop's condition reads, or None for a ``for``) of every
    loop of ``path``."""
    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except (OSError, SyntaxError, ValueError):
        return []
    return [(n.lineno, n.end_lineno or n.lineno,
             sorted({m.id for m in ast.walk(n.test) if isinstance(m, ast.Name)}) if isinstance(n, ast.While) else None)
            for n in ast.walk(tree) if isinstance(n, (ast.For, ast.While))]


def fingerprint(value) -> str:
    """What a variable holds, to tell whether it changed: a block's values (mini_triton keeps them in
    ``.handle``), or the value itself."""
    try:
        h = getattr(value, "handle", value)
        if isinstance(h, torch.Tensor):
            return hashlib.sha1(h.detach().cpu().contiguous().numpy().tobytes()).hexdigest() + str(tuple(h.shape))
        return repr(h)[:200]
    except Exception:                      # noqa: BLE001 -- an unreadable value: count it as changing
        return str(id(value)) + str(os.urandom(4))


class Watch:
    """The samples of one launch: where rmsnorm.py's code was, and its loop's condition, at each look."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        self.loops = loops(path)
        self.samples = []                  # (line, loop's first line or None, fingerprint of its condition)

    def frame(self, frame):
        """The innermost frame running rmsnorm.py's code, or None."""
        while frame is not None and os.path.abspath(frame.f_code.co_filename) != self.path:
            frame = frame.f_back
        return frame

    def loop(self, line: int):
        around = [lp for lp in self.loops if lp[0] <= line <= lp[1]]
        return max(around, default=None)

    def sample(self, frame):
        f = self.frame(frame)
        if f is None:
            return
        lp = self.loop(f.f_lineno)
        names = lp[2] if lp else None
        state = None if names is None else tuple(fingerprint(f.f_locals.get(n)) for n in names)
        self.samples = (self.samples + [(f.f_lineno, lp[0] if lp else None, state, f.f_code.co_name)])[-16:]

    def stuck(self) -> bool:
        last = self.samples[-STUCK_SAMPLES:]
        return len(last) == STUCK_SAMPLES and last[0][1] is not None and last[0][2] is not None and \
            all(s[1:3] == last[0][1:3] for s in last)

    def describe(self, seconds: float) -> str:
        """': in rmsnorm_fwd_kernel, line 71 of rmsnorm.py (`i = i * 1`), inside the loop of line 70 (`while i <
        n_cols:`), which made no progress: ...' (or: still making progress); '' when no line was seen."""
        if not self.samples:
            return ""
        line, first, _, name = self.samples[-1]
        code = linecache.getline(self.path, line).strip()
        text = f", in {name}, line {line} of {os.path.basename(self.path)}" + (f" (`{code}`)" if code else "")
        if first is None:
            return text + ", on the simulator, still making progress"
        head = linecache.getline(self.path, first).strip()
        text += f", inside the loop of line {first} (`{head}`)" if first != line else ""
        names = self.loop(line)[2] if self.loop(line) else None
        if self.stuck() and names:
            return text + (f", on the simulator: no progress, {_and(names)} kept the same "
                           f"{'value' if len(names) == 1 else 'values'} over its last {STUCK_SAMPLES * SLICE_S:.2g} s, "
                           f"so the loop's condition never changes")
        return text + ", on the simulator, still making progress"


def _and(names) -> str:
    quoted = [f"`{n}`" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


@contextlib.contextmanager
def budgeted(budget, path: str, seconds: float | None):
    """Run a launch with the group's CPU ``budget`` (a callable, True once spent) looked at every SLICE_S of
    this process's CPU time; None, or no SIGPROF (not Linux or macOS): nothing is watched here."""
    if budget is None or not hasattr(signal, "setitimer"):
        yield
        return
    watch = Watch(path)

    def tick(signum, frame):
        watch.sample(frame)
        if budget():
            signal.setitimer(signal.ITIMER_PROF, 0, 0)
            raise OutOfTime(watch.describe(seconds or 0.0), watch.stuck())
    old = signal.signal(signal.SIGPROF, tick)
    signal.setitimer(signal.ITIMER_PROF, SLICE_S, SLICE_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, old)
