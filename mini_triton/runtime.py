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
stores and runs each group of programs that agree separately (programs that take
turns by their id, ``if i == pid`` in a loop, one by one once that line peels a
second one off).

A GPU runs programs in no fixed order. Most kernels cannot tell, but a float
``atomic_add`` or a sum built under a lock adds in the order programs arrive,
so its last bits change from run to run. Once a launch does either, the
launcher runs its remaining programs (and every later launch of the kernel) in
a shuffled order (:func:`schedule`), so the simulator shows that too.
"""
from __future__ import annotations

import contextlib
import os
import sys

import torch

from .driver import driver  # noqa: F401 -- triton.runtime.driver, as Triton's tutorials ask for the device
from .errors import CompilationError, kernel_site

# Shuffled schedules differ from run to run, as a GPU's do; MINI_TRITON_SEED fixes them.
_SEED = os.environ.get("MINI_TRITON_SEED")
_GEN = torch.Generator().manual_seed(int(_SEED) if _SEED else int.from_bytes(os.urandom(7), "little"))


# Many programs per chunk (the default), or one: MINI_TRITON_BATCH=0 or set_batching(False) runs every
# launch program by program, as Triton's interpreter does. Slower, and the same results, counts and checks:
# a way to see that batching changes nothing.
BATCH = os.environ.get("MINI_TRITON_BATCH", "1").strip().lower() not in ("0", "false", "off", "no")


def set_batching(on: bool) -> bool:
    """Run later launches many programs per chunk (``True``) or one program per chunk (``False``);
    returns the previous setting."""
    global BATCH
    old, BATCH = BATCH, bool(on)
    return old


def get_batching() -> bool:
    """Whether launches run many programs per chunk (see :func:`set_batching`)."""
    return BATCH


def schedule_state() -> torch.Tensor:
    """The state of the shuffles' generator: restored with :func:`set_schedule_state`, the next shuffles repeat."""
    return _GEN.get_state()


def set_schedule_state(state: torch.Tensor):
    _GEN.set_state(state)


def schedule(pids: torch.Tensor) -> torch.Tensor:
    """``pids`` in a random order: the order a GPU might happen to run them in."""
    return pids[torch.randperm(pids.numel(), generator=_GEN)]


class Divergence(Exception):
    """Programs of the current chunk disagree on a Python-level decision."""

    def __init__(self, values: torch.Tensor):
        super().__init__("programs take different paths")
        self.values = values
        self.site = call_path()[:1]              # the kernel line that decided: the same one turn after turn


class ViewHazard(Exception):
    """A chunk wrote into memory it had loaded as a view: its loads must copy (the launcher reruns it so)."""


class Chunk:
    """The programs executing together, plus what they did so far."""

    def __init__(self, launch, pids: torch.Tensor, may_diverge: bool = True, views: bool = False):
        self.launch = launch
        self.pids = pids                         # linear program ids, int64 (P,)
        self.P = int(pids.numel())
        # stores are logged so they can be undone if the programs later diverge
        self.undo = [] if (self.P > 1 and may_diverge) else None
        self.records = []                        # memory accesses, see memory.py
        self.max_numel = 1                       # largest block seen: sizes the next chunk
        self.waits = 0                           # reductions across a block, summed over programs (perf.py)
        self.rounds = {}                         # load waits: {bytes per thread of the load: programs} (perf.py)
        self.threads = 32 * launch.num_warps     # a program's threads: a block's lanes are spread over them
        self.issued = 0                          # float operations, per element a thread holds, of a program
        self.round_sites = None                  # the load sites of the round in flight, None when none is
        self.locks = None                        # per program: the lock it holds (an id), or -1
        self._held = None                        # held()'s answer since the last hold() (False: none held)
        self.turns = None                        # per program: its turn at a lock the chunk's programs share
        self._pid_cache = {}
        # A load is a copy of memory, as a program's registers are. Where the chunk never writes what it
        # loaded, a view of the tensor holds the same values at no copy's cost (memory.load): ``views`` says
        # whether this chunk may take them, ``loaded`` which storages it read.
        self.views = views
        self.loaded = set()
        self.loops = []                          # the runtime loops running now, innermost last (pipeline.py)

    def writing(self, buf):
        """A store or atomic into ``buf`` is about to happen: after a load of its storage, loads must copy."""
        if buf.storage_key[0] not in self.loaded:
            return
        self.launch.view_loads = False
        if self.views:
            raise ViewHazard()

    def note_load(self, site, lanes: int, elem_bytes: int):
        """A load of a block of ``lanes`` elements: on a GPU the program waits for it. The compiler issues the
        loads of one pass through the code together (x, dy and r of one row), so they share one wait; the next
        execution of a load already in the round (a loop's next iteration) waits again (perf.py weighs each wait
        by its load's bytes per thread: the compiler keeps several small loads in flight). A load of one element
        rides along."""
        if lanes <= 1:
            return
        if self.round_sites is None or site in self.round_sites:
            per_thread = lanes * elem_bytes / (32 * self.launch.num_warps)
            self.rounds[per_thread] = self.rounds.get(per_thread, 0) + self.P
            self.round_sites = set()
        self.round_sites.add(site)

    def note_wait(self):
        """A reduction across the block: the program's threads wait for each other (one round, perf.py)."""
        self.waits += self.P

    def hold(self, positions: torch.Tensor, lock_ids: torch.Tensor):
        """Programs at ``positions`` (of this chunk) now hold the locks ``lock_ids`` (-1: none)."""
        if self.locks is None:
            self.locks = torch.full((self.P,), -1, dtype=torch.int64)
        self.locks[positions] = lock_ids
        self._held = None

    def held(self):
        """A copy of each program's lock, or None when no program holds one: one copy, shared by the accesses
        until the locks change (records keep it, and never write it)."""
        if self.locks is None:
            return None
        if self._held is None:
            self._held = self.locks.clone() if bool((self.locks >= 0).any()) else False
        return None if self._held is False else self._held

    def program_id(self, axis: int) -> torch.Tensor:
        if axis not in self._pid_cache:
            g = self.launch.grid
            below = 1
            for a in range(axis):
                below *= g[a]
            self._pid_cache[axis] = (self.pids // below) % g[axis]
        return self._pid_cache[axis]


# Triton's compile rules (a loop-carried variable keeps its type, a stored value is never of higher rank than its
# pointers, a block's dims are powers of 2, a grid is a tuple...). "error", the default: a kernel that breaks one
# raises as Triton refuses to compile it. "record" (the grader's jobs, as races are recorded): the first rule a launch
# breaks is noted in its statistics (LaunchStats.rule) and the kernel runs as written, so that the rest of it can
# still be checked and the broken rule is one mistake, charged once. Rules with no meaning to run on raise in both.
RULES = os.environ.get("MINI_TRITON_RULES", "error")
_PENDING: list = []              # rules broken before their launch began (the grid), for it to take


def set_rule_mode(mode: str) -> str:
    """'error' (default) or 'record' (see RULES); returns the previous mode."""
    global RULES
    if mode not in ("error", "record"):
        raise ValueError(f"rule mode must be 'error' or 'record', got {mode!r}")
    old, RULES = RULES, mode
    return old


def refuse(message: str, error=None):
    """A compile rule broken: raise ``error`` (a CompilationError of ``message`` by default), or, in rule mode
    "record", note the message on the running launch (the next launch's, before one runs) and return."""
    if RULES != "record":
        raise error if error is not None else CompilationError(message)
    if CURRENT is None:
        _PENDING.append(message)
    elif CURRENT.launch.rule is None:
        CURRENT.launch.rule = message


def take_pending() -> str | None:
    """The first rule broken before the launch now starting began (its grid), or None."""
    first = _PENDING[0] if _PENDING else None
    _PENDING.clear()
    return first


CURRENT: Chunk | None = None
# Set by stats.plan(): a function that takes each launch (kernel name, grid, programs, num_warps, tensor
# arguments) instead of running it, so that the host's code can run at a shape too large to simulate.
PLANNING = None
KERNEL_CODES: set = set()        # the code objects of every @jit function: error messages find their lines
STOP_CODES: set = set()          # the launcher's frame that runs a chunk's body: no kernel frame lies beyond it


def current() -> Chunk:
    if CURRENT is None:
        raise CompilationError("triton.language functions can only be called inside a kernel "
                               "launched as kernel[grid](...)")
    return CURRENT


def call_path() -> tuple:
    """The lines of every kernel frame running now, innermost first: where a load inside a @jit helper was called
    from (the helper's line alone is the same for x and for dy)."""
    f, path = sys._getframe(1), []
    while f is not None and f.f_code not in STOP_CODES:     # (the frames of whoever launched it: many, none ours)
        if f.f_code in KERNEL_CODES:
            path.append((f.f_code, f.f_lineno))
        f = f.f_back
    return tuple(path)


def site():
    """(kernel function, line, file) running now, for errors raised after the launch (errors.raised_at)."""
    return kernel_site(KERNEL_CODES, 2) if CURRENT is not None else ("", 0, "")


def site_of(path: tuple) -> tuple:
    """site()'s (kernel function, line, file), read from a call_path() already walked."""
    if not path:
        return "", 0, ""
    code, line = path[0]
    return code.co_name, line, code.co_filename


def location(where=None) -> str:
    """'kernel_name line N' for error messages (of ``where``, a site(), or of the line running now)."""
    if CURRENT is None and where is None:
        return ""
    name, line, _ = where or kernel_site(KERNEL_CODES, 2)
    name = name or (CURRENT.launch.name if CURRENT is not None else "")
    return f"{name}" + (f" line {line}" if line else "")


@contextlib.contextmanager
def unrecorded():
    """Torch ops in the block are not host ops of a ``record(host_ops=True)`` around it: a launch's own work, or a
    checker's (reading which elements a kernel stored, say), is not the program's. The recording is a torch
    dispatch mode (stats.py); this steps out of every mode for the block, through torch's private
    ``_disable_current_modes``, used here only."""
    from torch.utils._python_dispatch import _disable_current_modes
    with _disable_current_modes():
        yield
