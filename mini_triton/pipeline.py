"""Shared memory: the copies of a loop's loads that Triton keeps in flight.

``for i in tl.range(0, n, BLOCK, num_stages=S)`` asks Triton to *software-pipeline* the loop: while one trip
computes, the loads of the next S - 1 trips are already on their way, each into a buffer of the program's shared
memory (a GPU's on-chip memory, 227 KB a program on an H100 or H200). So each block such a loop loads takes S - 1
copies of its bytes there, and a launch whose buffers do not fit fails before it runs: "out of resource: shared
memory". A row of 32768 fp32 values loaded in a loop of ``num_stages=4`` asks for 3 x 128 KB.

Which loads Triton pipelines (its pass that assigns latencies, Triton 3.6): only those of an innermost loop (one
with no ``for`` or ``while`` inside) that names ``num_stages`` > 1 itself; a plain ``range`` or ``tl.range``
without it pipelines only the loads that feed a ``tl.dot``. Only loads of a block whose lanes move at least 4 bytes
each: a scalar's load (one ``r`` of a row) is not pipelined, nor a 16-bit load of one element per lane.

The simulator counts the loads of 4-byte and wider elements, whose lanes always qualify, and leaves out 16-bit ones
(whether Triton pipelines those depends on the alignment it proves), loops that call ``tl.dot``, and loops with a
load whose addresses come from loaded values (a gather, ``x_ptr + idx``: Triton then spreads the S - 1 stages over
the chain of loads, fewer buffers each). So it refuses only what Triton refuses, and each count is at most Triton's
(Triton adds a few bytes for a reduction's scratch).
"""
from __future__ import annotations

from . import runtime
from .driver import driver
from .errors import OutOfResources


class Loop:
    """One runtime loop of the programs running now: its stages, and its pipelined loads' bytes by site."""

    __slots__ = ("stages", "outer", "dot", "gather", "loads")

    def __init__(self, stages: int):
        self.stages = stages
        self.outer = self.dot = self.gather = False
        self.loads = {}                      # the site of a load -> its block's bytes (per program)


def loop(trips, num_stages):
    """``trips`` (the loop variable of each trip), run as a loop that Triton pipelines with ``num_stages`` (None:
    the launch's, which pipelines no load of ours): its loads are noted, and checked when it ends."""
    ch = runtime.CURRENT
    if ch is None:
        yield from trips
        return
    stack = ch.loops
    if stack:
        stack[-1].outer = True               # a loop with a loop inside is not pipelined
    frame = Loop(num_stages if isinstance(num_stages, int) else 0)     # a runtime value: Triton's default
    stack.append(frame)
    try:
        yield from trips
    finally:
        stack.pop()
    check(frame)                             # the kernel's frame is at the loop's line: errors name it


def while_loop():
    """A ``while`` loop starts (frontend.py calls this before each): the loop around it, if any, is not innermost."""
    ch = runtime.CURRENT
    if ch is not None and ch.loops:
        ch.loops[-1].outer = True


def note_load(site, lanes: int, elem_bytes: int, is_block: bool, regular: bool = True):
    """A load of ``lanes`` elements of ``elem_bytes`` each, at ``site``, in the innermost loop if one runs;
    ``regular``: its addresses are an affine function of the program and the lane (not of loaded values)."""
    ch = runtime.CURRENT
    if ch is None or not ch.loops:
        return
    frame = ch.loops[-1]
    if not regular:
        frame.gather = True
    elif frame.stages > 1 and is_block and elem_bytes >= 4:
        frame.loads[site] = max(frame.loads.get(site, 0), lanes * elem_bytes)


def note_dot():
    """A ``tl.dot`` in the innermost loop: Triton then pipelines only the loads that feed it (not counted here)."""
    ch = runtime.CURRENT
    if ch is not None and ch.loops:
        ch.loops[-1].dot = True


def limit() -> int:
    """The shared memory one program may have, in bytes (the driver's ``max_shared_mem``)."""
    return int(driver.active.utils.get_device_properties()["max_shared_mem"])


def check(frame: Loop):
    if frame.stages <= 1 or frame.outer or frame.dot or frame.gather or not frame.loads:
        return
    per_trip = sum(frame.loads.values())
    need, most = (frame.stages - 1) * per_trip, limit()
    if need <= most:
        return
    fits = [s for s in (3, 2) if s < frame.stages and (s - 1) * per_trip <= most]
    raise OutOfResources(
        f"{runtime.location()}: out of resource: shared memory, Required: at least {need}, Hardware limit: {most}. "
        f"Triton pipelines this loop (num_stages={frame.stages}): it keeps the loads of the next {frame.stages - 1} "
        f"trips in flight, each trip's {per_trip} bytes in shared memory, {need} bytes in all, and the launch fails "
        f"on a GPU. Use "
        + (f"num_stages={fits[0]}, " if fits else "")
        + "a smaller block per trip, or no num_stages (a plain range pipelines none of these loads).")
