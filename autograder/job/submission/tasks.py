"""The tasks a GPU job's robustness cases run on the submission, in its own process, dispatched by their ``op``
from one table (``TASKS``); a simulator job runs the same kinds of task from the judge's process (remote.py), and
item 10's GPU job is timed by the judge's process (judge/timed.py).

A task is a dict:
  op       "forward" | "backward" | "autograd"
  tensors  {"x": input name, "g": ..., "dy": ..., "r": ...}
  eps      (optional) passed to the submission
  view     (optional) {"x": [start, stop, step], "dy": [...]}: a slice of the last
           dimension, so the submission gets a non-contiguous view
  device   (optional) "cuda" to move the inputs to the GPU

The forward, backward and autograd tasks run their phases (phases.py) on the task's own copies of
its inputs, then report the same way: each phase's launches and host ops, and for each output
whether the kernels made it.
"""
from __future__ import annotations

import dataclasses

import torch
from rmsnorm_testkit import compare

from ..wire.errors import describe, raised_in_file
from ..wire.phases import MADE_IN, storage
from .phase import Phase
from ..wire.protocol import output_key, plain, require_plain, running



@dataclasses.dataclass
class Run:
    """A forward, backward or autograd task while it runs."""
    op: str
    mod: object
    triton: object                # mini_triton, or None on a GPU
    t: dict                       # the task's own copies of its inputs, views applied
    kw: dict                      # {"eps": ...} when the task gives one
    progress: dict | None         # what an autograd task made before its backward, kept if the backward fails
    info: dict = dataclasses.field(default_factory=dict)
    roles: dict = dataclasses.field(default_factory=dict)     # role (x, y, dy...) -> the storage it lives in
    stored: dict = dataclasses.field(default_factory=dict)    # output -> which elements its phase's kernels wrote

    @classmethod
    def start(cls, mod, task, inputs, triton, progress):
        device = task.get("device", "cpu")
        t = {k: inputs[v].to(device, copy=True) for k, v in task.get("tensors", {}).items()}   # fresh per task
        for k, spec in task.get("view", {}).items():
            t[k] = compare.apply_view(t[k], spec)
        kw = {"eps": task["eps"]} if "eps" in task else {}
        return cls(task["op"], mod, triton, t, kw, progress, roles={k: storage(v) for k, v in t.items()})

    def report(self, out: dict, phases: dict) -> tuple:
        """(tensors, info): the outputs, each phase's summary, and what made each output."""
        for k, v in out.items():
            require_plain(k, v)
        info = self.info
        for k in ("y", "r", "dx", "dg"):
            if isinstance(out.get(k), torch.Tensor):
                self.roles.setdefault(k, storage(out[k]))
        info.update({name: p.summary(self.roles) for name, p in phases.items()})
        info["kernel_made"], info["kernel_stored"], info["host_made"] = {}, {}, {}
        for k, v in out.items():
            if isinstance(v, torch.Tensor) and MADE_IN.get(k) in phases:
                phase = phases[MADE_IN[k]]
                info["kernel_made"][k], info["kernel_stored"][k] = phase.kernel_made(v)
                info["host_made"][k] = phase.host_made(v)
                # which elements no kernel stored: said only of an output the kernels did not make whole (one the
                # host converted from a buffer they stored, say, was made all the same)
                if (k in ("y", "r") or (k == "dx" and self.op == "backward")) and info["kernel_made"][k] is False:
                    self.stored[k] = phase.stored(v)
        tensors, info = plain(out, info)
        for k, mask in self.stored.items():
            if mask is not None and k in tensors and mask.numel() == tensors[k].numel():  # (r_saved's too)
                # the key without the task's name, which run_tasks puts in front
                tensors[output_key(k, "stored")] = mask.reshape(tensors[k].shape).contiguous()
        return tensors, info


def forward(run: Run) -> tuple:
    """(outputs, phases) of rmsnorm_forward."""
    t = run.t
    running("rmsnorm_forward", t["x"])
    with Phase(run.triton) as fwd:
        y, r = run.mod.rmsnorm_forward(t["x"], t["g"], **run.kw)
    return {"y": y, "r": r}, {"fwd": fwd}


def backward(run: Run) -> tuple:
    """(outputs, phases) of rmsnorm_backward; whether it changed dy."""
    t = run.t
    running("rmsnorm_backward", t["x"])
    dy_before = t["dy"].clone()
    with Phase(run.triton) as bwd:
        dx, dg = run.mod.rmsnorm_backward(t["dy"], t["x"], t["g"], t["r"])
    run.info["dy_modified"] = not torch.equal(dy_before, t["dy"])
    return {"dx": dx, "dg": dg}, {"bwd": bwd}


def autograd(run: Run) -> tuple:
    """(outputs, phases) of rmsnorm and y.backward(dy) through the submission's TritonRMSNorm; what the
    Function saved for its backward (and its r); whether the backward changed dy."""
    t, info = run.t, run.info
    dy_before = t["dy"].clone()
    x = t["x"].detach().requires_grad_(True)
    g = t["g"].detach().requires_grad_(True)
    x.register_hook(_returned(run, "dx"))
    g.register_hook(_returned(run, "dg"))
    running("rmsnorm (the forward through TritonRMSNorm)", t["x"])
    with Phase(run.triton) as fwd:
        y = run.mod.rmsnorm(x, g, **run.kw)
    require_plain("y from rmsnorm", y)                 # before any of its code can run (a lazy subclass)
    r_saved = _after_forward(run, y, fwd) if isinstance(y, torch.Tensor) else None
    running("y.backward() (the backward through TritonRMSNorm)", t["x"])
    with Phase(run.triton) as bwd:
        y.backward(t["dy"])
    out = {"y": y.detach() if isinstance(y, torch.Tensor) else y, "dx": x.grad, "dg": g.grad}
    if r_saved is not None:
        out["r_saved"] = r_saved
    info["dy_modified"] = not torch.equal(dy_before, t["dy"])
    return out, {"fwd": fwd, "bwd": bwd}


def _returned(run: Run, name: str):
    """A hook on x or g: dx or dg as the backward returned it (autograd may copy it into x.grad): its storage,
    and which of its elements the backward's kernels wrote, noted while it is fresh."""
    def hook(grad):
        run.roles[name] = storage(grad)
        if name == "dx" and isinstance(grad, torch.Tensor) and Phase.current is not None and \
                Phase.current.kernel_made(grad)[0] is False:
            run.stored["dx"] = Phase.current.stored(grad)
    return hook


def _after_forward(run: Run, y, fwd: Phase):
    """Note y and what the Function saved (kept in ``run.progress`` in case the backward fails); return a copy
    of the saved r, taken before the backward can change it, or None."""
    info = run.info
    run.roles["y"] = storage(y)
    r_saved, info["saved"] = saved_r(y, run.t["x"].numel() // max(1, run.t["x"].shape[-1]))
    info["ctx_tensors"] = compare.ctx_tensors(y)
    if r_saved is not None:
        run.stored["r_saved"] = fwd.stored(r_saved)
        r_saved = r_saved.detach().clone()
    info["saved_r"] = r_saved is not None
    if run.progress is not None:
        run.progress.update(info={"failed_in": "bwd", "saved": info["saved"], "saved_r": info["saved_r"]},
                            tensors={"y": y.detach().as_subclass(torch.Tensor).cpu().clone(),
                                     # as for any output: said only of one the kernels did not make whole
                                     "y.stored": fwd.stored(y) if fwd.kernel_made(y)[0] is False else None})
    return r_saved


def saved_r(y, rows):
    """What the autograd Function saved for its backward: the fp32 tensor of one value per row (its r), or
    None, and the shapes and dtypes of all it saved (what the backward will use), or None."""
    r, saved = compare.saved_for_backward(y, rows)
    return r, None if saved is None else [[list(t.shape), str(t.dtype).removeprefix("torch.")] for t in saved]


def phase_task(body):
    """A task that runs ``body``'s phases on a Run of its own, then reports."""
    def run_phases(mod, task, inputs, triton, progress=None):
        run = Run.start(mod, task, inputs, triton, progress)
        return run.report(*body(run))
    return run_phases


TASKS = {"forward": phase_task(forward), "backward": phase_task(backward), "autograd": phase_task(autograd)}


def run_task(mod, task, inputs, triton, progress=None):
    """Run one task; returns (tensors, info). ``progress`` gets what an autograd task made before its
    backward ran (y, and what the forward saved), kept if the backward then fails."""
    if task["op"] not in TASKS:
        raise ValueError(f"unknown task {task['op']!r}")
    return TASKS[task["op"]](mod, task, inputs, triton, progress)


def run_tasks(mod, tasks, inputs, triton) -> tuple:
    """(results, tensors) of every task: per task "ok" and its statistics, or its error and what it made
    before the error; tensors named "task.output"."""
    results, tensors = {}, {}
    for name, task in tasks.items():
        progress = {}
        try:
            out, info = run_task(mod, task, inputs, triton, progress)
            tensors.update({output_key(name, k): v for k, v in out.items()})
            results[name] = {"ok": True, **info}
        except BaseException as e:                 # noqa: BLE001
            results[name] = {"error": describe(e), "raised_in_file": raised_in_file(e), **progress.get("info", {})}
            tensors.update({output_key(name, k): v.contiguous() for k, v in progress.get("tensors", {}).items()
                            if v is not None})
    return results, tensors
