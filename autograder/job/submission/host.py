"""The submission's process of a job: it imports rmsnorm.py and calls it, as the judge's process asks.

It is forked from the judge's process before the judge reads its key, its tasks or its inputs, so it holds
none of them; it closes its standard input first. Then it waits for requests (one at a time) and answers
each one:

- ``import``: load rmsnorm.py (its kernels launch through client.py);
- ``forward`` / ``backward``: call rmsnorm_forward / rmsnorm_backward on the tensors given, which live in
  the judge's shared memory;
- ``ag_forward`` / ``ag_backward``: the step through the submission's TritonRMSNorm, kept between the two
  (x and g require grad as the request says: both, one, or neither, with no ``ag_backward`` then);
- ``record``: item 10's steps at its shape on tensors without data, as recipes the judge replays and times on
  the GPU itself (judge/timed.py), and reads for item 10's prediction on a CPU: every host op and every launch,
  whole, none run;
- ``quit``.

Each answer carries the outputs as memory handles (the judge reads their values itself) and what this side
noticed for the feedback: the host-side torch ops and calls of torch's norms with their lines. None of it
decides a grade: the judge's process does, from what it saw.
"""
from __future__ import annotations

import contextlib
import importlib.util
import mmap
import os
import sys
import traceback
from pathlib import Path

import torch

from mini_triton.imports import as_triton
from rmsnorm_testkit import compare, predict

from . import client, recipe, seal
from ..wire.channel import Broken, Channel
from ..wire.errors import describe, raised_in_file
from .norms import watch_norms
from ..wire.phases import HOST_OP_CAP, TRANSPORT_OPS, carried_from
from .phase import Phase
from ..wire.protocol import not_plain, require_plain

JOB = Path(__file__).resolve().parent      # the job's code: told the truth while the file sees the course GPU



class Host:
    def __init__(self, channel: Channel, submission: Path, triton, sealed: dict | None = None):
        self.channel, self.submission, self.triton = channel, submission, triton
        self.sealed = sealed            # the grader's code here before the import (seal.take), checked after each
        self.tampered = None            # request: once changed, every answer says so (the judge ends the grading)
        self.mod = None
        self.step = {}                  # the autograd step between its forward and its backward
        self.maps = []                  # mmaps of the judge's memory, kept open
        self.given = {}                 # the tensors of the request being answered
        self.request = {}               # the request being answered
        self.asked = set()              # what the file asked of the device while its steps were recorded

    def serve(self):
        while True:
            try:
                request, fds = self.channel.recv()
            except Broken:
                return
            if request.get("cmd") == "quit":
                return
            try:
                answer, out_fds = self.answer(request, fds)
            except BaseException as e:              # noqa: BLE001 -- the submission's error (KeyboardInterrupt and
                # SystemExit too: the task's, never the whole group's, whose other tasks' results must not be lost)
                answer, out_fds = {"error": describe(e), "raised_in_file": raised_in_file(e)}, []
            changed = self.tampered or (seal.broken(self.sealed) if self.sealed else [])
            if changed:
                self.tampered = changed
                answer, out_fds = {"error": seal.message(changed), "tampered": True}, []
            try:
                self.channel.send(answer, out_fds)
            finally:
                client.Link.memory.release()

    def answer(self, request, fds) -> tuple:
        cmd = request["cmd"]
        if cmd == "import":
            self.mod = load_submission(self.submission)
            return {"ok": True}, []
        if cmd == "record":
            self.asked = set()
            recipes = {kind: self.record(kind, request) for kind in RECORDED}
            return {"recipes": recipes, "asked": sorted(self.asked & predict.ASKED)}, []
        self.request = request
        tensors = {k: self.tensor(v, fds) for k, v in request.get("tensors", {}).items()}
        kw = {"eps": request["eps"]} if "eps" in request else {}
        # the roles of a task's tensors: the backward through autograd still reads the forward's x and g
        self.given = {**self.step.get("given", {}), **tensors} if cmd == "ag_backward" else tensors
        if cmd != "ag_backward":                # a task's recipe: the autograd step's backward continues its forward's
            recipe.start()
        for role, t in tensors.items():
            recipe.Recording.log.input(role, t)
        with predict.as_gpu(request.get("gpu"), "cpu", request.get("gpu_level"), trusted=(JOB,)):
            return getattr(self, cmd)(tensors, kw)          # item 10's prediction: the course GPU in the file's view

    def tensor(self, h: dict, fds) -> torch.Tensor:
        """A tensor in the judge's memory (its descriptor ``fds[h["fd"]]``), as the submission gets it."""
        fd = fds[h["fd"]]
        m = mmap.mmap(fd, h["nbytes"])
        self.maps.append(m)
        dtype = getattr(torch, h["dtype"])
        base = torch.frombuffer(m, dtype=torch.uint8).view(dtype)
        t = base.as_strided(h["shape"], h["strides"], h["offset"])
        client.Link.memory.adopt(t, fd)
        return t

    # -- the phases --------------------------------------------------------------------------------------
    def _phase(self, call):
        client.Link.covered = {}
        with recipe.Recording(), Phase(self.triton) as phase:      # the Phase's watch innermost: it names the line
            out = call()
        phase.covered = client.Link.covered
        return out, phase

    def forward(self, t, kw):
        (y, r), phase = self._phase(lambda: self.mod.rmsnorm_forward(t["x"], t["g"], **kw))
        return self.outputs({"y": y, "r": r}, {"fwd": phase})

    def backward(self, t, kw):
        (dx, dg), phase = self._phase(lambda: self.mod.rmsnorm_backward(t["dy"], t["x"], t["g"], t["r"]))
        return self.outputs({"dx": dx, "dg": dg}, {"bwd": phase})

    def ag_forward(self, t, kw):
        x, g = step_leaves(t["x"], t["g"], self.request.get("requires_grad", ("x", "g")))
        returned = {}
        for leaf, grad in ((x, "dx"), (g, "dg")):
            if leaf.requires_grad:
                leaf.register_hook(lambda got, grad=grad: returned.__setitem__(grad, got))
        with offloaded(self.request.get("offload") is True):
            y, phase = self._phase(lambda: self.mod.rmsnorm(x, g, **kw))
        self.step = {"x": x, "g": g, "y": y, "returned": returned, "given": dict(t)}
        out = {"y": y.detach() if not_plain(y) is None else y}
        extra = {}
        if not_plain(y) is None:
            r_saved, saved = compare.saved_for_backward(y, t["x"].numel() // max(1, t["x"].shape[-1]))
            extra["saved"] = None if saved is None else [[list(s.shape), str(s.dtype).removeprefix("torch.")]
                                                          for s in saved]
            extra["ctx_tensors"] = compare.ctx_tensors(y)
            if r_saved is not None:
                out["r_saved"] = r_saved.detach()
        return self.outputs(out, {"fwd": phase}, extra)

    def ag_backward(self, t, kw):
        step = self.step
        _, phase = self._phase(lambda: step["y"].backward(t["dy"]))
        returned = step["returned"]
        out = {"dx": returned.get("dx", step["x"].grad), "dg": returned.get("dg", step["g"].grad)}
        if out["dg"] is None:
            out["dg"] = step["g"].grad
        return self.outputs(out, {"bwd": phase}, {"grad_is_copy": {
            "dx": returned.get("dx") is not None and step["x"].grad is not None and
            returned["dx"].untyped_storage().data_ptr() != step["x"].grad.untyped_storage().data_ptr()}})

    def record(self, kind: str, request: dict) -> dict:
        """The recipe of one of item 10's steps ("fwd": rmsnorm_forward; "fwdbwd": rmsnorm and the gradient of its
        y, as the timing calls them) at the request's shape and dtype, on tensors of torch's meta device (a shape and
        no data), the course GPU in the file's view: the host ops (recipe.py), each launch as the judge launches it
        (client.py), and the outputs' refs; or the step's error. Nothing runs on a device here; the judge's process
        replays the recipe on its own GPU, on inputs it alone makes, and times that (and on a CPU, item 10's
        prediction reads it). A request's "from_level" starts at that level of the view (predict.LEVELS), "gpu" None
        records with no view at all."""
        M, N = (int(d) for d in request["shape"])
        dtype = compare.DTYPES.get(str(request["dtype"])) or getattr(torch, str(request["dtype"]))    # bf16, bfloat16
        start = request.get("from_level", predict.LEVELS[0])
        levels = (None,) if request.get("gpu", predict.COURSE_GPU) is None else \
            predict.LEVELS[predict.LEVELS.index(start):] if start in predict.LEVELS else predict.LEVELS
        error, cause = None, None
        for level in levels:                             # as much of the course GPU in view as the file takes,
            for device in ("meta", "cpu"):               # on tensors without data, else on CPU memory never read
                x, dy = (torch.empty(M, N, dtype=dtype, device=device) for _ in range(2))
                g = torch.empty(N, dtype=dtype, device=device)
                client.Link.recording, view = [], None
                try:
                    with predict.as_gpu(request.get("gpu", predict.COURSE_GPU), device, level, trusted=(JOB,)) as view:
                        recipe.start(meta=True)
                        with recipe.Recording():             # a call first, as the timing warms a step up before
                            recorded_step(self.mod, kind, x, g, dy)      # it captures one: what a first call does
                        log = recipe.start(meta=True)                    # once (tuning, caches) is not the step
                        for role, t in (("x", x), ("g", g), ("dy", dy)):
                            log.input(role, t)
                        client.Link.recording = []
                        with recipe.Recording():
                            outputs = recorded_step(self.mod, kind, x, g, dy)
                    if device == "meta" and recipe.without_bytes(log, client.Link.recording):
                        raise ValueError("a small buffer made without an op (torch.tensor) holds no bytes on meta")
                    return {**recipe.report(), "launches": client.Link.recording, "level": level,
                            "refused": None if level == levels[0] else error,
                            "outputs": {k: recipe.ref(v) for k, v in outputs.items()}}
                except Exception as e:                   # noqa: BLE001 -- the step's own error, reported
                    if error is None:
                        error, cause = describe(e), "no_dg_backward" if isinstance(e, NoDg) else None
                finally:
                    client.Link.recording = None
                    self.asked |= getattr(view, "asked", set())
                    del x, g, dy
        return {"error": error, "cause": cause}

    def outputs(self, out: dict, phases: dict, extra=None) -> tuple:
        """The answer: each output's memory handle (or what it is instead), and what this side noticed."""
        for k, v in out.items():
            require_plain(k, v)                      # a subclass could run code whenever it is read
        phase = next(iter(phases.values()))
        claims = {k: claim(phase, v) for k, v in out.items() if isinstance(v, torch.Tensor)}   # before sharing moves
        fds, handles, not_tensors = [], {}, {}
        for k, v in out.items():
            if isinstance(v, torch.Tensor) and v.device.type == "cpu" and v.layout == torch.strided:
                handles[k] = client.Link.memory.handle(v.detach(), fds)
            else:
                not_tensors[k] = not_plain(v) or (f"a tensor on {v.device}" if v.device.type != "cpu" else
                                                  f"a tensor of layout {v.layout}")
        roles = {t.untyped_storage().data_ptr(): k for k, t in {**self.given, **out}.items()
                 if isinstance(t, torch.Tensor)}
        noticed = {name: _noticed(p, roles) for name, p in phases.items()}
        refs = {k: recipe.ref(v) for k, v in out.items() if k in handles}
        return {"outputs": handles, "not_tensors": not_tensors, "noticed": noticed, "claims": claims,
                "recipe": {**recipe.report(), "refs": refs, "at": recipe.mark()}, **(extra or {})}, fds


RECORDED = ("fwd", "fwdbwd")     # the steps item 10 times


def offloaded(on: bool):
    """Autograd's saved-tensor hooks as activation offloading uses them (``torch.autograd.graph.save_on_cpu``): each
    tensor the Function passes to ctx.save_for_backward is copied when it is saved, and the backward's
    ctx.saved_tensors hands back the copy. The judge then overwrites x, g and the memory the forward's kernels
    stored (remote.Task.offload): a backward that reads only what it saved is untouched by that. The copies are
    host ops of the step's recipe, as the judge replays it."""
    if not on:
        return contextlib.nullcontext()
    return torch.autograd.graph.saved_tensors_hooks(lambda t: t.detach().clone(), lambda t: t)


class NoDg(TypeError):
    """A timed forward+backward whose backward gave no dg: item 3's mistake, which the record names as its cause."""


def recorded_step(mod, kind: str, x, g, dy) -> dict:
    """{output: tensor} of one timed step, run as the timing runs it: the forward's y, or the forward and the
    gradient of its y through the submission's TritonRMSNorm (y, dx and dg: a model uses the forward's y)."""
    if kind == "fwd":
        out = mod.rmsnorm_forward(x, g)
        if not isinstance(out, (tuple, list)) or len(out) != 2:
            raise TypeError(f"rmsnorm_forward returned {type(out).__name__}, not the pair (y, r)")
        return {"y": require_plain("y from rmsnorm_forward", out[0])}
    x, g = x.requires_grad_(True), g.requires_grad_(True)
    y = require_plain("y from rmsnorm", mod.rmsnorm(x, g))
    dx, dg = torch.autograd.grad(y, (x, g), dy, allow_unused=True)
    if dg is None:
        raise NoDg("g.grad is None after the backward: it returned no dg for g, and a forward+backward is "
                   "timed complete")
    return {"y": y, "dx": require_plain("dx from the backward", dx), "dg": require_plain("dg from the backward", dg)}


def step_leaves(x, g, requires_grad) -> tuple:
    """x and g as the autograd step gets them: leaves of the judge's memory, each requiring grad when its name is
    in ``requires_grad`` (a frozen g, say, does not: its Function's ctx.needs_input_grad then says so)."""
    return tuple(t.detach().requires_grad_(name in requires_grad) for name, t in (("x", x), ("g", g)))


def _noticed(phase, roles) -> dict:
    """The host ops and norm calls this side saw in a phase (advice for the feedback, never a verdict)."""
    ops = []
    if phase.rec is not None and phase.rec.host_ops is not None:
        ops = [{"op": o.name, "reads": o.reads, "output_numel": o.output_numel, "dtype": o.out_dtype,
                "where": getattr(o, "where", ""), "roles": sorted({roles[s] for s in o.storages if s in roles}),
                "in_bytes": sum(o.in_bytes), "out_bytes": sum(o.out_bytes)}
               for o in phase.rec.host_ops if o.reads > 0]
        # the ops item 7 weighs first (those that read an activation, then the largest reads), then the rest in
        # order: many small ops never push a large one out of the report
        kept = sorted(range(len(ops)), key=lambda i: (not ops[i]["roles"], -ops[i]["reads"]))[:HOST_OP_CAP]
        ops = [ops[i] for i in sorted(kept)]
    return {"host_ops": ops, "norms": phase.norms}


def claim(phase, t) -> dict:
    """What this side saw make output ``t``: {"made": stored by the phase's kernels, or carried from their memory
    by host ops that only move data (phases.TRANSPORT_OPS); "host_made": written by a host op that read data}.
    The judge believes a "made" only where the values are its clean kernels' own (remote.Task.judge_output)."""
    covered, ops = phase.covered, (phase.rec.host_ops or []) if phase.rec is not None else []
    derived = set()
    for op in ops:
        sources = op.storages[1:] if op.name == "copy_" else op.storages
        if op.name in TRANSPORT_OPS and any(s in derived or covered.get(s, 0) >= carried_from(op) for s in sources):
            derived |= set(op.out_storages)
    where = t.untyped_storage().data_ptr()
    return {"made": where in derived or covered.get(where, 0) >= t.numel(),
            "host_made": any(where in op.out_storages and op.reads for op in ops)}


def load_submission(path: Path):
    """rmsnorm.py, imported with Triton's import paths answered by the simulator (mini_triton.imports):
    ``import triton`` works here whether or not Triton is installed."""
    spec = importlib.util.spec_from_file_location("rmsnorm", path)
    mod = importlib.util.module_from_spec(spec)
    with as_triton():
        spec.loader.exec_module(mod)
    return mod


def run(sock, submission: Path, triton):
    """The child's life: no standard input, the channel, the simulator's jit made remote; serve; exit."""
    try:
        os.close(0)
    except OSError:
        pass
    sys.stdin = None
    channel = Channel(sock)
    client.install(channel)
    watch_norms(submission)
    try:
        Host(channel, submission, triton, seal.take()).serve()
    except BaseException:                                  # noqa: BLE001
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
