"""The recipe of a task, as the submission's process reports it: every torch op its host code runs, in order,
with its arguments, so that the judge can run the same work again on inputs the submission never saw.

A task's phases run on the grader's inputs. What the kernels and the host did with them is told to the judge
twice: each launch as it happens (client.py: the kernel, its grid, its scalars, each tensor with the buffer it
lives in), and each host-side torch op here, as torch's dispatcher runs it (its aten name, its arguments: numbers
as they are, tensors as ``ref``s). A ``ref`` names a buffer by a number this log gives each storage the first
time it sees it, and the view into it (element offset, shape, strides, dtype); the inputs' buffers are named by
their role (x, g, dy, r). The judge replays the recipe (replay.py): fresh inputs, a fresh allocation for each
op that allocates, each op and launch in the order they ran here.

Nothing here is believed. Whatever the host computed from the grader's inputs and carried into the kernels
some other way (a constexpr, a scalar, a store the host's data suppressed, an op this log did not see) is stale
on the replay's inputs, and shows there as a wrong output.
"""
from __future__ import annotations

import base64

import torch
from mini_triton.stats import custom_op_body, run_custom_op
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes
from torch.utils._pytree import tree_leaves

MAX_STEPS = 2000            # host ops a task may report: a recipe longer than that is not replayed (and says so)
CONSTANT_BYTES = 4096       # a CPU buffer this small, first seen in a recording without data, goes with its bytes
CONSTANTS_BYTES = 1 << 16   # and this many bytes of them in all


class Log:
    """One task's recipe, across its phases (the autograd step's backward reads what its forward made)."""

    def __init__(self, meta: bool = False):
        self.meta = meta                # tensors of torch's meta device are the step's own (host.py's "record")
        self.ops = []                   # [{"op", "overload", "args", "kwargs", "out"}]
        self.ids = {}                   # id of a storage (torch keeps one Python object per storage) -> number
        self.kept = []                  # the storages seen, kept alive so that no id is reused in a task
        self.roles = {}                 # buffer number -> the input it is ("x", "g", "dy", "r")
        self.overflow = False
        self.constants = {}             # buffer number -> the bytes of a small CPU buffer when first seen (``meta``)

    def input(self, role: str, t: torch.Tensor):
        self.roles[self.buffer(t)] = role

    def buffer(self, t: torch.Tensor) -> int:
        storage = t.untyped_storage()
        key = id(storage)
        if key not in self.ids:
            self.ids[key] = len(self.ids)
            self.kept.append(storage)
            self.constant(self.ids[key], storage)
        return self.ids[key]

    def constant(self, b: int, storage):
        """Keep the bytes of a small CPU buffer first seen while a step is recorded without data (a constant made
        from Python's numbers, ``torch.tensor([m])``, is one no op of the recipe makes): the judge starts the buffer
        from them. The recording's inputs hold no values, so nothing of them can be in these bytes."""
        size = storage.nbytes()
        if self.meta and storage.device.type == "cpu" and size <= CONSTANT_BYTES and \
                sum(len(v) for v in self.constants.values()) + size <= CONSTANTS_BYTES:
            with _disable_current_modes():             # the grader's own reading: no op of the recipe
                data = bytes(torch.empty(0, dtype=torch.uint8).set_(storage, 0, (size,), (1,)).tolist())
            self.constants[b] = base64.b64encode(data).decode()

    def ref(self, t: torch.Tensor) -> dict:
        """A tensor as the judge finds it again: its buffer's number and size, and the view into it."""
        return {"b": self.buffer(t), "n": t.untyped_storage().nbytes(), "o": t.storage_offset(),
                "s": list(t.shape), "st": list(t.stride()), "d": str(t.dtype).removeprefix("torch.")}

    def value(self, v):
        """An op's argument as plain data; a tensor as its ``ref``."""
        if isinstance(v, torch.Tensor):
            if v.layout != torch.strided or (v.device.type == "meta" and not self.meta):
                return {"other": f"tensor of layout {v.layout} on {v.device}"}
            return {"t": self.ref(v)}
        if v is None or isinstance(v, (bool, int, str)):
            return {"v": v}
        if isinstance(v, float):
            return {"f": repr(v)}
        if isinstance(v, (list, tuple)):
            return {"l": [self.value(x) for x in v]}
        if isinstance(v, torch.dtype):
            return {"dtype": str(v).removeprefix("torch.")}
        if isinstance(v, torch.device):
            return {"device": v.type}
        if isinstance(v, (torch.memory_format, torch.layout)):
            return {"enum": str(v).removeprefix("torch.")}
        return {"other": type(v).__name__}

    def add(self, func, args, kwargs, out):
        if len(self.ops) >= MAX_STEPS:
            self.overflow = True
            return
        name, _, overload = func.name().partition(".")
        self.ops.append({"op": name, "overload": overload or "default",
                         "args": [self.value(a) for a in args],
                         "kwargs": {str(k): self.value(v) for k, v in (kwargs or {}).items()},
                         "out": [self.ref(o) if isinstance(o, torch.Tensor) else None for o in tree_leaves(out)]})

    def mark(self) -> int:
        """Where the recipe stands: the host ops reported so far (a launch runs after them)."""
        return len(self.ops)


class Recording(TorchDispatchMode):
    """Every torch op of the host's code, into the task's Log (the grader's own work runs outside it)."""
    log: Log | None = None

    @classmethod
    def _should_skip_dynamo(cls):
        return False                    # as mini_triton's own mode: nothing here is compiled

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        body = custom_op_body(func)
        if body is not None:            # a torch.library.custom_op: its body's own ops and launches are the recipe
            return run_custom_op(self, body, args, kwargs)
        out = func(*args, **(kwargs or {}))
        log = Recording.log
        if log is not None and getattr(func, "namespace", "") != "profiler":    # a profiler's marks: no tensor work
            try:
                log.add(func, args, kwargs, out)
            except Exception:           # noqa: BLE001 -- an op this log cannot describe: the replay will say so
                log.ops.append({"op": "unreadable", "overload": str(getattr(func, "__name__", "?"))[:60],
                                "args": [], "kwargs": {}, "out": []})
        return out


def without_bytes(log: Log, launches: list) -> bool:
    """Does a recording on the meta device use a small buffer that no op of it made, that is not an input, and whose
    bytes it could not keep (a constant made from Python's numbers on the meta device holds none)? The step is
    then recorded again on CPU memory, where it does."""
    made = {o.get("b") for op in log.ops for o in op.get("out") or [] if isinstance(o, dict)}
    used = [a["ref"] for launch in launches for a in _arguments(launch) if isinstance(a.get("ref"), dict)]
    return any(r.get("b") not in made and r.get("b") not in log.roles and r.get("b") not in log.constants
               and 0 < int(r.get("n", 0)) <= CONSTANT_BYTES for r in used)


def _arguments(launch: dict) -> list:
    """A launch's described arguments (an autotuned one's, of every config)."""
    return [a for one in launch.get("choose", [launch]) for a in [*one.get("args", []),
                                                                  *one.get("kwargs", {}).values()]
            if isinstance(a, dict)]


def start(meta: bool = False) -> Log:
    """A new task's log (of a step on tensors without data, with ``meta``)."""
    Recording.log = Log(meta)
    return Recording.log


def ref(t: torch.Tensor) -> dict | None:
    """``t``'s ref in the current task's log (a launch's tensor argument, an output), or None outside a task."""
    return Recording.log.ref(t) if Recording.log is not None else None


def mark() -> int | None:
    return Recording.log.mark() if Recording.log is not None else None


def report() -> dict:
    """The recipe so far, as the answer carries it."""
    log = Recording.log
    if log is None:
        return {}
    return {"ops": log.ops, "roles": {str(b): r for b, r in log.roles.items()}, "overflow": log.overflow,
            **({"constants": {str(b): v for b, v in log.constants.items()}} if log.constants else {})}
