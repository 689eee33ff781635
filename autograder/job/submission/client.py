"""``@triton.jit`` in the submission's process: a launch is a message to the judge's process, which runs it.

The submission imports mini_triton as always, but in a graded job its ``jit`` makes a
:class:`RemoteKernel`. ``kernel[grid](...)`` sends the judge what it needs and nothing it must believe:

- which kernel: its name and first line in rmsnorm.py (the judge reads the source from its own copy of
  the file), and how each name the kernel reads from outside was bound here, described as plain data
  (another kernel, a constexpr's value, a dtype's name, a module of the language: :func:`describe`);
- the arguments: numbers as they are, and each tensor as the file descriptor of the shared memory it
  lives in (its storage, moved to shared memory on first use) with its offset, shape, strides and dtype.

The judge runs the launch on the simulator, in its own process, against its own copy of that memory,
and writes what the kernel stored back into it; an error comes back as the same exception, raised here.
Nothing in this process decides a grade: it can be changed by the submission at will.
"""
from __future__ import annotations

import builtins
import functools
import inspect
import os
import types

import torch

import mini_triton
from mini_triton.autotune import Autotuner as SimulatedAutotuner
from mini_triton import dtypes
from mini_triton import errors as simulator_errors
from mini_triton import frontend
from mini_triton.blocks import constexpr
from mini_triton.launcher import LAUNCH_OPTIONS

from ..wire.names import MODULES, NAMESPACES
from . import recipe

mini_triton.stats.not_written_in(__file__)      # a grid it evaluates runs the student's code, at their launch line



class Memory:
    """This side's shared memory: the descriptor of each storage a launch or an answer passes."""

    def __init__(self):
        self.inputs = {}                   # storage address -> descriptor, of the judge's inputs (kept mapped)
        self.lent = []                     # descriptors made for the message being sent: closed once it is

    def adopt(self, t: torch.Tensor, fd: int):
        """``t`` lives in the judge's memory ``fd`` (an input; its mapping is kept, so its address is never
        reused)."""
        self.inputs[t.untyped_storage().data_ptr()] = fd

    def handle(self, t: torch.Tensor, fds: list) -> dict:
        """The description of tensor ``t`` the judge reads, its storage's descriptor appended to ``fds``."""
        with mini_triton.unrecorded():                     # the grader's own work, not the submission's host ops
            storage = t.untyped_storage()
            fd = self.inputs.get(storage.data_ptr())
            if fd is None:
                if not storage.is_shared():
                    storage.share_memory_()               # in place: every view of it moves along
                fd = os.dup(torch.UntypedStorage._share_fd_cpu_(storage)[0])   # torch keeps (and closes) its own
                self.lent.append(fd)
            fds.append(fd)
            return {"fd": len(fds) - 1, "nbytes": storage.nbytes(), "offset": t.storage_offset(),
                    "shape": list(t.shape), "strides": list(t.stride()), "dtype": str(t.dtype).removeprefix("torch.")}

    def release(self):
        for fd in self.lent:
            _close(fd)
        self.lent.clear()


class Link:
    """The channel to the judge and this side's memory, set by host.py before the submission is imported."""
    channel = None
    memory = Memory()
    covered = {}            # storage address -> elements the judge says this phase's kernels stored there
    recording = None        # a list while a step is recorded for the judge's timing (host.py's "record"): each
                            # launch noted whole here, never sent, never run


def plain(v):
    """A constant a kernel may be given, as JSON: bool, int, float (inf and nan too), str or None."""
    if v is None or isinstance(v, (bool, int, str)):
        return {"value": v}
    if isinstance(v, float):
        return {"float": repr(v)}
    if isinstance(v, dtypes.dtype):
        return {"dtype": _dtype_name(v)}
    return None


def _dtype_name(d) -> str:
    return next((name for name in mini_triton.language.__all__ if getattr(mini_triton.language, name) is d),
                repr(d))


def describe(value, seen: dict) -> dict:
    """How a kernel's outside name is bound here, as plain data the judge binds again (frontend.bind)."""
    if isinstance(value, RemoteKernel):
        return {"kind": "kernel", **value.identity(seen)}
    if isinstance(value, constexpr):
        return {"kind": "constexpr", "value": plain(value.value) or {"other": type(value.value).__name__}}
    if isinstance(value, dtypes.dtype):
        return {"kind": "dtype", "name": _dtype_name(value)}
    if isinstance(value, types.ModuleType) and value.__name__ in MODULES:
        return {"kind": "module", "name": MODULES[value.__name__]}
    for space, module in NAMESPACES.items():
        names = getattr(module, "__all__", ())
        found = next((n for n in names if getattr(module, n, None) is value), None) if callable(value) else None
        if found:
            return {"kind": "op", "space": space, "name": found}
    out = {"kind": "foreign", "type": type(value).__name__, "module": isinstance(value, types.ModuleType),
           "function": inspect.isfunction(value) or inspect.isbuiltin(value) or inspect.ismethod(value),
           "name": getattr(value, "__name__", ""), **({"plain": plain(value)} if plain(value) else {})}
    if inspect.isfunction(value):          # a plain function: where its def is, should the judge run it as written
        out["as_written"] = _PLAIN.setdefault(value, RemoteKernel(value)).identity(seen)
    return out


_PLAIN: dict = {}                          # {plain function a kernel reads: its RemoteKernel, for its identity}


class RemoteKernel:
    """A ``@triton.jit`` function of the submission; ``kernel[grid](...)`` runs it in the judge's process."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__, self.__doc__, self.__module__ = fn.__name__, fn.__doc__, fn.__module__
        self.__wrapped__ = fn
        self.signature = inspect.signature(fn)
        self.arg_names = list(self.signature.parameters)
        self.names = None                  # the names the kernel reads from outside (frontend.free_names)

    def __repr__(self):
        return f"JITFunction({self.fn.__module__}:{self.fn.__qualname__})"

    def __getitem__(self, grid):
        return functools.partial(self.run, grid=grid)

    def __call__(self, *args, **kwargs):
        raise simulator_errors.CompilationError(f"{self.__name__} is a kernel: launch it as {self.__name__}[grid]"
                                                f"(...), with grid a tuple such as (n_rows,)")

    def identity(self, seen: dict) -> dict:
        """Where the kernel is (name, first line), its outside names and its defaults: each described once."""
        key = id(self)
        if key in seen:
            return {"ref": seen[key]}
        seen[key] = len(seen)
        out = {"id": seen[key], "name": self.__name__, "line": self.fn.__code__.co_firstlineno,
               "defaults": {n: plain(_unwrapped(p.default)) or {"other": type(p.default).__name__}
                            for n, p in self.signature.parameters.items() if p.default is not p.empty}}
        if self.names is None:                             # the source is read once; the bindings at each launch
            try:
                self.names = frontend.free_names(frontend.parse(self.fn))
            except simulator_errors.CompilationError:
                self.names = []
        names = self.names
        cells = dict(zip(self.fn.__code__.co_freevars, self.fn.__closure__ or ()))
        scope = {**self.fn.__globals__, **{k: c.cell_contents for k, c in cells.items()}}
        out["globals"] = {n: describe(scope[n], seen) for n in names if n in scope}
        return out

    def run(self, *args, grid, **kwargs):
        __tracebackhide__ = True
        bound = self._bind(args, kwargs)
        if callable(grid):
            grid = grid(dict(bound))
        if Link.recording is not None:                     # the timing's recipe (host.py's "record")
            Link.recording.append({"kernel": self.identity({}), "grid": _grid(grid), "at": recipe.mark(),
                                   "args": [self._described(a) for a in args],
                                   "kwargs": {k: self._described(v) for k, v in kwargs.items()}})
            return
        fds, tensors = [], []
        message = {"launch": {"kernel": self.identity({}), "grid": _grid(grid), "at": recipe.mark(),
                              "args": [self._arg(a, fds, tensors) for a in args],
                              "kwargs": {k: self._arg(v, fds, tensors) for k, v in kwargs.items()}}}
        try:
            Link.channel.send(message, fds)
        finally:
            Link.memory.release()
        reply, extra = Link.channel.recv()
        for fd in extra:
            _close(fd)
        if "error" in reply:
            raise _exception(reply["error"])
        for t, n in zip(tensors, reply.get("stored") or []):
            key = t.untyped_storage().data_ptr()
            Link.covered[key] = Link.covered.get(key, 0) + int(n)

    def _bind(self, args, kwargs):
        kwargs = {k: v for k, v in kwargs.items() if k not in LAUNCH_OPTIONS or k in self.arg_names}
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.__name__}: {e}") from None
        bound.apply_defaults()
        return bound.arguments

    def _arg(self, v, fds, tensors):
        if isinstance(v, torch.Tensor):
            tensors.append(v)
            return {"tensor": Link.memory.handle(v, fds), "ref": recipe.ref(v)}
        return self._described(v)

    @staticmethod
    def _described(v):
        """An argument as plain data: a tensor by its ref in the recipe, a number, a constexpr's value."""
        if isinstance(v, torch.Tensor):
            return {"ref": recipe.ref(v)}
        if isinstance(v, constexpr):
            return {"constexpr": plain(v.value) or {"other": type(v.value).__name__}}
        return plain(v) or {"other": type(v).__name__}


def _unwrapped(value):
    """A default's value: a ``tl.constexpr(2)`` default is 2, as Triton reads it."""
    return value.value if isinstance(value, constexpr) else value


def _grid(grid):
    if isinstance(grid, int) and not isinstance(grid, bool):
        return int(grid)                  # as given: the judge's launch notes that Triton needs a tuple
    try:
        return [int(g) for g in grid]
    except (TypeError, ValueError):
        raise TypeError(f"the grid must be a tuple of ints (or a function returning one), got {grid!r}") from None


def _close(fd):
    try:
        os.close(fd)
    except OSError:
        pass


def _exception(error: dict) -> BaseException:
    """The judge's error, as the exception the simulator raised there (its type by name)."""
    kind = getattr(simulator_errors, error.get("type", ""), None) or getattr(builtins, error.get("type", ""), None)
    if not (isinstance(kind, type) and issubclass(kind, Exception)) or kind.__module__ not in (
            "builtins", "mini_triton.errors"):
        kind = RuntimeError
    try:
        return kind(error.get("message", ""))
    except TypeError:
        return RuntimeError(error.get("message", ""))


def jit(fn=None, **options):
    """``@triton.jit`` in a graded job: the kernel runs in the judge's process."""
    if fn is None:
        return lambda f: RemoteKernel(f)
    return RemoteKernel(fn)


class Autotuner(SimulatedAutotuner):
    """``@triton.autotune`` in a graded job: on the simulator its first config runs (mini_triton.autotune); in the
    timing's recipe every config's launch is recorded, as one choice the judge makes by timing each on its GPU."""

    def run(self, *args, grid, **kwargs):
        if Link.recording is None:
            return super().run(*args, grid=grid, **kwargs)
        configs = self.configs
        if self.prune and len(configs) > 1:
            configs = list(self.prune(configs, self.by_position(args), grid=grid, **kwargs)) or configs[:1]
        start, named = len(Link.recording), self.named(args, kwargs)
        for cfg in configs[:MAX_CONFIGS]:
            if cfg.pre_hook:                   # run before each launch, as Triton runs it: its torch ops are recorded
                cfg.pre_hook({**named, **cfg.kwargs})
            self.fn[grid](*args, **kwargs, **cfg.all_kwargs())
        alternatives = Link.recording[start:]
        del Link.recording[start:]
        Link.recording.append({"choose": alternatives, "at": alternatives[-1]["at"] if alternatives else recipe.mark(),
                               "zero": [str(n) for n in self.reset_to_zero]})


MAX_CONFIGS = 32                           # configs of one autotuned kernel the judge times at most


def autotune(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None, **kwargs):
    """``@triton.autotune(configs=[...], key=[...])`` above ``@triton.jit``, in a graded job (:class:`Autotuner`)."""
    def deco(fn):
        return Autotuner(fn, configs, key, prune_configs_by, reset_to_zero, restore_value, **kwargs)
    return deco


def install(channel):
    """Before the submission is imported: launches go over ``channel``."""
    Link.channel = channel
    mini_triton.jit = jit
    mini_triton.JITFunction = RemoteKernel
    mini_triton.autotune = autotune


__all__ = ["RemoteKernel", "Memory", "Link", "autotune", "describe", "install", "jit"]
