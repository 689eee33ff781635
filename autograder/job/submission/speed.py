"""The speed task (rubric item 10), the job's side: the submission's steps timed on the GPU.

What is graded is one thing only: each step (the forward; the forward and backward through autograd)
captured in a CUDA graph and replayed, which times its kernels alone (rmsnorm_testkit.timing). Around it, what
keeps that time honest, each checked here and judged by the grader (autograder/speed.py):

- **Secret inputs.** Every input of the task is made from a seed this process draws from the OS with a
  function kept before the submission was imported, at the moment it is needed: each timed replay gets
  new inputs, from a seed drawn after the capture, when no code of the submission's runs again. No seed
  can be predicted, no output computed ahead, and no replay can reuse what an earlier one worked out.
  The last seed goes back to the grader, which makes the same inputs and checks the replay's whole
  outputs.
- **Plain tensors.** A step's outputs must be plain ``torch.Tensor``s: a subclass could run code when
  the grader reads it, after the timing.
- **The kernels do the work.** While the step is captured, every torch op it runs is watched
  (``TorchWork``): one that computes over M·N / 4 elements or more does what the kernels should.
- **Nothing runs beside it.** Other Python threads alive after the capture or after the timing could
  change the outputs in the background: they are counted.
- **Nothing of the submission's runs while it is timed.** Once the captured step returns, no code of the
  submission's is called until the time is taken, unless the step left a way in: a profile or trace hook, a
  torch function or dispatch mode, or a change to the grader's timing code and kept functions (replaced by a
  name found at run time, as ``pydoc.locate`` or ``unittest.mock.patch`` find it). ``unsealed`` compares them
  with what they were before the submission was imported (``seal``), after the capture and after the timing;
  garbage collection, which could call a finalizer of the submission's, is off while the replays are timed.
- **The inputs stay as they were** after the replays.

Each kernel's time from the profiler is feedback only (where the time went), never graded.
"""
import gc
import os
import sys
import threading

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from mini_triton.stats import custom_op_body, run_custom_op
from rmsnorm_testkit import text, timing

from .norms import line_of, WATCHED
from ..wire.phases import TRANSPORT_OPS
from ..wire.protocol import plain, require_plain


# Kept before the submission is imported (this module is): the OS's randomness, the threads' frames, and the
# threads running Python then (the grader's own: a test runner's, say).
URANDOM, FRAMES, IDENT = os.urandom, sys._current_frames, threading.get_ident
BEFORE = frozenset(FRAMES())
PROFILE, TRACE, GC_OFF, GC_ON, GC_ENABLED = sys.getprofile, sys.gettrace, gc.disable, gc.enable, gc.isenabled
FUNCTION_MODES, DISPATCH_MODES = torch._C._len_torch_function_stack, torch._C._len_torch_dispatch_stack
CALL_ROWS = 8                 # rows of a normal call's y and dx that go back (the graded replay's go back whole)
LARGE_OP = 4                  # a torch op reading M·N / LARGE_OP elements or more does the kernels' work
ALLOCATIONS = frozenset({"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided", "zeros",
                         "zeros_like", "new_zeros", "ones", "ones_like", "full", "full_like", "fill_", "zero_"})
FOUND_CAP = 8


def _fingerprint() -> dict:
    """What the timing runs, by identity: this module's and the timing module's names (and each function's code
    and defaults), the kept functions, the interpreter's hooks and torch's mode stacks."""
    found = {"hooks": (id(PROFILE()), id(TRACE()), id(getattr(threading, "_profile_hook", None)),
                       id(getattr(threading, "_trace_hook", None)), tuple(map(id, gc.callbacks))),
             "modes": (FUNCTION_MODES(), DISPATCH_MODES()),
             "kept": {k: id(v) for k, v in timing.CUDA.items()}}
    for module in (timing, sys.modules[__name__]):
        for name, value in list(vars(module).items()):
            found[f"{module.__name__}.{name}"] = (id(value), id(getattr(value, "__code__", None)),
                                                  id(getattr(value, "__defaults__", None)),
                                                  id(getattr(value, "__kwdefaults__", None)))
    return found


SEALED = {}
LEFT = {"hooks": "a profile or trace hook (sys.setprofile, sys.settrace, threading's, gc.callbacks)",
        "modes": "a torch function or dispatch mode (TorchFunctionMode, TorchDispatchMode) still active",
        "kept": "a change to the grader's kept timing functions"}


def seal():
    """Remember what the timing runs (``_fingerprint``): called once, before the submission is imported."""
    SEALED.update(_fingerprint())


def unsealed() -> list:
    """What changed since ``seal`` that could run the submission's code while the grader times (empty: nothing),
    in words, at most three. Nothing when nothing was sealed (a job on the simulator times nothing)."""
    if not SEALED:
        return []
    now = _fingerprint()
    changed = [k for k in SEALED if now.get(k) != SEALED[k]] + [k for k in now if k not in SEALED]
    return sorted({LEFT.get(k, f"a change to the grader's timing code ({k})") for k in changed})[:3]


def secret_seed() -> int:
    """A seed no one can know before it is drawn."""
    return int.from_bytes(URANDOM(6), "little")


def other_threads() -> int:
    """Threads running Python code now that were not before the submission was imported, besides this one (a
    busy autograd thread would count; an idle one has no Python frame)."""
    return len(set(FRAMES()) - BEFORE - {IDENT()})


class TorchWork(TorchDispatchMode):
    """The torch ops of a captured step that read at least ``limit`` elements and compute something: work
    done by torch, not by the submission's kernels. Moving data (a copy, a cast, a view, the sum of a
    buffer of partial results, as the lecture's ``dg_partial.sum(0)``) and filling memory are not work."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.found = limit, []

    @classmethod
    def _should_skip_dynamo(cls):
        return False                                   # nothing here is compiled (see mini_triton.stats)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        body = custom_op_body(func)
        if body is not None:                           # a torch.library.custom_op: the kernels inside it do the work
            return run_custom_op(self, body, args, kwargs)
        name = func.overloadpacket.__name__
        if name not in TRANSPORT_OPS and name not in ALLOCATIONS and len(self.found) < FOUND_CAP:
            read = max((a.numel() for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)), default=0)
            if read >= self.limit:
                self.found.append({"op": name, "reads": read, "where": line_of(WATCHED["file"]) if WATCHED else ""})
        return func(*args, **(kwargs or {}))


def forward_step(mod, x, g):
    """A function that runs the submission's forward on (x, g) and returns y, checked plain."""
    def step():
        out = mod.rmsnorm_forward(x, g)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"rmsnorm_forward returned {type(out).__name__}, not the pair (y, r)")
        return require_plain("y from rmsnorm_forward", out[0])
    return step


def autograd_step(mod, x, g, dy):
    """A function that runs rmsnorm(x, g) and its backward with dy, and returns (dx, dg), checked plain."""
    def step():
        y = require_plain("y from rmsnorm", mod.rmsnorm(x, g))
        dx, dg = torch.autograd.grad(y, (x, g), dy, allow_unused=True)
        if dg is None:
            raise TypeError(NO_DG)
        return require_plain("dx from the backward", dx), require_plain("dg from the backward", dg)
    return step


NO_DG = "g.grad is None after the backward: it returned no dg for g, and a forward+backward is timed complete"


def run_speed(mod, task):
    """(tensors, info) of the speed task: a normal call's outputs at rows drawn after it, the graded replays'
    whole outputs, and every time, seed and finding. The forward is timed first and stands on its own: a
    backward that fails costs the forward+backward timings only (``fwdbwd_error``)."""
    shape, dtype, device = task["shape"], task["dtype"], task.get("device", "cuda")
    c = timing.kept()
    info = {"seeds": {"call": secret_seed()}, "threads": other_threads()}
    x, g, dy = timing.speed_inputs(shape, dtype, info["seeds"]["call"], device=device)
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    fwd, ag = forward_step(mod, x, g), autograd_step(mod, xg, gg, dy)
    y = fwd()
    try:
        dx, dg = ag()
    except Exception as e:                           # noqa: BLE001 -- the forward+backward parts say why
        info["fwdbwd_error"] = text.error_line(e)
        dx = dg = None
    rows = sorted({int.from_bytes(URANDOM(4), "little") % shape[0] for _ in range(CALL_ROWS)})
    info["rows"] = rows                              # drawn after both calls: no code of theirs saw them
    index = torch.tensor(rows, device=device)
    out = {"y": c["index_select"](y, 0, index)}
    if dx is not None:
        out.update({"dx": c["index_select"](dx, 0, index), "dg": c["clone"](dg)})
    del y, dx, dg
    info["fwd_ms"] = timing.time_cuda(fwd)
    out.update({f"{k}_gpu": t for k, t in gpu_timed(mod, "fwd", ("y",), task, info).items()})
    if "fwdbwd_error" not in info:
        info["fwdbwd_ms"] = timing.time_cuda(ag)
        out.update({f"{k}_gpu": t for k, t in gpu_timed(mod, "fwdbwd", ("dx", "dg"), task, info).items()})
    return plain(out, info)


def gpu_timed(mod, kind, names, task, info) -> dict:
    """One kind of step captured on decoy inputs, replayed on secret ones and timed into ``info``; the
    replay's whole outputs (or none, with the reason in ``info``)."""
    shape, dtype, device = task["shape"], task["dtype"], task.get("device", "cuda")
    c = timing.kept()
    statics = timing.speed_inputs(shape, dtype, secret_seed(), device=device)
    xs, gs, dys = statics
    if kind == "fwd":
        step = forward_step(mod, xs, gs)
    else:
        xs.requires_grad_(True)
        gs.requires_grad_(True)
        step = autograd_step(mod, xs, gs, dys)
    watch = TorchWork(shape[0] * shape[1] // LARGE_OP)
    try:
        replay, got = timing.captured(step, watch=watch)
    except timing.NotCapturable as e:
        info[f"{kind}_graph_error"] = str(e)
        return {}
    info[f"{kind}_torch_work"] = watch.found
    info["threads"] = max(info["threads"], other_threads())
    info[f"{kind}_unsealed"] = unsealed()
    def fresh():                                     # new inputs for every timed replay; the last seed is kept
        seed = info["seeds"][kind] = secret_seed()
        with c["no_grad"]():
            timing.speed_inputs(shape, dtype, seed, device, out=statics)
    fresh()
    collecting = GC_ENABLED()
    GC_OFF()                                         # no finalizer of the submission's runs while it is timed
    try:
        info[f"{kind}_graph_ms"] = timing.time_cuda(replay, prepare=fresh)
    finally:
        if collecting:
            GC_ON()
    info[f"{kind}_unsealed"] = info[f"{kind}_unsealed"] or unsealed()
    seed = info["seeds"][kind]
    got = got if isinstance(got, (tuple, list)) else (got,)
    got = {k: c["clone"](c["detach"](t)) if isinstance(t, c["tensor_class"]) else t for k, t in zip(names, got)}
    info["threads"] = max(info["threads"], other_threads())
    made = timing.speed_inputs(shape, dtype, seed, device)
    info[f"{kind}_inputs_changed"] = [n for n, a, b in zip(("x", "g", "dy"), statics, made)
                                      if not c["equal"](c["detach"](a), b)]
    try:
        _, info[f"{kind}_kernels"] = timing.kernel_times(
            step, lambda: timing.speed_inputs(shape, dtype, secret_seed(), device, out=statics))
    except Exception as e:                           # noqa: BLE001 -- feedback only: the replay's time stands
        info[f"{kind}_profile_error"] = text.error_line(e)
    return got
