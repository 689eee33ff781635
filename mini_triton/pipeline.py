"""Shared memory: the copies of a loop's loads that Triton keeps in flight.

``for i in tl.range(0, n, BLOCK, num_stages=S)`` asks Triton to *software-pipeline* the loop: while one trip
computes, the loads of the next S - 1 trips are already on their way, each into a buffer of the program's shared
memory (a GPU's on-chip memory, 227 KB a program on an H100 or H200). So each value such a loop loads takes S - 1
copies of its bytes there, and a launch whose buffers do not fit fails before it runs: "out of resource: shared
memory". A row of 32768 fp32 values loaded in a loop of ``num_stages=4`` asks for 3 x 128 KB.

Which loads Triton 3.6 pipelines (measured on an H100: the shared memory of each compiled kernel): those of an
innermost loop (no ``for`` inside it; a ``while`` inside does not count) that names ``num_stages`` > 1 itself: a
plain ``range``, or ``tl.range`` without it, pipelines only the loads that feed a ``tl.dot``. Every load there whose
lanes move at least 4 bytes each takes S - 1 buffers: blocks and scalars of 4-byte elements, gathers and the loads
of their indices too; a 16-bit block only where Triton proves two aligned elements a lane, which it does when the
row's length and stride are multiples of 16 (the sizes Triton's launcher marks divisible by 16), not otherwise.

The simulator counts the same loads, a 16-bit block where every program's addresses start at a multiple of 16
elements, run one element apart, and (masked) keep a multiple of 16 lanes, in every trip. It leaves out loops that
call ``tl.dot``, whose other loads Triton does not pipeline. Triton adds a reduction's scratch to some counts (32
bytes for a row's sum on 8 warps): a count here is at most Triton's.
"""
from __future__ import annotations

import math

from . import runtime
from .driver import driver
from .errors import OutOfResources


class Loop:
    """One runtime loop of the programs running now: its stages, and its pipelined loads' bytes by site."""

    __slots__ = ("stages", "outer", "dot", "loads", "unproven")

    def __init__(self, stages: int):
        self.stages = stages
        self.outer = self.dot = False
        self.loads = {}                      # the site of a load -> its block's bytes (per program)
        self.unproven = set()                # 16-bit loads met unaligned in some trip: Triton cannot prove them


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


def note_load(access, elem_bytes: int):
    """A load (a memory.Access) of elements of ``elem_bytes`` each, in the innermost loop if one runs and Triton
    pipelines it: its bytes by site; a 16-bit one Triton cannot prove aligned (``aligned16``) is marked unproven."""
    ch = runtime.CURRENT
    frame = ch.loops[-1] if ch is not None and ch.loops else None
    if frame is None or frame.stages <= 1 or elem_bytes < 2:
        return
    site = access.path
    frame.loads[site] = max(frame.loads.get(site, 0), math.prod(access.shape) * elem_bytes)
    if elem_bytes == 2 and not aligned16(access):
        frame.unproven.add(site)


def aligned16(access) -> bool:
    """Whether a 16-bit load's every program starts at a multiple of 16 elements, its lanes run one element apart,
    and its mask (if any) keeps a multiple of 16 lanes: what Triton proves when the sizes are multiples of 16."""
    aff = access.aff
    if aff is None or not access.shape or aff.strides[-1] != 1 or bool((aff.base % 16 != 0).any()):
        return False
    return access.mask_h is None or bool((access.mask_h.reshape(access.mask_h.shape[0], -1).sum(1) % 16 == 0).all())


def note_dot():
    """A ``tl.dot`` in the innermost loop: Triton then pipelines only the loads that feed it (not counted here)."""
    ch = runtime.CURRENT
    if ch is not None and ch.loops:
        ch.loops[-1].dot = True


def limit() -> int:
    """The shared memory one program may have, in bytes (the driver's ``max_shared_mem``)."""
    return int(driver.active.utils.get_device_properties()["max_shared_mem"])


def check(frame: Loop):
    """Raise OutOfResources where the loop's pipelined loads, S - 1 trips of them, do not fit a program's share."""
    if frame.stages <= 1 or frame.outer or frame.dot or not frame.loads:         # (a loop that loads nothing)
        return
    per_trip = sum(n for site, n in frame.loads.items() if site not in frame.unproven)
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
