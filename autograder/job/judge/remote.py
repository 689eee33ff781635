"""The judge's side of a simulator job: the tasks run by asking the submission's process, which the judge
forked before it read anything secret (host.py), and judged from what the judge itself saw.

For each task the judge puts the inputs into shared memory of its own, asks the submission's process to
run a phase (the forward, the backward, or the step through autograd), serves every launch that phase
makes on its own simulator (launches.py), and reads the outputs from memory itself. What it reports is
what it saw: each phase's launches (mini_triton's record, kept in this process), each output's values and
origin (provenance.py: made by clean kernels, stored from host memory, or written by the host), what the
kernels stored of it, whether dy changed. The submission's process adds only advice for the feedback (the
host ops and norm calls it noticed, with their lines), which can make a message clearer but no grade higher.

About 480 lines, in three sections: the judge (its memory, its requests to the submission's process), a task
(its phases, what each output is), and the tasks themselves. All are the judge's side of the one protocol with
host.py, kept beside each other.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import resource
import signal
import time
import types

import torch
from mini_triton import perf
from mini_triton.stats import PlannedLaunch
from rmsnorm_testkit import compare, predict, text, timing

from ..wire.channel import Broken, Channel, TimedOut, close
from ..wire.errors import describe
from ..wire.phases import MADE_IN, PHASES, launch_records
from ..wire.protocol import FRESH, RUNNING, fresh_key, output_key, plain, running
from . import provenance, replay, watchdog
from .launches import Kernels, Launcher



class Failed(Exception):
    """The submission's side reported an error (its text, described there). ``crash`` is the launch the judge served
    that raised it (wire/errors.Crash), or None: then the submission's host code raised it, as far as the judge knows
    (``raised_in_file``), whatever that process says of its traceback, which the file can dress as a kernel's."""

    def __init__(self, message: str, crash=None):
        super().__init__(message)
        self.crash = crash
        self.raised_in_file = crash is None


class Tampered(Exception):
    """The submission's side found the grader's code in its process changed by rmsnorm.py (submission/seal.py):
    nothing it reports can be trusted, and the grading ends as the scan's refusal ends it (every item)."""


class Judge:
    """One conversation with the submission's process, and the judge's memory of the current task."""

    def __init__(self, channel: Channel, triton, submission, source: str):
        self.channel, self.triton = channel, triton
        self.kernels = Kernels(str(submission), source)
        self.memory = provenance.Memory()
        self.launcher = Launcher(self.memory, self.kernels)
        self.fresh = {}                    # {input key: the replays' fresh draw of it, "gen": their generator},
                                           # drawn after the fork and shared by the job's groups (run_groups)

    def ask(self, request: dict, fds=()) -> tuple:
        """Send a request; serve the launches it makes; return its answer and the descriptors it carried."""
        self.channel.send(request, fds)
        while True:
            message, got = self.channel.recv()
            if message.get("tampered") is True:
                close(got)
                raise Tampered(str(message.get("error"))[:text.MESSAGE_CHARS])
            if "launch" not in message:
                return message, got
            try:
                with watchdog.budgeted(self.budget, self.kernels.path):
                    if self.launcher.record is not None:
                        reply = self.launcher.run(message["launch"], got)
                    else:                           # at import, say: it runs, and nothing graded counts it
                        with self.phase():
                            reply = self.launcher.run(message["launch"], got)
            except watchdog.OutOfTime as e:             # a kernel that never ends: its group ends here
                raise TimedOut("its CPU time ran out in a kernel", cpu=True, where=e.where, stuck=e.stuck) from None
            finally:
                close(got)
            self.channel.send(reply)

    def budget(self) -> bool:
        """Is the group's CPU budget spent, or a replay's time (launches.Launcher.over_replay)?"""
        return self.launcher.over_replay() or (self.channel.budget is not None and bool(self.channel.budget()))

    @contextlib.contextmanager
    def phase(self):
        """The launches of one phase, recorded here; what the kernels write is counted from zero."""
        self.memory.new_phase()
        self.launcher.exchanged, self.launcher.failed = [], []
        with self.triton.record() as rec:
            self.launcher.record = rec
            try:
                yield rec
            finally:
                self.launcher.record = None

    def fresh_input(self, task: dict, role: str, view: torch.Tensor) -> torch.Tensor:
        """The replays' fresh ``role`` input of ``task``, as ``view`` lies in its buffer: drawn once per input of
        the job (every task of a case replays on the same fresh x), from a seed drawn now, after the fork; the r a
        backward is given is the reference r of the fresh x."""
        key = str(task.get("tensors", {}).get(role, role))
        if key not in self.fresh:
            if "gen" not in self.fresh:
                self.fresh["gen"] = replay.generator()
            self.fresh[key] = replay.fresh(view, self.fresh["gen"])
            if role == "r":
                tensors = task.get("tensors", {})
                x, g = (self.fresh.get(str(tensors.get(k))) for k in ("x", "g"))
                if x is not None and g is not None:
                    r = compare.reference(x.reshape(-1, g.numel()), g, eps=float(task.get("eps", 1e-5)))[1]
                    self.fresh[key].copy_(r.reshape(-1).to(self.fresh[key].dtype))
        return self.fresh[key].clone().as_strided(view.shape, view.stride(), view.storage_offset())   # the draw kept

    def load(self) -> str | None:
        """Import rmsnorm.py on the other side; its error, or None."""
        answer, fds = self.ask({"cmd": "import"})
        close(fds)
        return answer.get("error")


# ---------------------------------------------------------------------------------------------------------
# a task
# ---------------------------------------------------------------------------------------------------------
class Task:
    """One task: its inputs in the judge's memory, and what it found of each output."""

    def __init__(self, judge: Judge, task: dict, inputs: dict):
        self.judge, self.task = judge, task
        judge.memory.close()
        judge.memory = judge.launcher.memory = provenance.Memory()
        self.given, self.handles, self.fds = {}, {}, []
        self.recs = {}                                   # each phase's record of its launches (run_phase)
        made = made_inputs(task["make"]) if "make" in task else {}
        for k, v in task.get("tensors", {}).items():
            base = (made[v] if v in made else inputs[v]).clone()
            buf, fd = judge.memory.input(base)
            view = compare.apply_view(judge.memory.view(buf, base.dtype, 0, list(base.shape), list(base.stride())),
                                    task.get("view", {}).get(k))
            self.given[k] = (buf, view)
            self.handles[k] = {"fd": len(self.fds), "nbytes": buf.nbytes, "offset": view.storage_offset(),
                               "shape": list(view.shape), "strides": list(view.stride()),
                               "dtype": str(view.dtype).removeprefix("torch.")}
            self.fds.append(fd)
        judge.memory.inputs = [view for _, view in self.given.values()]
        self.original = {k: view.clone() for k, (_, view) in self.given.items()}
        # each input as it was given, its whole buffer: the fresh draws follow these values, not what the task's
        # run left in the buffer (a backward that stores dx into dy's memory would give the fresh dy dx's scale)
        self.pristine = {k: replay.buffer_of(view).clone().as_strided(view.shape, view.stride(), view.storage_offset())
                         for k, (_, view) in self.given.items()}
        self.kw = {"eps": task["eps"]} if "eps" in task else {}
        self.info, self.tensors, self.roles = {}, {}, {}
        self.per_row_host = []          # outputs made from one host value per row, at N = 1 (owned_by_item_7)
        self.overwritten = {}           # x and g as the judge overwrote them, in an offloaded task (offload)
        self.overwritten_names = {}     # id of each Buffer it overwrote -> "x", "g", or None
        self.output_buffers = {}        # output name -> id of its Buffer
        self.put_back = []              # (Buffer, its bytes before) of the submission's buffers it overwrote
        # the bytes of one element of each role's memory (its own dtype's), and of scratch (None): fp32's, whatever x's
        self.units = {None: 4}          # (a partial buffer's bound, M·N/8, is in fp32 elements in any dtype)
        for k, (buf, view) in self.given.items():
            self.roles.setdefault(k, buf.mirror.untyped_storage().data_ptr())
            self.units.setdefault(self.roles[k], view.element_size())
        judge.launcher.inputs = {storage: role for role, storage in self.roles.items()}
        self.recipe = judge.launcher.recipe = replay.Recipe()

    def close(self):
        close(self.fds)

    def request(self, cmd: str, names, **extra) -> tuple:
        """(request, descriptors) for ``cmd`` on the inputs ``names``: only those cross (with ``extra``, what else
        the command needs to know)."""
        fds = [self.fds[self.handles[k]["fd"]] for k in names]
        tensors = {k: dict(self.handles[k], fd=i) for i, k in enumerate(names)}
        return {"cmd": cmd, "tensors": tensors, **self.kw, **extra}, fds

    def run_phase(self, name: str, cmd: str, names, **extra) -> dict:
        """Run one phase on the other side; its answer's outputs judged into self.tensors and self.info."""
        request, fds = self.request(cmd, names, **extra)
        with self.judge.phase() as rec:
            answer, got = self.judge.ask(request, fds)
        self.recs[name] = rec
        self.recipe.answered(answer, answer.get("outputs") if isinstance(answer.get("outputs"), dict) else {})
        try:
            if "error" not in answer and self.task.get("op") != "predict":    # the prediction reads no output
                self.outputs(name, answer, got)
        finally:
            close(got)
            noticed = answer.get("noticed") if isinstance(answer.get("noticed"), dict) else {}
            self.info[name] = summary(rec, self.roles, noticed.get(name) if isinstance(noticed.get(name), dict) else {},
                                      self.judge.memory.copies, self.units)
            self.info[name]["copies"] = self.copies_seen(name)       # the judge's own sight: item 7's evidence
            self.info[name]["host_ops"] += self.info[name]["copies"]
            self.info[name]["host_loaded"] = self.judge.memory.host_loaded
            self.info[name]["exchanged"] = list(self.judge.launcher.exchanged)
        if "error" in answer:
            error = str(answer["error"])[:text.MESSAGE_CHARS]
            raise Failed(error, next((c for c in reversed(self.judge.launcher.failed) if c.told(error)), None))
        return answer

    def outputs(self, phase: str, answer: dict, fds):
        info = self.info
        for k, t in (answer.get("not_tensors") or {}).items():
            info.setdefault("not_tensors", {})[str(k)] = str(t)[:60]
        for k, h in (answer.get("outputs") or {}).items():
            k = str(k)
            try:
                buf = self.judge.memory.buffer(fds[int(h["fd"])], int(h["nbytes"]))
                self.judge.memory.refresh(buf)
                geometry = (getattr(torch, str(h["dtype"])), int(h["offset"]), [int(s) for s in h["shape"]],
                            [int(s) for s in h["strides"]])
                if not readable(geometry[0]):
                    said = f"a tensor of dtype {h['dtype']}, which the grader cannot read"
                    info.setdefault("not_tensors", {})[k] = said[:60]
                    continue
                view = self.judge.memory.settle(buf, *geometry)
            except (provenance.Refused, OSError, KeyError, ValueError, TypeError, AttributeError, IndexError) as e:
                info.setdefault("not_tensors", {})[k] = f"unreadable ({e})"[:60]
                continue
            self.recipe.output(k, buf, *geometry)
            self.output_buffers.setdefault("r" if k == "r_saved" else k, id(buf))
            self.roles.setdefault(k if k != "r_saved" else "r", buf.mirror.untyped_storage().data_ptr())
            self.units.setdefault(buf.mirror.untyped_storage().data_ptr(), view.element_size())
            claims = answer.get("claims") if isinstance(answer.get("claims"), dict) else {}
            self.judge_output(phase, k, buf, geometry, view, claims.get(k) if isinstance(claims.get(k), dict) else {})

    def judge_output(self, phase, k, buf, geometry, view, claim: dict):
        """An output's values, and whether the kernels made them, stored them, or the host did. Made: the other
        side saw the kernels store it or carry it from their memory (``claim``), and the judge sees that every
        value is its clean kernels' own (provenance: stored, copied, cast or summed from their memory)."""
        info, memory = self.info, self.judge.memory
        value = view.detach().clone().contiguous()
        self.tensors[k] = value
        info.setdefault("dtypes", {})[k] = str(value.dtype).removeprefix("torch.")
        origins = memory.origins(buf, *geometry)
        stored = memory.stored(buf, *geometry)
        x = self.given.get("x", (None, None))[1]
        rows = x.numel() // max(1, x.shape[-1]) if x is not None and x.dim() else 0
        forgiven = memory.forgiven(rows, value.numel())
        clean = provenance.MADE + ((provenance.DERIVED,) if forgiven else ())
        made = bool(torch.isin(origins, torch.tensor(clean, dtype=torch.uint8)).all()) and value.numel() > 0
        partials, summed = summed_partials(value, memory, rows) if not made and k == "dg" else (None, None)
        if partials == "made":                       # graded as the kernels' partial rows sum, not as the host
            value = summed.to(value.dtype).reshape(value.shape)        # wrote it (a correction of its own, say)
            self.tensors[k] = value
        made = (made or partials == "made") and claim.get("made") is True
        if k == "r_saved":
            info["saved_r_made"] = made              # a backward's values tainted through it are the forward's
        if MADE_IN.get(k) == phase or k == "r_saved":
            key = k if k != "r_saved" else None
            if key:
                info.setdefault("kernel_made", {})[k] = made
                info.setdefault("kernel_stored", {})[k] = int(stored.sum())
                info.setdefault("host_made", {})[k] = (bool((origins == provenance.HOST).any())
                                                       or claim.get("host_made") is True)
                info.setdefault("tainted", {})[k] = (bool((origins == provenance.TAINTED).any()) or partials == "host's"
                                                     or (not forgiven and bool((origins == provenance.DERIVED).any())))
                if not made and claim.get("made") is True and memory.host_loaded <= rows and partials != "host's" \
                        and bool(torch.isin(origins, torch.tensor(provenance.MADE + (provenance.DERIVED,),
                                                                  dtype=torch.uint8)).all()):
                    self.per_row_host.append(k)      # the host's values one per row, as many as
                    # the output's at N = 1: item 7 owns that host work when the replay finds it (verify)
            # dg only where a kernel stored some of it: a dg the host summed or cast (or filled) is no column "never
            # written", and the checks of what the host made name it
            if not made and (k in ("y", "r", "r_saved", "dx") or (k == "dg" and bool(stored.any()))):
                self.tensors[output_key(k, "stored")] = stored.reshape(value.shape).contiguous()

    def copies_seen(self, phase: str) -> list:
        """The host's conversions of inputs or of the kernels' outputs to another dtype that the judge found in memory
        this phase, as host ops (the submission's side may not have told: a cast through numpy, say)."""
        by_storage = {v: k for k, v in self.roles.items()}
        direct = self.task.get("op") == "backward"        # rmsnorm_backward called as is: no autograd between
        ops = []
        for source, n, dtype, _, was in self.judge.memory.copies:
            role = by_storage.get(source)
            if dtype == was:
                continue            # a copy in its own dtype moves data (a contiguous copy of a strided x)
            if not (role == "x" or (role is None and phase == "fwd") or (role == "dy" and direct)):
                continue            # autograd's own casts of dy, dx and dg are not the submission's host work
            what = f"a copy of {role}" if role else "a copy of a buffer your kernels stored"
            ops.append({"op": "copy", "reads": n, "output_numel": n, "dtype": dtype.removeprefix("torch."),
                        "where": f"rmsnorm.py ({what}, in {dtype.removeprefix('torch.')}, found in memory)",
                        "roles": [role] if role else []})
        return ops

    def verify(self):
        """Run the task again, as the judge: its recipe and launches on fresh inputs (replay.py), the same for every
        task of a case (``Judge.fresh_input``). Each output the replay read back is returned beside the first run's
        (``<output>.fresh``), for the grader to judge as it judges the first: a part earns its points only when
        both runs are right. A recipe that cannot be run again (memory no recorded op made, an op that is not a
        pure tensor op) says why in ``info["stale"]``; its outputs count as made by no kernel."""
        if not self.recipe.snapshots:
            return
        order = sorted(self.given, key=lambda role: role == "r")       # r is made from the fresh x and g
        views = {role: self.judge.fresh_input(self.task, role, self.pristine[role]) for role in order}
        pristine = {k: v.clone() for k, v in views.items()}         # the replay may write into its inputs (dy)
        why = None
        again_run = replay.Replay(self.judge.kernels)
        try:
            seen = self.replayed(again_run, views)
        except replay.Stale as e:
            seen, why = e.seen, str(e)
        again = {}
        for snap in seen:
            again.update(snap)
        stale, eps, requires = {}, float(self.task.get("eps", 1e-5)), tuple(self.task.get("requires_grad", ("x", "g")))
        x = self.original.get("x")
        first_ref = replay.references(*(self.original.get(k) for k in ("x", "g", "dy")), eps, requires)
        again_ref = replay.references(*(pristine.get(k) for k in ("x", "g", "dy")), eps, requires)
        for k, v in again.items():
            self.tensors[output_key(k, FRESH)] = v.contiguous()
            if k in self.tensors and k in first_ref and replay.right(k, self.tensors[k], first_ref[k], x) and \
                    replay.unchanged(self.tensors[k], v, first_ref[k], again_ref[k]):
                stale[k] = "it came out the same as on the first inputs, though its right values had changed"
        if not why:         # right on the new inputs, where the first run's values and zeros are not (told apart)
            fx = pristine.get("x", x)
            self.verified(again_run, {k: v for k, v in again.items() if k in again_ref and
                                      replay.told_apart(k, v, self.tensors.get(k), again_ref[k], fx)})
        made = self.info.get("kernel_made") or {}
        stale.update({k: "the recorded torch ops computed it, not the kernels" for k in sorted(again_run.unmade)
                      if made.get(k) and k not in stale})           # the recipe describes another program
        if again_run.moved:
            self.info["replay_moved"] = again_run.moved           # the traffic items read it (judge/fused.py)
        if again_run.flow is not None and again_run.flow.used is not None:
            self.info["host_work"] = dict(self.host_work(*again_run.flow.used),
                                          shape=[again_run.flow.M, again_run.flow.N])
            self.owned_by_item_7()
        if why:
            stale.update({k: why for snap in self.recipe.snapshots for k in snap[2] if k not in again})
        if stale:
            self.info["stale"] = stale
            for k in stale:
                self.info.setdefault("kernel_made", {})[k] = False

    def verified(self, again_run: replay.Replay, right: dict):
        """The replay ran to the end, and no host work on an activation reached a kernel or an output there (the
        dataflow's, item 7's to charge): what it saw of the outputs it got right (``right``) replaces the first run's
        guesses from memory alone. Such an output its kernels made (element by element, through copies and the sum
        of partial rows, however many launches stored them) is the kernels' work; values the host put in memory
        that the kernels loaded (a table of row offsets made from the shape, a contiguous copy of a strided x read in
        slices) were no activation's work, or the new inputs would have shown them stale."""
        if again_run.flow is None or again_run.flow.used is not None:
            return
        for k in right:
            if k in MADE_IN and k not in again_run.unmade:
                self.info.setdefault("kernel_made", {})[k] = True
                self.info.setdefault("tainted", {})[k] = False
                self.info.setdefault("host_made", {})[k] = False
        if all(k in right for snap in self.recipe.snapshots for k in snap[2] if k in MADE_IN):
            for phase in PHASES:
                if isinstance(self.info.get(phase), dict):
                    self.info[phase]["host_loaded"] = 0

    def owned_by_item_7(self):
        """Outputs the kernels computed from the inputs and from one host value per row (the row sums of a backward
        done on the host, say) are not forgiven where the output holds fewer than four values for each of the
        host's (N < 4: at N = 1 the host's values could be the whole output). When the judge's replay found that
        host work (item 7 charges it), the values are the kernels' all the same: one mistake, charged once, in item
        7 (which charges a host op the replay finds at any N, so a host that computed the output itself gains
        nothing here)."""
        for k in self.per_row_host:
            self.info.setdefault("kernel_made", {})[k] = True
            self.info.setdefault("tainted", {})[k] = False

    def host_work(self, op: dict, reached: str) -> dict:
        """Item 7's evidence, from the judge's own replay: the host op whose work on an activation a kernel loaded
        or an output returned (rmsnorm_testkit/dataflow.py), in the phase it ran in, with the line the submission's
        side noticed for an op of that name (advice, for the message only)."""
        fwd_at = next((at for at, _, refs in self.recipe.snapshots if "y" in refs), None)
        phases = [p for p in ("fwd", "bwd") if isinstance(self.info.get(p), dict)]
        if reached in ("y", "r", "dx", "dg"):
            phase = "fwd" if reached in ("y", "r") else "bwd"
        elif len(phases) == 1 or fwd_at is None:
            phase = phases[0] if phases else "fwd"
        else:
            phase = "fwd" if op["step"] < fwd_at else "bwd"
        noticed = (self.info.get(phase) or {}).get("host_ops") or []
        where = next((str(o.get("where") or "") for o in noticed if isinstance(o, dict) and
                      o.get("op") in (op["op"], op["op"].rstrip("_")) and o.get("where")), "")
        return {"phase": phase, "reached": reached, "op": dict(op, where=where)}

    def replayed(self, again_run: replay.Replay, views: dict) -> list:
        """The task's recipe run by ``again_run`` on ``views`` (replay.run), within the group's CPU budget: a kernel
        that never ends there ends the group, as one of the first run does (replay.Stale passes through)."""
        try:
            with watchdog.budgeted(self.judge.budget, self.judge.kernels.path):
                return replay.run(self.recipe, again_run, views)
        except watchdog.OutOfTime as e:
            raise TimedOut("its CPU time ran out in a kernel", cpu=True, where=e.where, stuck=e.stuck) from None

    def zero_lanes(self) -> tuple:
        """({output: tensor}, {output: made by kernels}) of the task with masked-off lanes read as 0.0 instead of
        NaN: its recipe replayed by the judge on the task's own inputs, never the submission asked again (a second
        call it could tell from the first). ({}, {}) when the recipe cannot be replayed."""
        views = {role: replay.buffer_of(v).clone().as_strided(v.shape, v.stride(), v.storage_offset())
                 for role, v in self.pristine.items()}
        again_run = replay.Replay(self.judge.kernels)
        old = self.judge.triton.set_undefined_float(0.0)
        try:
            seen = self.replayed(again_run, views)
        except replay.Stale:
            return {}, {}
        finally:
            self.judge.triton.set_undefined_float(old)
        out = {}
        for snap in seen:
            out.update(snap)
        return out, {k: k not in again_run.unmade for k in out}

    def inputs_modified(self) -> list:
        """The inputs besides dy that the task's kernels wrote into (the judge's own memory of them): x, g, r (as the
        judge left them: overwritten, in a task whose saved tensors were offloaded)."""
        changed = []
        for k in ("x", "g", "r"):
            if k in self.given:
                buf, view = self.given[k]
                self.judge.memory.refresh(buf)
                was = self.overwritten.get(k, self.original[k])
                if not torch.equal(view.contiguous().view(torch.uint8), was.contiguous().view(torch.uint8)):
                    changed.append(k)           # (byte for byte: NaN, the overwritten value, is no number)
        return changed

    def offload(self):
        """Between the forward and the backward of a task whose saved tensors were offloaded (the submission's side
        ran the forward under saved-tensor hooks that copy each saved tensor: host.offloaded), overwrite x, g and
        every buffer the forward's kernels stored with NaN (all bytes set: -1 in an integer buffer). A backward that
        reads only ctx.saved_tensors reads the copies; one that reads a tensor kept elsewhere (an attribute of ctx,
        a global) reads this. Copies of the values as they were stay candidates for the host's copies
        (provenance.Memory.kept), so the saved copies count as the moves they are."""
        memory = self.judge.memory
        for buf in memory.buffers.values():
            memory.refresh(buf)
        memory.keep()
        inputs = {id(self.given[k][0]): k for k in ("x", "g") if k in self.given}
        self.overwritten_names = {}
        for buf in list(memory.buffers.values()):
            if id(buf) in inputs:
                memory.overwrite(buf)
            elif bool(buf.written.any()):               # only what the forward's kernels stored: a module's own
                self.put_back.append((buf, memory.overwrite(buf, buf.written)))  # counters beside it are its own
            else:
                continue
            self.overwritten_names[id(buf)] = inputs.get(id(buf))
        self.overwritten = {k: self.given[k][1].clone() for k in ("x", "g") if k in self.given}

    def restore(self):
        """After the offloaded backward: what the judge overwrote in the submission's own buffers, put back where
        nothing wrote since (a buffer a module keeps between calls goes on as the file left it)."""
        for buf, was in self.put_back:
            self.judge.memory.restore(buf, was)
        self.put_back = []

    def read_overwritten(self) -> list:
        """What a backward launch loaded of the memory the judge overwrote (offload): x, g, or a buffer the forward's
        kernels stored (named as the output it is, y or r, where it is one)."""
        outputs = {buf_id: k for k, buf_id in self.output_buffers.items()}
        return sorted({self.overwritten_names.get(b) or (f"{outputs[b]}'s memory" if b in outputs else
                                                         "memory your forward's kernels stored")
                       for b in self.judge.memory.read_overwritten})

    def dy_modified(self) -> bool:
        if "dy" not in self.given:
            return False
        buf, view = self.given["dy"]
        self.judge.memory.refresh(buf)
        return not torch.equal(view, self.original["dy"])


def summary(rec, roles: dict, noticed: dict, copies=(), units=None) -> dict:
    """A phase as the judge saw it (the job's format, phases.Phase.summary's): each launch's arguments with
    their roles (and ``copy_of``: the role of the tensor a host copy copies, from provenance.Memory.copies), counted
    in elements of each role's dtype (``units``: phases.launch_records), and the host ops and norm calls the
    submission's side noticed."""
    by_storage = {v: k for k, v in roles.items()}
    copy_of = {copy: by_storage[source] for source, _, _, copy, _ in copies if source in by_storage}
    launches = launch_records(rec.launches, roles, copy_of, units)
    host_ops = [op for op in (noticed.get("host_ops") or []) if isinstance(op, dict)][:64]
    norms = [n for n in (noticed.get("norms") or []) if isinstance(n, dict)][:16]
    return {"launches": launches, "norms": norms, "host_ops": host_ops}


def summed_partials(dg: torch.Tensor, memory: provenance.Memory, rows: int = 0) -> tuple:
    """Is ``dg`` the column sums of rows of a buffer kernels stored (the lecture's dg_partial.sum(0); of its first
    or last rows only, a wrong sum the diagnosis then names), up to the rounding of the sum and of dg's dtype, that
    of each term included? ("made", the judge's own sum of those rows) when that buffer is the kernels' work
    (provenance.MADE, or DERIVED from a few host values: Memory.forgiven, with x's ``rows``): the grader then
    judges that sum, not what the host wrote within the rounding; ("host's", None) when its values came from the
    host's (a partial buffer the host filled and a kernel touched); (None, None) when no buffer sums to dg."""
    found = None
    for part, origins in _partials(dg, memory):
        summed = _sums_to(dg, part)
        if summed is not None:
            origins = _columns(origins, dg.numel())
            clean = provenance.MADE + ((provenance.DERIVED,) if memory.forgiven(rows, part.numel()) else ())
            if bool(torch.isin(origins, torch.tensor(clean, dtype=torch.uint8)).all()):
                return "made", summed
            found = "host's"
    return found, None


def _partials(dg: torch.Tensor, memory: provenance.Memory):
    """(values, origins) of each buffer view kernels stored that could hold dg's partial rows."""
    n = dg.numel()
    for buf, dtype, offset, shape, strides in memory.kernel_views.values():
        part = memory.view(buf, dtype, offset, shape, strides)
        if n and dtype.is_floating_point and (part.numel() % n == 0 or (part.dim() >= 2 and part.shape[-1] > n)):
            yield part, memory.origins(buf, dtype, offset, shape, strides)


def _columns(part: torch.Tensor, n: int) -> torch.Tensor:
    """``part``'s rows of ``n`` values: the buffer's own rows, or, for rows wider than dg (padded to a block,
    summed, then sliced: ``dg_partial.sum(0)[:N]``), their first ``n`` columns."""
    if part.dim() >= 2 and part.shape[-1] > n:
        return part.reshape(-1, part.shape[-1])[:, :n]
    return part.reshape(-1, n)


def _sums_to(dg: torch.Tensor, part: torch.Tensor) -> torch.Tensor | None:
    """The column sums of ``part``'s rows (all, first or last; float64) that ``dg`` is, within the rounding of the
    sum, or None."""
    n = dg.numel()
    terms = _columns(part, n).double()
    zero = torch.zeros(1, n, dtype=torch.float64)
    prefix = torch.cat([zero, terms.cumsum(0)])                      # rows 0..k-1, for every k
    sums = torch.cat([prefix[1:], prefix[-1:] - prefix[1:-1]])        # first rows, then last rows
    scale = torch.cat([zero, terms.abs().cumsum(0)])[-1:]
    eps = torch.finfo(dg.dtype).eps           # a sum in dg's dtype (torch.sum(..., dtype=x.dtype)) rounds each term
    slack = (1e-5 + eps) * scale + eps * 2 * sums.abs() + 1e-30
    ok = ((dg.double().reshape(1, n) - sums).abs() <= slack).all(1)
    whole = terms.shape[0] - 1                                        # all rows, when that is one of the matches
    match = [whole] if bool(ok[whole]) else ok.nonzero().reshape(-1).tolist()
    return sums[int(match[0])] if match else None


# ---------------------------------------------------------------------------------------------------------
# the tasks
# ---------------------------------------------------------------------------------------------------------
def forward(t: Task):
    say("rmsnorm_forward", t.given["x"][1])
    try:
        t.run_phase("fwd", "forward", ["x", "g"])
    finally:
        t.info["inputs_modified"] = t.inputs_modified()


def backward(t: Task):
    say("rmsnorm_backward", t.given["x"][1])
    try:
        t.run_phase("bwd", "backward", ["dy", "x", "g", "r"])
    finally:
        t.info["dy_modified"] = t.dy_modified()
        t.info["inputs_modified"] = t.inputs_modified()


def _kept(described) -> list:
    """The ctx attributes holding tensors, as the submission's side described them
    (rmsnorm_testkit.compare.ctx_tensors): names, shapes and dtypes only, short."""
    kept = []
    for k in described[:8] if isinstance(described, list) else []:
        try:
            name, shape, dtype = k
            kept.append([str(name)[:40], [int(d) for d in shape][:8], str(dtype)[:20]])
        except (TypeError, ValueError):
            continue
    return kept


def autograd(t: Task):
    """rmsnorm(x, g) with the inputs the task names requiring grad (both, unless it says otherwise), then
    y.backward(dy); with neither requiring grad, rmsnorm alone (it must still work: there is no backward)."""
    requires_grad = [str(k) for k in t.task.get("requires_grad", ("x", "g"))]
    say("rmsnorm (the forward through TritonRMSNorm)", t.given["x"][1])
    offload = {"offload": True} if t.task.get("offload") is True else {}
    answer = t.run_phase("fwd", "ag_forward", ["x", "g"], requires_grad=requires_grad, **offload)
    t.info["saved"] = answer.get("saved") if isinstance(answer.get("saved"), (list, type(None))) else None
    t.info["saved_r"] = "r_saved" in t.tensors
    t.info["ctx_tensors"] = _kept(answer.get("ctx_tensors"))
    t.progress = {"info": {"failed_in": "bwd", "saved": t.info["saved"], "saved_r": t.info["saved_r"],
                           **({"not_tensors": t.info["not_tensors"]} if t.info.get("not_tensors") else {})},
                  "tensors": {k: v for k, v in t.tensors.items() if k in ("y", output_key("y", "stored"))}}
    if "r_saved" in t.tensors:
        t.tensors["r_saved"] = t.tensors["r_saved"].clone()
    if not requires_grad:
        return
    if offload:
        t.offload()
    say("y.backward() (the backward through TritonRMSNorm)", t.given["x"][1])
    try:
        t.run_phase("bwd", "ag_backward", ["dy"])
    finally:
        if offload:
            t.info["read_overwritten"] = t.read_overwritten()
            t.restore()
        t.info["dy_modified"] = t.dy_modified()
        t.info["inputs_modified"] = t.inputs_modified()


def made_inputs(spec: dict) -> dict:
    """x, g and dy made here from a seed (a task that needs no particular values: the prediction's)."""
    dtype = compare.DTYPES[str(spec["dtype"])]
    x, g, dy = timing.speed_inputs(tuple(int(d) for d in spec["shape"]), dtype, int(spec["seed"]))
    return {"x": x, "g": g, "dy": dy}


def host_op_works(noticed: dict) -> list:
    """The host ops the submission's side noticed in a phase, as the performance model's work (advice: they only
    make the prediction's time longer or shorter)."""
    works = []
    for op in (noticed or {}).get("host_ops") or []:
        try:
            seen = types.SimpleNamespace(name=str(op["op"])[:40], is_view=False, in_bytes=(int(op["in_bytes"]),),
                                         out_bytes=(int(op["out_bytes"]),))
        except (KeyError, TypeError, ValueError):
            continue
        w = perf.host_op_work(seen)
        if w is not None:
            works.append(w)
    return works


def planned(recorded, kernels: Kernels):
    """(launches, host-op works) of one step at item 10's shape, read by the judge from the step's recipe (host.py's
    "record": the launches and host ops the GPU's timing replays): each launch's grid, warps and the bytes each
    tensor argument's view spans (an autotuned launch: its first config, as the simulator runs it), each host op's
    bytes; None when there is none."""
    if not isinstance(recorded, dict) or not isinstance(recorded.get("launches"), list):
        return None
    try:
        launches = []
        for launch in recorded["launches"][:64]:
            launch = launch["choose"][0] if "choose" in launch else launch
            ident, grid, kw = launch["kernel"], launch["grid"], launch.get("kwargs") or {}
            dims = tuple(int(d) for d in ([grid] if isinstance(grid, int) else list(grid)) + [1, 1, 1])[:3]
            named = {**dict(zip(kernels.parameters(ident), launch.get("args") or [])), **kw}
            warps = (kw.get("num_warps") or {}).get("value") or 4
            launches.append(PlannedLaunch(str(ident["name"])[:80], dims, max(1, dims[0] * dims[1] * dims[2]),
                                          max(1, min(32, int(warps))),
                                          {str(k)[:40]: span(a["ref"]) for k, a in named.items()
                                           if isinstance(a, dict) and isinstance(a.get("ref"), dict)}))
        ops = [w for w in map(perf.host_op_work, map(host_op, recorded.get("ops") or [])) if w is not None][:64]
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return None
    return launches, ops


def recorded(t: Task, request: dict) -> dict:
    """The submission's side's answer to a "record" request: {"recipes": {step: recipe}, "asked": [...]}."""
    answer, fds = t.judge.ask(request)
    close(fds)
    recipes = answer.get("recipes") if isinstance(answer.get("recipes"), dict) else {}
    return {"recipes": recipes, "asked": answer.get("asked") if isinstance(answer.get("asked"), list) else []}


def gpu_path(plans: dict, on: dict, off: dict, kernels: Kernels) -> predict.GpuPath:
    """Which path the wrappers took at item 10's shape with the course GPU in view (predict.GpuPath), from the two
    recipes, with the view and without: what the file asked of the device (the words the judge knows), and each
    launch whose grid or warps the view changed."""
    model = perf.GPUS[predict.COURSE_GPU]
    changed, compared = [], True
    for kind, (launches, _) in plans.items():
        without = planned(off["recipes"].get(kind), kernels)
        compared = compared and without is not None
        for a, b in zip(launches, without[0] if without else []):
            if (a.kernel, a.programs, a.num_warps) != (b.kernel, b.programs, b.num_warps) and \
                    a.kernel not in (c[0] for c in changed):
                changed.append([a.kernel, a.programs, b.programs, a.num_warps, b.num_warps])
    levels = [r.get("level") for r in on["recipes"].values() if isinstance(r, dict) and "level" in r]
    level = predict.weakest([lv for lv in levels if lv in predict.LEVELS]) if levels else None
    refused = next((str(r["refused"]) for r in on["recipes"].values() if isinstance(r, dict) and r.get("refused")),
                   None)
    return predict.GpuPath(model.name, model.sms, sorted(str(a) for a in on["asked"] if a in predict.ASKED),
                           changed[:8], compared, level, refused[:text.ERROR_LINE_CHARS] if refused and
                           level != predict.LEVELS[0] else None)


def span(ref: dict) -> int:
    """The bytes a recipe's tensor view spans, from its first element to its last."""
    shape, strides = [int(n) for n in ref["s"]], [int(s) for s in ref["st"]]
    if 0 in shape:
        return 0
    return (1 + sum((n - 1) * abs(s) for n, s in zip(shape, strides))) * replay.DTYPES[str(ref["d"])].itemsize


def host_op(op: dict) -> types.SimpleNamespace:
    """A recipe's host op as perf.host_op_work reads one: its name, whether it is a view, its bytes in and out."""
    name = str(op.get("op", "")).removeprefix("aten::")
    ins = [a["t"] for a in op.get("args") or [] if isinstance(a, dict) and isinstance(a.get("t"), dict)]
    outs = [o for o in op.get("out") or [] if isinstance(o, dict)]
    view = not name.endswith("_") and bool(outs) and {o.get("b") for o in outs} <= {r.get("b") for r in ins}
    return types.SimpleNamespace(name=name, is_view=view, in_bytes=[span(r) for r in ins],
                                 out_bytes=[span(o) for o in outs])


def predict_item_10(t: Task):
    """Item 10's prediction (rmsnorm_testkit/predict.py): the steps at predict.ROWS rows on inputs made here, as the
    judge records them, and their plan at item 10's shape, which the judge reads from the steps' recipes there
    (host.py's "record", as the GPU's timing replays them), both with the course GPU in the file's view, as much of
    it as the file takes (predict.LEVELS: a step that fails with it runs again with less; the recipe starts where
    the steps ended), and once without it (which launches the device changed). No grade reads it."""
    dtype = t.task["dtype"]
    say("item 10's prediction", t.given["x"][1])
    kw, ran, refused = dict(t.kw), [], []

    def work(phase):
        return perf.works(t.recs[phase]) + host_op_works(t.info[phase])

    def step(phases):
        """The works of ``phases`` ([(name, cmd, inputs)]) with as much of the course GPU in view as they run with."""
        for level in predict.LEVELS:
            t.kw = {**kw, "gpu": predict.COURSE_GPU, "gpu_level": level}
            try:
                works = []
                for name, cmd, names in phases:
                    t.run_phase(name, cmd, names)
                    works += work(name)
                ran.append(level)
                return works
            except Failed as e:
                if level == predict.LEVELS[0]:
                    refused.append(str(e))
            finally:
                t.kw = kw
        return None
    works = {"fwd": step([("fwd", "forward", ["x", "g"])]),
             "fwdbwd": step([("fwd", "ag_forward", ["x", "g"]), ("bwd", "ag_backward", ["dy"])])}
    works = {k: w for k, w in works.items() if w is not None}
    ask = {"cmd": "record", "dtype": dtype, "shape": list(timing.SPEED_SHAPE)}
    on = recorded(t, {**ask, "gpu": predict.COURSE_GPU, "from_level": predict.weakest(ran)})
    off = recorded(t, {**ask, "gpu": None})
    plans = {kind: p for kind in works if (p := planned(on["recipes"].get(kind), t.judge.kernels)) is not None}
    path = gpu_path(plans, on, off, t.judge.kernels)
    path.level = predict.weakest(([path.level] if plans else []) + ran) if plans or ran else None
    first_refusal = refused[0][:text.ERROR_LINE_CHARS] if refused else None
    path.refused = (path.refused or first_refusal) if path.level != predict.LEVELS[0] else None
    got = predict.from_runs(works, plans, dtype, rows=int(t.task["make"]["shape"][0]), path=path)
    t.info["prediction"] = {"gpu": got.gpu, "dtype": dtype, "shares": got.shares, "line": got.line(),
                            "notes": got.notes[:8], "copies": got.copies,
                            "implausible": {k: round(v, 1) for k, v in got.implausible.items()},
                            "path": {"line": path.line(), "short": path.short()},
                            "kernels": {k: [[n, round(us, 2)] for n, us in p.kernels[:64]]
                                        for k, p in got.steps.items()}}


TASKS = {"forward": forward, "backward": backward, "autograd": autograd, "predict": predict_item_10}


@functools.lru_cache(maxsize=None)
def readable(dtype) -> bool:
    """Can the grader read a tensor of ``dtype`` as numbers (copy it, convert it to float64)? Quantized, bit-packed
    and sub-byte dtypes cannot be: an output of one is reported as unreadable, as any value that is no tensor is."""
    try:
        torch.zeros(1, dtype=dtype).clone().double()
        return True
    except Exception:                              # noqa: BLE001 -- torch's refusal, whatever its type
        return False


def run_task(judge: Judge, task: dict, inputs: dict, progress: dict) -> tuple:
    if task["op"] not in TASKS:
        raise ValueError(f"unknown task {task['op']!r}")
    t = Task(judge, task, inputs)
    t.progress = {}
    try:
        TASKS[task["op"]](t)
        if task["op"] != "predict":
            t.verify()
            if undefined_lanes(t.info):
                zero, made = t.zero_lanes()
                t.tensors.update({output_key(k, "if_zero"): v for k, v in zero.items()})
                t.info["if_zero_made"] = made
    except Failed:
        progress.update(t.progress)
        raise
    finally:
        t.close()
    tensors, _ = plain(t.tensors, {})
    return tensors, t.info


def run_tasks(judge: Judge, tasks: dict, inputs: dict) -> tuple:
    """(results, tensors) of every task, as job.submission.tasks.run_tasks reports them."""
    results, tensors = {}, {}
    for name, task in tasks.items():
        progress = {}
        try:
            out, info = run_task(judge, task, inputs, progress)
            tensors.update({output_key(name, k): v for k, v in out.items()})
            results[name] = {"ok": True, **info}
        except Failed as e:
            results[name] = {"error": str(e), **progress.get("info", {}), "raised_in_file": e.raised_in_file,
                             "judged": True, "crash": dataclasses.asdict(e.crash) if e.crash else None}
            tensors.update({output_key(name, k): v.contiguous() for k, v in progress.get("tensors", {}).items()
                            if v is not None})
        except (Broken, Tampered):
            raise                                  # the submission's process ended or hangs: its whole group
        except BaseException as e:                 # noqa: BLE001 -- the judge's own trouble with this task
            # what the file returned or launched that the judge could not take: this task's own (charged wherever
            # it stops a case, as a host error is), never a crash charged once that other parts would be excused
            results[name] = {"error": describe(e), "raised_in_file": True, "judged": True, "crash": None}
    return results, tensors


def undefined_lanes(info) -> bool:
    return any(L.get("undefined_lanes") for p in ("fwd", "bwd") for L in info.get(p, {}).get("launches", []))


def run_groups(hosts: list, groups: dict, inputs: dict, triton, submission, source: str, seconds,
               cpu_seconds=None) -> tuple:
    """(results, tensors, the import's error or None) of every group of tasks, each in a submission's process of
    its own (``hosts``), ended at ``seconds`` of wall time from its start (None: the job's own limit ends it) or
    once it has used ``cpu_seconds`` of CPU time, this process's and its submission process's together: a hang
    or a crash costs its own group only, and a busy machine costs nothing."""
    results, tensors, fresh = {}, {}, {}
    imported = False                 # by an earlier group: a later one's failed import is that group's alone
    for (channel, pid), (group, tasks) in zip(hosts, groups.items()):
        wall = seconds.get(group) if isinstance(seconds, dict) else seconds
        cpu = cpu_seconds.get(group) if isinstance(cpu_seconds, dict) else cpu_seconds
        channel.deadline = None if wall is None else time.monotonic() + wall
        channel.budget = None if cpu is None else cpu_budget(pid, cpu)
        judge = Judge(channel, triton, submission, source)
        judge.fresh = fresh
        try:
            say("importing rmsnorm.py")
            error = judge.load()
            if error and not imported:
                return results, tensors, error
            if error:                                # (its own limits: item 10's prediction has less time)
                results.update({name: {"error": f"importing rmsnorm.py failed: {error}"} for name in tasks})
                continue
            imported = True
            done, made = run_tasks(judge, tasks, inputs)
            results.update(done)
            tensors.update(made)
        except Broken as e:
            message = ended(pid, e, cpu if getattr(e, "cpu", False) else wall)
            results.setdefault("_ended", {})[group] = message
            if SAID["now"] == "importing rmsnorm.py" and not imported:
                return results, tensors, message
            results.update({name: {"error": message} for name in tasks})
        except Tampered as e:
            results["_tampered"] = {"error": str(e)}  # the whole grading's, as the scan's refusal (runner.py)
            return results, tensors, None
        finally:
            stop(pid)
            tensors.update({fresh_key(k): v for k, v in fresh.items() if k != "gen"})
    return results, tensors, None


SAID = {"now": ""}              # what the judge last said it was running (protocol.RUNNING)


def say(what: str, x=None):
    SAID["now"] = running(what, x) if what != "importing rmsnorm.py" else what
    if what == "importing rmsnorm.py":
        print(f"{RUNNING}{what}", flush=True)


def cpu_budget(pid: int, seconds: float):
    """A callable: has CPU time ``seconds`` been used since now, by this process and process ``pid`` together?"""
    start = time.process_time() + process_cpu(pid)
    return lambda: time.process_time() + process_cpu(pid) - start >= seconds


def process_cpu(pid: int) -> float:
    """CPU seconds process ``pid`` has used (user and system, from /proc; 0 where there is none)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def ended(pid: int, why: Broken, seconds: float) -> str:
    """Why a group's submission process stopped answering, as the runner words it for a whole job."""
    where = f" while {SAID['now']}" if SAID["now"] else ""
    if isinstance(why, TimedOut):
        hint = None if not why.where else compare.NO_PROGRESS_HINT if why.stuck else compare.PROGRESS_HINT
        return compare.timed_out(seconds, where + why.where, cpu=why.cpu, hint=hint)
    stop(pid)
    code, cpu = STATUS.get(pid), CPU.get(pid, 0.0)
    limit = resource.getrlimit(resource.RLIMIT_CPU)[0]
    if code == -signal.SIGXCPU or (code == -signal.SIGKILL and limit > 0 and cpu >= limit - 0.5):
        return f"ran out of CPU time ({limit} s){where}: {compare.SLOW_HINT}"
    if code == 0:
        return (f"the submission ended the process{where} (exit code 0: os._exit, or an exit from another thread) "
                f"before the grader got its outputs; rmsnorm.py must return its results, never exit")
    return f"the submission crashed{where} (exit code {code})"


STATUS, CPU = {}, {}             # pid -> exit code, CPU seconds: once reaped


def stop(pid: int):
    """End a submission's process (it may be in an endless loop of its own) and note how it ended."""
    if pid in STATUS:
        return
    try:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if not done:
            os.kill(pid, signal.SIGKILL)
            done, status, usage = os.wait4(pid, 0)
        STATUS[pid], CPU[pid] = os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime
    except (ProcessLookupError, ChildProcessError, PermissionError):
        STATUS[pid] = None
