"""The launcher: ``@triton.jit`` and ``kernel[grid](*args)``.

A launch runs the kernel function once per *program*; ``tl.program_id``
tells each program which piece of the work is its own. The simulator runs
programs in chunks (see runtime.py): one Python execution of the kernel body
computes a whole chunk, every block carrying a leading program dimension.
Chunks are sized so that their blocks stay around a megabyte, small enough
to live in cache.

After the last chunk the launcher hands the launch and its memory accesses
to the analyses that watch launches (observers.py): the race check
(races.py), the traffic statistics (stats.py).
"""
from __future__ import annotations

import ast
import builtins
import functools
import inspect
import os
import textwrap

import torch

from . import dtypes
from . import frontend, memory, observers, runtime
from .blocks import constexpr, scalar, tensor
from .errors import CompilationError, describe_program, student_traceback

# Launch options that real Triton accepts and that mean nothing on a CPU.
LAUNCH_OPTIONS = {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion",
                  "launch_cooperative_grid", "launch_pdl", "debug", "sanitize_overflow", "stream",
                  "warmup", "grid", "enable_warp_specialization", "num_buffers_warp_spec",
                  "num_consumer_groups", "reg_dec_producer", "reg_inc_consumer"}

TARGET_LANES = int(os.environ.get("MINI_TRITON_CHUNK_LANES", 1 << 22))
MAX_GRID = (2**31 - 1, 65535, 65535)


class Launch:
    """One ``kernel[grid](...)`` call."""

    def __init__(self, fn, grid, buffers, rank=3, num_warps=4):
        self.name = fn.__name__
        self.num_warps = num_warps             # threads per program = 32 * num_warps (16-bit sums use it)
        self.code = fn.__code__
        self.grid = grid
        self.rank = rank                       # how many grid dims the caller gave
        self.programs = grid[0] * grid[1] * grid[2]
        self.buffers = buffers
        self.lock_ids = {}                     # (storage, element) of a lock word -> a small id
        self.exchanged = {}                    # storage -> (last value xchg'd into each element, by which program)
        self.added = {}                        # storage -> which program last made a float atomic_add into each
        self.order_dependent = None            # why its result depends on program order, if it does
        self.race = None                       # the first data race found, in race mode "record"
        self.race_on = ()                      # the names of the buffer it was found in (one memory, any view)
        self.race_kind = None                  # "store", "load", "atomic store" or "atomic load" (races._message)
        self.order_on = None                   # the name of the buffer that made it order-dependent
        self.rule = runtime.take_pending()     # the first compile rule broken, in rule mode "record"
        self.undefined_lanes = None            # the first masked tl.load without other= (its lanes hold NaN)
        self.populated = set()                 # buffers whose pages are mapped for writing (memory.store)
        self.view_loads = None                 # may loads be views? None: not known yet (runtime.Chunk.writing)
        self.waits = 0                         # reductions across a block, summed over programs (perf.py)
        self.rounds = {}                       # load waits by bytes per thread (runtime.Chunk.note_load)
        self.issued = 0                        # float block operations per thread, summed over programs (perf.py)
        self.lone_axes = set()                 # axes tl.program_id asked for where the grid has one program

    def lock_id(self, key) -> int:
        return self.lock_ids.setdefault(key, len(self.lock_ids))

    def pid_tuple(self, linear: int):
        g0, g1, _ = self.grid
        return (linear % g0, (linear // g0) % g1, linear // (g0 * g1))[:self.rank]

    def describe(self, linear: int) -> str:
        return describe_program(self.pid_tuple(linear), self.grid[:self.rank])


def _is_constexpr_annotation(ann) -> bool:
    if ann is constexpr:
        return True
    return isinstance(ann, str) and ann.replace(" ", "").endswith("constexpr")


class JITFunction:
    """A kernel: call it as ``kernel[grid](*args, **constexprs)``."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.__wrapped__ = fn
        self.signature = inspect.signature(fn)
        self.arg_names = list(self.signature.parameters)
        # every parameter a plain one (no *args, **kwargs or keyword-only): a launch that names each binds by zip
        self._plain = all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in self.signature.parameters.values())
        self.constexprs = {n for n, p in self.signature.parameters.items()
                           if _is_constexpr_annotation(p.annotation)}
        runtime.KERNEL_CODES.add(fn.__code__)
        self._body = None
        self._chunk_hint = {}
        self._order_dependent = False          # a launch of it used float atomics or locks
        self._may_diverge = None

    @property
    def may_diverge(self) -> bool:
        """Can the programs of a chunk take different Python paths? Not if the kernel (and the @jit
        helpers it calls) is straight-line code: then a chunk needs no undo log for its stores."""
        if self._may_diverge is None:
            self._may_diverge = _may_diverge(self.fn, set())
        return self._may_diverge

    @property
    def body(self):
        """What runs: ``fn`` compiled again in Triton's kernel language (frontend.py): its outside names
        bound as Triton binds them, its attributes checked, its ``and``/``or`` between blocks element-wise."""
        if self._body is None:
            self._body = frontend.compile_kernel(self.fn, (JITFunction,))
            runtime.KERNEL_CODES.add(self._body.__code__)
        elif self._body.__rules__ and runtime.CURRENT is not None:
            runtime.refuse(self._body.__rules__[0])    # a rule its bound names broke: every launch that runs it
        return self._body

    def __repr__(self):
        return f"JITFunction({self.fn.__module__}:{self.fn.__qualname__})"

    def __getitem__(self, grid):
        return functools.partial(self.run, grid=grid)

    def __call__(self, *args, **kwargs):
        if runtime.CURRENT is not None:          # a @jit helper called from a kernel
            return self.body(*args, **kwargs)
        raise CompilationError(f"{self.__name__} is a kernel: launch it as {self.__name__}[grid](...), "
                               f"with grid a tuple such as (n_rows,)")

    def schedule_state(self):
        """What decides the order its next launch runs programs in (the shuffles' generator, whether it shuffles
        from the start, its chunk sizes): :meth:`set_schedule_state` with it makes a replay of a launch run its
        programs in the same order, so that only what its data changes can change what it stores."""
        return runtime.schedule_state(), self._order_dependent, dict(self._chunk_hint)

    def set_schedule_state(self, state):
        gen, self._order_dependent, hint = state
        runtime.set_schedule_state(gen)
        self._chunk_hint = dict(hint)

    # ------------------------------------------------------------------
    def bind(self, args, kwargs):
        kwargs = {k: v for k, v in kwargs.items() if k not in LAUNCH_OPTIONS or k in self.arg_names}
        names = self.arg_names
        if self._plain and len(args) + len(kwargs) == len(names) and all(n in kwargs for n in names[len(args):]):
            return {**dict(zip(names, args)), **{n: kwargs[n] for n in names[len(args):]}}
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.__name__}: {e}") from None
        bound.apply_defaults()
        return dict(bound.arguments)

    def run(self, *args, grid, **kwargs):
        __tracebackhide__ = True                 # pytest: an error ends at the kernel's line
        # the kernel's own work, not host-side ops (stats.record); in torch's inference mode, which skips autograd's
        # bookkeeping on each of the many small ops a launch makes (a quarter of their cost)
        with runtime.unrecorded(), torch.inference_mode():
            try:
                self._run(args, kwargs, grid)
            except Exception as e:
                raise e.with_traceback(student_traceback(e.__traceback__))

    def _run(self, args, kwargs, grid):
        runtime.take_pending()                   # a rule noted for a launch that then never began is not this one's
        values = self.bind(args, kwargs)
        grid, rank = _normalize_grid(grid, values, self.__name__)
        if runtime.PLANNING is not None:          # stats.plan(): noted, not run
            runtime.PLANNING(self.__name__, grid, int(kwargs.get("num_warps") or 4),
                             {n: v for n, v in values.items() if isinstance(v, torch.Tensor)})
            return
        buffers, kargs = [], []
        for name, v in values.items():
            kargs.append(self._convert_arg(name, v, buffers))
        launch = Launch(self.fn, grid, buffers, rank, num_warps=int(kwargs.get("num_warps") or 4))
        if launch.programs == 0:
            return
        try:
            records = self._execute(launch, kargs, values)
            observers.launched(launch, records)
        finally:
            for b in buffers:
                b.release()

    def _convert_arg(self, name, v, buffers):
        if isinstance(v, constexpr):
            v = v.value
        if name in self.constexprs:
            return v
        if isinstance(v, torch.Tensor):
            buf = memory.check_pointer_arg(v, name)
            buffers.append(buf)
            return tensor(_ZERO, dtypes.pointer_type(buf.elem), (), buf=buf)
        if v is None:
            return None
        if isinstance(v, (bool, int, float)):
            return scalar(v)
        if isinstance(v, dtypes.dtype):
            return v
        raise TypeError(f"{self.__name__}: argument {name} has unsupported type {type(v).__name__}; "
                        f"kernels take tensors, Python numbers and tl.constexpr values")

    def _execute(self, launch, kargs, values):
        key = tuple(repr(values[n]) for n in sorted(self.constexprs))
        size = self._chunk_hint.get(key, 16) if runtime.BATCH else 1
        order = torch.arange(launch.programs)
        shuffled = self._order_dependent
        if shuffled:                             # see runtime.schedule
            order = runtime.schedule(order)
        committed, start = [], 0
        while start < launch.programs:
            stop = min(start + size, launch.programs)
            max_numel = self._run_group(launch, kargs, order[start:stop], committed)
            start = stop
            if launch.order_dependent and not shuffled:
                order[start:] = runtime.schedule(order[start:])
                shuffled = self._order_dependent = True
            if runtime.BATCH:
                size = max(1, min(4096, TARGET_LANES // max(1, max_numel)))
        if runtime.BATCH:
            self._chunk_hint[key] = size
        return committed

    def _run_group(self, launch, kargs, pids, committed, split_at=None) -> int:
        """Run programs ``pids`` together; split them if they take different paths (``split_at``: these programs
        are a group that a split at that kernel line made)."""
        chunk = runtime.Chunk(launch, pids, may_diverge=self.may_diverge, views=self._views(launch, pids))
        outer, runtime.CURRENT = runtime.CURRENT, chunk
        try:
            self.body(*kargs)
        except runtime.ViewHazard:
            memory.undo(chunk)
            runtime.CURRENT = outer
            return self._run_group(launch, kargs, pids, committed, split_at)
        except runtime.Divergence as d:
            memory.undo(chunk)
            runtime.CURRENT = outer
            if chunk.turns is not None:                     # programs waiting for a lock: turn by turn
                for turn in range(int(chunk.turns.max()) + 1):
                    self._run_group(launch, kargs, pids[chunk.turns == turn], committed)
                return chunk.max_numel
            keys = d.values.expand(pids.numel()) if d.values.numel() == 1 else d.values
            _, inverse = torch.unique(keys, return_inverse=True)
            first_pid = {}
            for g, p in zip(inverse.tolist(), pids.tolist()):
                first_pid.setdefault(g, p)
            if split_at == d.site and len(first_pid) == 2 and int(torch.bincount(inverse).min()) == 1:
                # one program peeled off the rest again at the same line (`for i in range(P): if i == pid:`): the
                # rest would rerun the kernel from its start once per program; run them one by one instead
                for p in sorted(pids.tolist()):
                    self._run_group(launch, kargs, pids.new_tensor([p]), committed, d.site)
                return chunk.max_numel
            for g in sorted(first_pid, key=first_pid.get):   # groups in program order
                self._run_group(launch, kargs, pids[inverse == g], committed, d.site)
            return chunk.max_numel
        except BaseException:
            if chunk.undo is not None:
                memory.undo(chunk)
            raise
        finally:
            runtime.CURRENT = outer
        if launch.view_loads is None:
            launch.view_loads = True
        committed.extend(chunk.records)
        launch.waits += chunk.waits
        launch.issued += chunk.issued * chunk.P
        for per_thread, programs in chunk.rounds.items():
            launch.rounds[per_thread] = launch.rounds.get(per_thread, 0) + programs
        return chunk.max_numel

    def _views(self, launch, pids) -> bool:
        """May this chunk's loads be views of memory? Once a chunk ran without writing what it loaded, yes: a
        straight-line kernel repeats the same loads and stores in every chunk. A chunk that may diverge keeps an
        undo log, so it may try before anything is known (a write after a view-load undoes it and reruns it)."""
        if launch.view_loads is None:
            return self.may_diverge and pids.numel() > 1
        return launch.view_loads


_ZERO = torch.zeros(1, dtype=torch.int64)     # a pointer argument's offset, shared: a block's handle is never written


def _normalize_grid(grid, values, name):
    if callable(grid):
        grid = grid(dict(values))
    if not isinstance(grid, (tuple, list)):
        message = (f"{name}[{grid!r}]: the grid must be a tuple, such as ({grid!r},) for a 1-D grid; Triton fails on "
                   f"a GPU with \"TypeError: object of type '{type(grid).__name__}' has no len()\"")
        runtime.refuse(message, TypeError(message))
        grid = (grid,)
    grid = tuple(int(g) for g in grid)
    rank = len(grid)
    if not 1 <= rank <= 3:
        raise ValueError(f"{name}: the grid must have 1 to 3 dimensions, got {grid}")
    grid = grid + (1,) * (3 - rank)
    for axis, (g, limit) in enumerate(zip(grid, MAX_GRID)):
        if g < 0 or g > limit:
            raise ValueError(f"{name}: grid dimension {axis} is {g}; it must be between 0 and {limit}")
    return grid, rank


# Python constructs through which a block's value could steer the code: a chunk running them may diverge.
_BRANCHES = (ast.If, ast.While, ast.IfExp, ast.BoolOp, ast.For, ast.AsyncFor, ast.comprehension, ast.Assert,
             ast.Try, ast.With, ast.Match, ast.Lambda)
_HARMLESS_BUILTINS = {"len", "isinstance", "print", "tuple", "list"}


def _may_diverge(fn, seen) -> bool:
    """True unless ``fn``'s source is straight-line: no branch, loop or call that could test a block."""
    if fn in seen:
        return False
    seen.add(fn)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return True
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.FunctionDef) else tree.body
    for node in (n for stmt in body for n in ast.walk(stmt)):
        if isinstance(node, _BRANCHES):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            target = fn.__globals__.get(node.func.id, getattr(builtins, node.func.id, None))
            if isinstance(target, JITFunction):
                if _may_diverge(target.fn, seen):
                    return True
            elif node.func.id not in _HARMLESS_BUILTINS or target is not getattr(builtins, node.func.id, None):
                return True
    return False


runtime.STOP_CODES.add(JITFunction._run_group.__code__)    # where call_path stops walking the frames


def jit(fn=None, **options):
    """``@triton.jit``: turn a Python function into a kernel (options such as
    ``do_not_specialize`` are accepted and ignored)."""
    if fn is None:
        return lambda f: JITFunction(f)
    return JITFunction(fn)
