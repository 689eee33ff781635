"""Debugging and compiler hints: ``tl.device_print``, ``tl.device_assert``, ``tl.static_assert``...

``device_assert`` is enforced in every active lane (on a GPU only in debug builds); the hints
(``tl.multiple_of``, ``tl.max_contiguous``...) tell Triton's compiler facts about values and change
nothing here.
"""
from .. import runtime
from ..blocks import as_block, broadcast_shape, full_handle, unwrap
from ..errors import CompilationError, DeviceAssertionError

__all__ = ["device_print", "static_print", "device_assert", "static_assert", "debug_barrier", "multiple_of",
           "max_contiguous", "max_constancy", "assume"]


def device_print(prefix, *args, hex=False):
    """Print each program's values (like printf from every GPU thread)."""
    ch = runtime.current()
    for i, pid in enumerate(ch.pids.tolist()):
        parts = []
        for a in args:
            a = as_block(a)
            h = a.handle[i if a.lead > 1 else 0]
            parts.append(str(h.tolist()))
        print(f"pid {ch.launch.pid_tuple(pid)} {prefix} {' '.join(parts)}")


def static_print(*values, sep=" ", end="\n", file=None, flush=False):
    print(*values, sep=sep, end=end, file=file, flush=flush)


def device_assert(cond, msg="", mask=None):
    """Fail loudly, naming the program and lane, if ``cond`` is false in any active lane."""
    c = as_block(cond)
    ch = runtime.current()
    shape = c.shape
    if mask is not None:
        shape = broadcast_shape(shape, as_block(mask).shape)
    h = full_handle(c if c.dtype.is_bool() else c != 0, shape).expand(ch.P, *shape)
    bad = ~h
    if mask is not None:
        bad = bad & full_handle(as_block(mask), shape).expand(ch.P, *shape)
    if not bool(bad.any()):
        return
    prog = int(bad.reshape(ch.P, -1).any(1).nonzero()[0])
    lane = bad[prog].nonzero()[0].tolist() if shape else []
    pid = int(ch.pids[prog])
    raise DeviceAssertionError(f"device_assert failed in {runtime.location()}, "
                               f"{ch.launch.describe(pid)}"
                               + (f", lane {lane}" if lane else "") + (f": {msg}" if msg else ""))


def static_assert(cond, msg=""):
    if not bool(unwrap(cond)):
        raise CompilationError(f"static_assert failed: {msg}")


def debug_barrier():
    """Synchronise the threads of one program. A no-op: each program here is sequential."""


def multiple_of(input, values):
    return input


def max_contiguous(input, values):
    return input


def max_constancy(input, values):
    return input


def assume(cond):
    return None
