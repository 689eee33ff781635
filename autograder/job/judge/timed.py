"""Item 10's timing, in the judge's process: the submission's steps replayed and timed by the judge itself.

The submission's process records each timed step at item 10's shape without running it (host.py's "record"):
on tensors that hold no data, every host op by its aten name (recipe.py) and every launch whole (client.py: the
kernel by its name and line, its grid, its scalars and constexprs, each tensor as a view of a buffer of the
recipe). Here the judge compiles the kernels from its own copy of rmsnorm.py with its own Triton (the file's
top-level code never runs in this process: a kernel is its ``def``, its outside names bound from the recipe's
descriptions, launches.Kernels), makes the inputs itself from seeds it draws, replays the recipe on the GPU,
captures that replay in a CUDA graph of its own and times it with its own events, fresh inputs before every timed
replay. The timed replays' outputs are checked on the GPU against the reference of their inputs (``Check``): about
CHECKS_PER_ROUND of each round's (every one of a short round), drawn here where no kernel can see the draw (a kernel
that is cheap on some replays, to lower a round's median, is wrong on more than half a round and is caught), and the
last one always, whose outputs also go back whole to the grader, which checks them again.

Nothing of the submission's runs while it is timed, or at all, in this process: what it patches, hooks or wraps in
its own process lies on no timed path, and whatever its host code computed when it recorded the step was computed
from tensors without values. Torch ops in the recipe run as recorded, and are torch's time (and item 10's rule on
torch's work: ``torch_work``).
"""
from __future__ import annotations

import base64
import importlib
import math
import os

import torch
from rmsnorm_testkit import compare, text, timing

from ..wire.channel import Broken, close
from ..wire.errors import describe
from ..wire.phases import TRANSPORT_OPS
from ..wire.protocol import TIMED, output_key, plain, timed_key
from . import remote
from .launches import Kernels
from .launches import plain as described
from .provenance import Refused
from .replay import Buffers, Stale, placed

CALL_ROWS = 8                 # rows of the untimed call's y and dx that go back (the timed replay's go back whole)
LARGE_OP = 4                  # a torch op reading M·N / LARGE_OP elements or more does the kernels' work
ALLOCATIONS = frozenset({"empty", "empty_like", "new_empty", "empty_strided", "new_empty_strided", "zeros",
                         "zeros_like", "new_zeros", "ones", "ones_like", "full", "full_like", "fill_", "zero_"})
CHECK_SLACK = 4.0             # a timed replay's outputs are checked on the GPU within this many tolerances
CHECKS_PER_ROUND = 32         # timed replays checked per round of timing, on average: each with the chance 32 / reps,
                              # drawn here, unseen (a round made cheap by more than half its replays escapes them
                              # all with a chance under e^-16)
OUTPUTS = TIMED               # each step's outputs
MAX_WORKSPACE = 8 << 30       # bytes of workspaces (buffers no op of the recipe made) a step may use in all
ROLES = ("x", "g", "dy")      # the inputs, as timing.speed_inputs makes them
MAX_LAUNCHES = 256            # launches a recorded step may make


def language() -> dict:
    """The modules a kernel may name (wire/names.LANGUAGE's keys), as this process's Triton has them."""
    import triton
    import triton.language as tl
    out = {"triton": triton, "tl": tl, "tl.math": tl.math, "math": math}
    for key, path in (("tl.extra", "extra"), ("libdevice", "extra.libdevice"), ("tl.extra.cuda", "extra.cuda")):
        try:
            out[key] = importlib.import_module(f"triton.language.{path}")
        except ImportError:
            pass
    return out


class TritonKernels(Kernels):
    """The submission's kernels, compiled with Triton from the judge's copy of the file (launches.Kernels finds
    each ``def`` and binds its outside names; here they bind to Triton's own language)."""

    def __init__(self, path: str, source: str):
        super().__init__(path, source)
        self.language = language()

    def make(self, proto):
        proto.__globals__[" language"] = self.language["tl"]   # Triton's interpreter wants it among the globals
        return self.language["triton"].jit(proto)                # of every jit function, named or not

    def plain(self, d):
        """A described constant: a number, a string, None, or one of Triton's dtypes."""
        if isinstance(d, dict) and "dtype" in d:
            return self.dtype(d["dtype"])
        if isinstance(d, dict) and "other" in d:
            raise Refused(f"a kernel was given a {str(d['other'])[:60]}, which Triton cannot pass to a kernel")
        return described(d)

    def dtype(self, name):
        value = getattr(self.language["tl"], str(name), None)
        if not isinstance(value, self.language["tl"].dtype):
            raise Refused(f"no dtype named {name!r} in Triton")
        return value

    def _bound(self, d, seen):
        kind = d.get("kind") if isinstance(d, dict) else None
        if kind == "kernel":
            return self.kernel(d, seen)
        if kind == "constexpr":
            return self.language["tl"].constexpr(self.plain(d.get("value")))
        if kind == "dtype":
            return self.dtype(d.get("name"))
        if kind == "module" and d.get("name") in self.language:
            return self.language[d["name"]]
        if kind == "op" and d.get("space") in self.language and hasattr(self.language[d["space"]], str(d["name"])):
            return getattr(self.language[d["space"]], str(d["name"]))
        name = str(d.get("name") or d.get("type") or "?")[:60] if isinstance(d, dict) else "?"
        raise Refused(f"a kernel reads {name}, which is not a kernel, a constexpr or a part of Triton's language "
                      f"(Triton compiles a kernel's outside names only if they are)")


class Choice:
    """One launch of a step, or an autotuned kernel's configs, one of which runs (``chosen``, by ``Step.fastest``)."""

    def __init__(self, alternatives: list, zero: list):
        self.alternatives, self.zero, self.chosen = alternatives, zero, None


class Step:
    """One recorded step, run by the judge on its own tensors: ``step(inputs)`` replays the host ops and the
    launches in the order they were recorded and returns the outputs' views."""

    def __init__(self, kind: str, recorded: dict, kernels: TritonKernels, device: str):
        if not isinstance(recorded, dict) or not isinstance(recorded.get("ops"), list) or \
                not isinstance(recorded.get("launches"), list) or not isinstance(recorded.get("outputs"), dict):
            raise Stale("the step's recipe did not come back")
        if recorded.get("overflow"):
            raise Stale("the host ran more torch ops than the grader replays")
        if len(recorded["launches"]) > MAX_LAUNCHES:
            raise Stale(f"the step made more than {MAX_LAUNCHES} launches")
        self.kind, self.kernels, self.device = kind, kernels, device
        self.workspaces = {}          # buffer number -> the judge's memory for a buffer no op of the recipe made
        self.work = None              # the torch ops that computed, as the judge saw them run (the first call)
        constants = recorded.get("constants")
        self.constants = constants if isinstance(constants, dict) else {}
        self.ops, self.roles = recorded["ops"], recorded.get("roles") or {}
        self.outputs = [recorded["outputs"].get(k) for k in OUTPUTS[kind]]
        if any(not isinstance(ref, dict) for ref in self.outputs):
            raise Stale("an output of the step is not a tensor the recipe made")
        events = placed(self.ops, recorded["launches"])
        self.events = [(kind_, what) for _, kind_, what in sorted(events, key=lambda e: e[0])]
        self.launches = [self.choice(what) for kind_, what in self.events if kind_ == "launch"]

    def choice(self, launch: dict) -> Choice:
        """The launch's alternatives (an autotuned kernel's configs, client.Autotuner; else the one launch)."""
        alternatives = launch.get("choose") if "choose" in launch else [launch]
        if not isinstance(alternatives, list) or not alternatives:
            raise Stale("an autotuned launch with no config")
        zero = [str(n) for n in launch.get("zero") or []] if "choose" in launch else []
        return Choice([self.bind(a if isinstance(a, dict) else {}) for a in alternatives[:MAX_LAUNCHES]], zero)

    def bind(self, launch: dict) -> tuple:
        """(kernel, grid, the arguments' descriptions): the kernel compiled here, once."""
        kernel = self.kernels.kernel(launch.get("kernel") or {}, {})
        grid = launch.get("grid")
        grid = (grid,) if isinstance(grid, int) else tuple(int(g) for g in grid or ())
        if not grid or any(g < 0 for g in grid):
            raise Stale(f"a launch of {getattr(kernel, '__name__', 'a kernel')} with the grid {grid}")
        return kernel, grid, list(launch.get("args") or []), dict(launch.get("kwargs") or {})

    def __call__(self, inputs: dict) -> tuple:
        memory = Buffers(self.device)
        memory.unknown = self.workspace
        for b, role in self.roles.items():
            memory.adopt({"b": int(b), "n": inputs[role].untyped_storage().nbytes()}, inputs[role])
        launches, work = iter(self.launches), []
        # the memory whose values torch made from the inputs (the inputs, and what host ops made from them): a sum
        # over it is the kernels' work done by torch, where a sum over what kernels stored is the partials' glue
        derived = {inputs[role].untyped_storage().data_ptr() for role in self.roles.values()}
        for kind, what in self.events:
            if kind == "op" and not any(what.get("out") or []):
                continue                             # a value read back to the host (.item()): no tensor changes
            if kind == "op":
                name, overload, args, kwargs, outs, refs = memory.call(what)
                work += computed(name, overload, args, kwargs, outs, derived)
                for ref, t in zip(refs, outs):
                    memory.adopt(ref, t)
            else:
                choice = next(launches)
                if choice.chosen is None:
                    choice.chosen = self.fastest(choice, memory)
                self.launch(choice.alternatives[choice.chosen], memory)
        if self.work is None:
            self.work = work
        return tuple(memory.tensor(ref) for ref in self.outputs)

    def kernels_launched(self) -> list:
        """The names of the kernels the step launches (feedback: what the judge times)."""
        return sorted({getattr(a[0], "__name__", "?") for c in self.launches for a in c.alternatives})[:32]

    def autotuned(self) -> list:
        """[kernel, the config chosen, of how many] of each autotuned launch (feedback)."""
        return [[getattr(c.alternatives[0][0], "__name__", "?"), c.chosen, len(c.alternatives)]
                for c in self.launches if len(c.alternatives) > 1][:16]

    def workspace(self, b: int, n: int) -> torch.Tensor:
        """A buffer the step uses and no op of its recipe made (a workspace the file keeps between calls, made at an
        earlier call or at import; a constant made from Python's numbers, ``torch.tensor([m])``): the judge's own,
        kept from call to call, holding the bytes the recording saw in a small CPU buffer (recipe.Log.constant:
        they came from no input's values, which the recording never had), else zeros. Values the host computed
        into a workspace on the device are not there: an output that needs them comes out wrong."""
        if b not in self.workspaces and str(b) in self.constants:
            data = base64.b64decode(str(self.constants[str(b)]))
            if len(data) == n:
                self.workspaces[b] = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(self.device)
        if b not in self.workspaces:
            if n + sum(w.numel() for w in self.workspaces.values()) > MAX_WORKSPACE:
                raise Stale(f"the step kept more than {MAX_WORKSPACE >> 30} GiB of buffers between calls")
            self.workspaces[b] = torch.zeros(n, dtype=torch.uint8, device=self.device)
        return self.workspaces[b]

    def launch(self, alternative: tuple, memory: Buffers, zero=()):
        kernel, grid, args, kwargs = alternative
        args = [self.argument(a, memory) for a in args]
        kwargs = {k: self.argument(a, memory) for k, a in kwargs.items()}
        named = {**dict(zip(getattr(kernel, "arg_names", []), args)), **kwargs}
        for name in zero:                            # the autotuner's reset_to_zero, while it times the configs
            if isinstance(named.get(name), torch.Tensor):
                named[name].zero_()
        kernel[grid](*args, **kwargs)

    def fastest(self, choice: Choice, memory: Buffers) -> int:
        """Which config of an autotuned launch runs fastest on the judge's GPU, each timed on the step's own
        tensors and the memory restored after each (as Triton's autotuner does); the first on a CPU."""
        if len(choice.alternatives) == 1 or torch.device(self.device).type != "cuda":
            return 0
        described = [a for _, _, args, kwargs in choice.alternatives for a in [*args, *kwargs.values()]]
        tensors = [t for t in (self.argument(a, memory) for a in described) if isinstance(t, torch.Tensor)]
        kept = [(t, t.clone()) for t in tensors]     # every config's tensors, as they were
        times = []
        for alternative in choice.alternatives:
            try:
                times.append(timing.time_cuda(lambda: self.launch(alternative, memory, choice.zero),
                                              warmup_ms=5.0, rep_ms=10.0, min_reps=5, rounds=1))
            except Exception:                        # noqa: BLE001 -- a config that fails is not chosen
                times.append(math.inf)
            for t, was in kept:
                t.copy_(was)
        return min(range(len(times)), key=times.__getitem__)

    def argument(self, d, memory: Buffers):
        if isinstance(d, dict) and "ref" in d:
            return memory.tensor(d["ref"])
        if isinstance(d, dict) and "constexpr" in d:
            return self.kernels.plain(d["constexpr"])
        return self.kernels.plain(d)


def torch_work(work: list, shape) -> list:
    """The torch ops a step ran that compute (``Step.work``: {"op", "reads"}), largest first, when together they read
    M·N / LARGE_OP elements or more: the kernels' work done by torch, in one op or in many small ones; else nothing."""
    if sum(w["reads"] for w in work) < shape[0] * shape[1] // LARGE_OP:
        return []
    return sorted(work, key=lambda w: -w["reads"])[:8]


def computed(name: str, overload: str, args: list, kwargs: dict, outs: list, derived: set | None = None) -> list:
    """[{"op", "reads"}] of one host op the judge ran, if it computed: not a transport op (but a sum over memory torch
    made from the inputs, ``derived``, which it grows by this op's outputs), an allocation or a fill, and not a view
    (its outputs in its inputs' memory, but for an op that writes: in place, or into an argument its schema marks
    written, ``out=``, ``out0=``, ``grad_input=``...), told from the tensors it ran on, never from the recipe's word."""
    short = name.removeprefix("aten::")
    ins = [a for a in torch.utils._pytree.tree_leaves((args, {k: v for k, v in kwargs.items() if k != "out"}))
           if isinstance(a, torch.Tensor)]
    memory = {t.untyped_storage().data_ptr() for t in ins}
    from_inputs = derived is not None and bool(memory & derived) and short not in ALLOCATIONS
    if from_inputs:                                  # (an allocation like x's carries none of its values)
        derived |= {o.untyped_storage().data_ptr() for o in outs}
    if (short in TRANSPORT_OPS and not (short == "sum" and from_inputs)) or short in ALLOCATIONS or not ins:
        return []
    writes = short.endswith("_") or overload.startswith("out") or "out" in kwargs or _writes(short, overload)
    if not writes and outs and all(o.untyped_storage().data_ptr() in memory for o in outs):
        return []
    return [{"op": short, "reads": max(t.numel() for t in ins), "where": ""}]


def _writes(short: str, overload: str) -> bool:
    """Does the op's schema mark an argument as written (``Tensor(a!) out0``)?"""
    try:
        schema = torch._C._get_schema(f"aten::{short}", "" if overload == "default" else overload)
    except (AttributeError, RuntimeError):
        return False
    return any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)


class Check:
    """A timed replay's outputs, compared on the GPU with the reference of the inputs it was given (float32 math, a
    few tolerances wide: the grader compares the last replay's exactly). The reference comes from the inputs made
    again from their seed after the replay, and the inputs are compared with them (``changed``): a kernel that
    writes into its inputs, or anywhere else in the judge's memory, changes nothing the check reads. Each verdict is
    read back to the host at once (the checks run between timed replays, outside the time)."""

    def __init__(self, kind: str, statics, outputs, shape, dtype, eps: float = 1e-5):
        self.kind, self.statics, self.outputs, self.shape, self.dtype, self.eps = \
            kind, statics, outputs, shape, dtype, eps
        self.device = statics[0].device
        self.made = timing.speed_inputs(shape, dtype, 0, device=self.device)
        self.wrong, self.checked, self.changed = 0, 0, set()

    def __call__(self, seed: int):
        timing.speed_inputs(self.shape, self.dtype, seed, self.device, out=self.made)
        self.changed |= {n for n, a, b in zip(ROLES, self.statics, self.made) if not torch.equal(a, b)}
        x, g, dy = (t.float() for t in self.made)
        r = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        expected = {"y": x * r * g}
        if self.kind == "fwdbwd":
            wdy, xhat = dy * g, x * r
            expected.update(dx=r * (wdy - xhat * (wdy * xhat).mean(-1, keepdim=True)), dg=(dy * xhat).sum(0))
        bad = False
        for name, got in zip(OUTPUTS[self.kind], self.outputs):
            want = expected[name]
            atol, rtol = compare.TOLERANCES[self.made[0].dtype]
            if name == "dg":
                atol = max(atol, 2 * torch.finfo(self.made[0].dtype).eps * x.shape[0] ** 0.5)
            slack = CHECK_SLACK * (atol + rtol * want.abs())
            bad = bad or got.shape != want.shape or not bool(((got.float() - want).abs() <= slack).all())
        self.wrong += bad
        self.checked += 1


def secret_seed() -> int:
    return int.from_bytes(os.urandom(6), "little")


class StepFailed(Exception):
    """The forward's own error when the submission's process recorded it (``error``, as wire/errors describes it):
    the speed task's error, as a failing call is."""

    def __init__(self, error: str):
        super().__init__(error)
        self.error = error


def error_line(error: str) -> str:
    """An error of the submission's process in one line."""
    lines = str(error).strip().splitlines()
    return (lines[0] if lines else "an error")[:text.ERROR_LINE_CHARS]


def run_speed(recipes: dict, kernels: TritonKernels, task: dict) -> tuple:
    """(tensors, info) of item 10's task, in the form judge/speed.py reads: the untimed call's outputs at rows
    drawn after it, each step's time from the judge's own CUDA graph, the last timed replay's whole outputs, the
    seeds (the grader makes the same inputs and checks), and what the timing found. The forward's own error is
    the task's (StepFailed); the forward+backward's costs its own parts only (``fwdbwd_error``)."""
    shape, dtype, device = tuple(task["shape"]), task["dtype"], task.get("device", "cuda")
    info, steps = {"seeds": {"call": secret_seed()}}, {}
    for kind in OUTPUTS:
        got = recipes.get(kind) if isinstance(recipes, dict) else None
        if isinstance(got, dict) and isinstance(got.get("error"), str):
            if kind == "fwd":
                raise StepFailed(got["error"])
            info["fwdbwd_error"] = error_line(got["error"])
            if got.get("cause") == "no_dg_backward":     # (a field of the record's, never read from its text)
                info["fwdbwd_cause"] = got["cause"]
            continue
        try:
            steps[kind] = Step(kind, got, kernels, device)
        except (Stale, Refused) as e:
            info[f"{kind}_replay_error"] = str(e)
    call = dict(zip(ROLES, timing.speed_inputs(shape, dtype, info["seeds"]["call"], device=device)))
    made = {}
    for kind, step in list(steps.items()):
        try:
            for name, t in zip(OUTPUTS[kind], step(call)):
                made.setdefault(name, t)                 # (y: the forward's own)
            info[f"{kind}_torch_work"] = torch_work(step.work, shape)
        except Exception as e:                      # noqa: BLE001 -- the kernels' error on the judge's inputs
            info[f"{kind}_replay_error"] = text.error_line(e)
            del steps[kind]
    info["rows"] = sorted({int.from_bytes(os.urandom(4), "little") % shape[0] for _ in range(CALL_ROWS)})
    index = torch.tensor(info["rows"], device=device)      # drawn after the call
    out = {name: t.clone() if name == "dg" else t.index_select(0, index) for name, t in made.items()}
    del made, call
    for kind, step in steps.items():
        info[f"{kind}_autotuned"], info[f"{kind}_launched"] = step.autotuned(), step.kernels_launched()
        out.update({timed_key(kind, k): t for k, t in timed(kind, step, shape, dtype, device, info).items()})
    return plain(out, info)


def timed(kind: str, step: Step, shape, dtype, device, info: dict) -> dict:
    """One step captured in the judge's CUDA graph and timed into ``info``, fresh inputs before every timed replay,
    about CHECKS_PER_ROUND replays of each round checked (drawn here, unseen) and each round's last; the last
    replay's whole outputs, on the CPU (or none, with the reason in ``info``)."""
    c = timing.kept()
    statics = timing.speed_inputs(shape, dtype, secret_seed(), device=device)
    try:
        replay, got = timing.captured(lambda: step(dict(zip(ROLES, statics))))
    except timing.NotCapturable as e:
        info[f"{kind}_graph_error"] = str(e)
        return {}
    check = Check(kind, statics, got, shape, dtype)

    def fresh(reps=None):                            # the last replay's outputs checked (by chance), then new inputs
        if reps is not None and int.from_bytes(os.urandom(4), "little") % max(1, reps) < CHECKS_PER_ROUND:
            check(info["seeds"][kind])
        seed = info["seeds"][kind] = secret_seed()
        with c["no_grad"]():
            timing.speed_inputs(shape, dtype, seed, device, out=statics)
    fresh()                                          # (captured, not yet run: its outputs hold nothing yet)
    info[f"{kind}_graph_ms"] = timing.time_cuda(replay, prepare=fresh, after=lambda: check(info["seeds"][kind]))
    info[f"{kind}_replays_checked"], info[f"{kind}_replays_wrong"] = check.checked, check.wrong
    info[f"{kind}_inputs_changed"] = [n for n in ROLES if n in check.changed]
    outputs = {k: c["clone"](t).cpu() for k, t in zip(OUTPUTS[kind], got)}     # before the step runs again
    try:
        _, info[f"{kind}_kernels"] = timing.kernel_times(
            lambda: step(dict(zip(ROLES, statics))),
            lambda: timing.speed_inputs(shape, dtype, secret_seed(), device, out=statics))
    except Exception as e:                           # noqa: BLE001 -- feedback only: the replay's time stands
        info[f"{kind}_profile_error"] = text.error_line(e)
    return outputs


def run_job(channel, pid: int, simulator, submission, source: str, tasks: dict) -> tuple:
    """(results, tensors, the import's error or None) of item 10's tasks: each step recorded by the submission's
    process (``channel``, ``pid``), then replayed and timed here."""
    results, tensors = {}, {}
    judge = remote.Judge(channel, simulator, submission, source)
    try:
        remote.say("importing rmsnorm.py")
        error = judge.load()
        if error:
            return results, tensors, error
        kernels = TritonKernels(str(submission), source)
        for name, task in tasks.items():
            remote.say(f"recording the timed steps at {tuple(task['shape'])}")
            answer, fds = judge.ask({"cmd": "record", "shape": list(task["shape"]), "dtype": task["dtype"]})
            close(fds)
            try:
                if isinstance(answer.get("error"), str):
                    raise StepFailed(answer["error"])
                out, info = run_speed(answer.get("recipes"), kernels, task)
                tensors.update({output_key(name, k): v for k, v in out.items()})
                results[name] = {"ok": True, **info}
            except StepFailed as e:
                results[name] = {"error": e.error}
            except Exception as e:                   # noqa: BLE001 -- reported per task, as every task's error
                results[name] = {"error": describe(e)}
    except remote.Tampered as e:
        results["_tampered"] = {"error": str(e)}
        return results, tensors, None
    except Broken as e:
        message = remote.ended(pid, e, 0)
        results.update({name: {"error": message} for name in tasks if name not in results})
        if remote.SAID["now"] == "importing rmsnorm.py":
            return results, tensors, message
    finally:
        remote.stop(pid)
    return results, tensors, None
