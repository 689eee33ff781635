"""Which programs are running right now.

A GPU runs every program of a launch at once; the simulator runs them a
*chunk* at a time. Every block value carries a leading "program" dimension:
size P when its value differs between the chunk's programs (``program_id``,
a row loaded from memory), size 1 when all programs share it (``arange``, a
kernel argument). That is how one Python execution of the kernel body stands
for P programs, and why it is fast.

When the kernel's Python control flow depends on the program (``if pid == 0``
or ``range(pid, n, step)``), the programs of a chunk would need different
paths. The block raises :class:`Divergence`; the launcher undoes the chunk's
stores and runs each group of programs that agree separately.
"""
from __future__ import annotations

import torch


class Divergence(Exception):
    """Programs of the current chunk disagree on a Python-level decision."""

    def __init__(self, values: torch.Tensor):
        super().__init__("programs take different paths")
        self.values = values


class Chunk:
    """The programs executing together, plus what they did so far."""

    def __init__(self, launch, pids: torch.Tensor, may_diverge: bool = True):
        self.launch = launch
        self.pids = pids                         # linear program ids, int64 (P,)
        self.P = int(pids.numel())
        # stores are logged so they can be undone if the programs later diverge
        self.undo = [] if (self.P > 1 and may_diverge) else None
        self.records = []                        # memory accesses, see memory.py
        self.max_numel = 1                       # largest block seen: sizes the next chunk
        self._pid_cache = {}

    def program_id(self, axis: int) -> torch.Tensor:
        if axis not in self._pid_cache:
            g = self.launch.grid
            below = 1
            for a in range(axis):
                below *= g[a]
            self._pid_cache[axis] = (self.pids // below) % g[axis]
        return self._pid_cache[axis]


CURRENT: Chunk | None = None


def current() -> Chunk:
    if CURRENT is None:
        from .errors import CompilationError
        raise CompilationError("triton.language functions can only be called inside a kernel "
                               "launched as kernel[grid](...)")
    return CURRENT


def location() -> str:
    """'kernel_name line N' for error messages."""
    from .errors import kernel_location
    from .launcher import _KERNEL_CODES
    if CURRENT is None:
        return ""
    name, line = kernel_location(_KERNEL_CODES)
    name = name or CURRENT.launch.name
    return f"{name}" + (f" line {line}" if line else "")
