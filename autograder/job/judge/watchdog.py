"""A kernel that never ends, stopped inside the judge's process, where it runs.

A launch runs on the judge's simulator (launches.py), so a kernel's endless ``while`` loop spins here, not in
the submission's process, and no wait on the channel ever looks at the group's CPU budget. While a launch
runs, a profiling timer (SIGPROF, counted in this process's CPU time) samples the kernel's line and its
loop's condition (rmsnorm_testkit.watch.Watch) and looks at the budget every ``SLICE_S``; once it is spent, the
kernel stops where it is (:class:`OutOfTime`), and the group ends as a time-out that names the line and says
whether the loop was getting anywhere.
"""
from __future__ import annotations

import contextlib
import signal

from rmsnorm_testkit.watch import Watch


SLICE_S = 0.25                 # CPU seconds between looks at the budget


class OutOfTime(BaseException):
    """The group's CPU budget ran out inside a kernel (a BaseException: the simulator's handlers of a
    kernel's own errors must not take it for one). ``where``: which line, and whether its loop progressed."""

    def __init__(self, where: str, stuck: bool):
        super().__init__(where)
        self.where, self.stuck = where, stuck


@contextlib.contextmanager
def budgeted(budget, path: str):
    """Run a launch with the group's CPU ``budget`` (a callable, True once spent) looked at every SLICE_S of
    this process's CPU time; None, or no SIGPROF (not Linux or macOS): nothing is watched here."""
    if budget is None or not hasattr(signal, "setitimer"):
        yield
        return
    watch = Watch(path, SLICE_S)

    def tick(signum, frame):
        try:
            watch.sample(frame)
        except Exception:                  # noqa: BLE001 -- the grader's own notes never stop a kernel
            pass
        if budget():
            signal.setitimer(signal.ITIMER_PROF, 0, 0)
            where = watch.where()
            raise OutOfTime(where + ", on the simulator" + watch.progress() if where else "",
                            bool(watch.stuck()))
    old = signal.signal(signal.SIGPROF, tick)
    signal.setitimer(signal.ITIMER_PROF, SLICE_S, SLICE_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, old)
