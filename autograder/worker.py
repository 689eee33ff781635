"""The child side of grading: import a submission and run the grader's tasks.

Runs sandboxed (sandbox.py) as

    python -I worker.py SUBMISSION.py JOB_DIR RUNTIME_ROOT

JOB_DIR holds ``job.json`` (the tasks) and ``inputs.pt`` (their tensors,
written by the grader). The worker writes ``outputs.pt`` (tensors only) and
``outputs.json`` (per task: "ok" or the error, traffic statistics, the host-side
torch ops and which tensors they read). The grader loads both without pickle
(``torch.load(weights_only=True)``) and does every comparison itself.

A task is a dict:
  op       "forward" | "backward" | "autograd" | "speed"
  tensors  {"x": input name, "g": ..., "dy": ..., "r": ...}
  eps      (optional) passed to the submission
  view     (optional) {"x": [start, stop, step], "dy": [...]}: a slice of the last
           dimension, so the submission gets a non-contiguous view
  device   (optional) "cuda" to move the inputs to the GPU

On the simulator every phase also logs the host-side torch ops, and each output
says whether the submission's kernels made it (``kernel_made``): stored by a kernel, or
only moved, converted or summed on the host from a buffer a kernel stored (the lecture's
``dg_partial.sum(0)``); ``kernel_stored`` says how much of it the kernels stored.

The worker prints ``READY`` once its own setup is done (torch, the inputs, the
simulator), before the submission is loaded: a worker that stops before that
line failed for the grader's reasons, never the student's.

This file runs with the submission in one process, so it imports nothing from
the grader and keeps what it needs for timing before the submission is loaded.
"""
import contextlib
import hashlib
import hmac
import json
import os
import sys
import traceback
from pathlib import Path

ERROR_CAP = 4000
HOST_OP_CAP = 64            # host ops reported per phase
READY = "rmsnorm-worker: ready"
RUNNING = "rmsnorm-worker: now "          # + what runs now: the grader names it if the job times out
DTYPE_NAMES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
# Host ops that carry a kernel's result without computing anything new: a copy, a dtype
# conversion, a view, or the sum of a partial buffer (the lecture's dg_partial.sum(0)).
TRANSPORT_OPS = frozenset({"_to_copy", "copy_", "clone", "contiguous", "sum", "view", "_unsafe_view", "reshape",
                           "expand", "squeeze", "unsqueeze", "t", "transpose", "permute", "as_strided", "slice",
                           "select", "alias", "detach"})
_CUDA = {}                  # CUDA timing functions, captured before the submission is imported
# The GPU-timed steps run on inputs the submission has never seen before (seed + offset), made with
# functions kept before it was imported: it cannot hand back outputs it computed earlier.
GRAPH_SEED, PROFILE_SEED, DECOY_SEED = 2, 3, 1


def _setup(root: Path, backend: str):
    """The grader's own part of the job: the simulator on sys.path (it lives beside the worker)."""
    sys.path.insert(0, str(root))
    if backend == "mini_triton":
        os.environ["MINI_TRITON"] = "1"
        os.environ["MINI_TRITON_RACES"] = "record"   # a race is noted for item 8, and the outputs still come back
        return __import__("mini_triton")
    os.environ.pop("MINI_TRITON", None)
    return None


def _load_submission(path: Path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("rmsnorm", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def apply_view(t, spec):
    """``t[..., start:stop:step]``: how the grader hands out non-contiguous inputs."""
    return t[..., slice(*spec)] if spec else t


def _running(what: str, x=None):
    """Say what the submission is about to run, so that a time-out can name it."""
    if x is not None:
        dtype = str(x.dtype).removeprefix("torch.")
        what += f" on x of shape {tuple(x.shape)} {DTYPE_NAMES.get(dtype, dtype)}"
        what += "" if x.is_contiguous() else f" (a strided view, strides {tuple(x.stride())})"
    print(f"{RUNNING}running {what}", flush=True)


def _storage(t):
    return t.untyped_storage().data_ptr() if t is not None else None


class Phase:
    """Record one phase (forward or backward) on the simulator: its launches and host ops, and on any
    backend the calls of torch's own norms (``watch_norms``)."""
    current = None

    def __init__(self, triton):
        self.triton, self.rec, self.norms = triton, None, []

    def __enter__(self):
        # torch.empty memory holds NaN here, as it holds old data on a GPU: a read before a write shows
        self._cm = self.triton.record(host_ops=True, poison=True) if self.triton else contextlib.nullcontext()
        self.rec = self._cm.__enter__()
        Phase.current = self
        return self

    def __exit__(self, *exc):
        Phase.current = None
        return self._cm.__exit__(*exc)

    def stored(self, t):
        """A bool tensor like ``t``: which of its elements this phase's kernels wrote (None off the simulator)."""
        if self.rec is None:
            return None
        from torch.utils._python_dispatch import _disable_current_modes
        with _disable_current_modes():                 # the grader's own ops are not the submission's host ops
            return self.rec.stored_mask(t).clone()

    def summary(self, roles):
        """Launch statistics and host reads, each buffer tagged with its role (x, y, dy...) if it has one."""
        if self.rec is None:
            return {"norms": self.norms} if self.norms else {}
        by_storage = {v: k for k, v in roles.items() if v}
        all_roles = {}
        for k, v in roles.items():                     # dx written into dy's memory: both roles, one storage
            if v:
                all_roles.setdefault(v, []).append(k)
        launches = [{"kernel": L.kernel, "programs": L.programs, "order_dependent": L.order_dependent,
                     "race": L.race, "undefined_lanes": L.undefined_lanes, "args": {
            k: {"loaded": a.loaded, "stored": a.stored, "atomics": a.atomics, "numel": a.numel, "dtype": a.dtype,
                "role": by_storage.get(a.storage), "roles": all_roles.get(a.storage, []), "distinct": a.distinct(),
                "storage": a.storage}
            for k, a in L.args.items()}} for L in self.rec.launches]
        out = {"launches": launches, "norms": self.norms}
        if self.rec.host_ops is not None:
            reads = [o for o in self.rec.host_ops if o.reads > 0]
            out["host_ops"] = [{"op": o.name, "reads": o.reads, "output_numel": o.output_numel,
                                "dtype": o.out_dtype, "where": getattr(o, "where", ""),
                                "roles": sorted({by_storage[s] for s in o.storages if s in by_storage})}
                               for o in reads[:HOST_OP_CAP]]
        return out

    def kernel_made(self, t) -> tuple:
        """(did this phase's kernels make tensor ``t``, how many elements of its storage they stored);
        (None, None) when not on the simulator.

        Made means: kernels stored at least as many elements of its storage as ``t`` has, or a
        host op that only carries data (TRANSPORT_OPS) produced it from such a buffer.
        """
        if self.rec is None:
            return None, None
        covered = {}                                 # storage -> elements kernels stored into it
        for L in self.rec.launches:
            for a in L.args.values():
                if a.stored:
                    covered[a.storage] = covered.get(a.storage, 0) + a.distinct("store")
        derived = set()
        for op in self.rec.host_ops or ():
            sources = op.storages[1:] if op.name == "copy_" else op.storages
            if op.name in TRANSPORT_OPS and any(s in derived or covered.get(s, 0) >= op.max_input_numel
                                                for s in sources):
                derived |= set(op.out_storages)
        storage = _storage(t)
        stored = covered.get(storage, 0)
        return storage in derived or stored >= t.numel(), stored

    def host_made(self, t) -> bool:
        """Did a host-side torch op that reads data write ``t``'s memory? (Allocations, torch.zeros included,
        read none.) If neither a kernel nor the host wrote it, it holds whatever its allocation held."""
        if self.rec is None:
            return False
        storage = _storage(t)
        return any(storage in op.out_storages and op.reads for op in self.rec.host_ops or ())


NORMS = ("rms_norm", "layer_norm", "group_norm", "batch_norm", "instance_norm", "normalize")


_WATCHED = {}              # "file": the submission whose lines the norm calls are told by


def watch_norms(submission: Path):
    """Log every call of torch's own norms made during a phase, with the submission's line that made it.

    Done before the submission is imported, so that names it imports are the logging ones. A norm
    torch runs does the work a kernel should: the grader names the call instead of refusing the file."""
    import torch
    import torch.nn.functional as F
    _WATCHED["file"] = submission

    def wrap(owner, name):
        fn = getattr(owner, name, None)
        if fn is None or getattr(fn, "_rmsnorm_watched", False):
            return

        def logged(*args, **kwargs):
            if Phase.current is not None:
                Phase.current.norms.append({"name": f"{owner.__name__}.{name}", "where": _line_of(_WATCHED["file"])})
            return fn(*args, **kwargs)
        logged._rmsnorm_watched = True
        logged.__name__, logged.__doc__ = fn.__name__, fn.__doc__
        setattr(owner, name, logged)
    for name in NORMS:
        wrap(F, name)
        wrap(torch, name)


def _line_of(submission: Path) -> str:
    """'rmsnorm.py line 12 (`y = F.rms_norm(...)`)': the innermost line of the submission running now."""
    for frame in reversed(traceback.extract_stack()):
        if frame.filename == str(submission):
            return f"rmsnorm.py line {frame.lineno}" + (f" (`{frame.line.strip()[:80]}`)" if frame.line else "")
    return ""


def _saved_r(y, rows):
    """What the autograd Function saved for its backward: the fp32 tensor of one value per row (its r), or
    None, and the shapes and dtypes of all it saved (what the backward will use)."""
    import torch
    try:
        saved = tuple(y.grad_fn.saved_tensors)
    except Exception:                                # noqa: BLE001 -- not a custom Function, or nothing saved
        return None, None
    kinds = [[list(t.shape), str(t.dtype).removeprefix("torch.")] for t in saved if isinstance(t, torch.Tensor)]
    r = next((t for t in saved if isinstance(t, torch.Tensor) and t.numel() == rows and t.dim() <= 1
              and t.dtype == torch.float32), None)
    return r, kinds


def run_task(mod, task, inputs, triton, progress=None):
    """Run one task; returns (tensors, info). ``progress`` gets what an autograd task made before its
    backward ran (y, and what the forward saved), kept if the backward then fails."""
    import torch
    if task["op"] == "speed":
        _running(f"the GPU timing of rmsnorm at {tuple(task['shape'])} {DTYPE_NAMES[task['dtype']]}")
        return run_speed(mod, task)
    device = task.get("device", "cpu")
    t = {k: inputs[v].to(device, copy=True) for k, v in task.get("tensors", {}).items()}   # fresh per task
    for k, spec in task.get("view", {}).items():
        t[k] = apply_view(t[k], spec)
    kw = {"eps": task["eps"]} if "eps" in task else {}
    op, info = task["op"], {}
    roles = {k: _storage(v) for k, v in t.items()}
    stored = {}                                       # output -> which elements its phase's kernels wrote
    if op == "forward":
        _running("rmsnorm_forward", t["x"])
        with Phase(triton) as fwd:
            y, r = mod.rmsnorm_forward(t["x"], t["g"], **kw)
        out = {"y": y, "r": r}
        phases = {"fwd": fwd}
    elif op == "backward":
        _running("rmsnorm_backward", t["x"])
        dy_before = t["dy"].clone()
        with Phase(triton) as bwd:
            dx, dg = mod.rmsnorm_backward(t["dy"], t["x"], t["g"], t["r"])
        out = {"dx": dx, "dg": dg}
        info["dy_modified"] = not torch.equal(dy_before, t["dy"])
        phases = {"bwd": bwd}
    elif op == "autograd":
        dy_before = t["dy"].clone()
        x = t["x"].detach().requires_grad_(True)
        g = t["g"].detach().requires_grad_(True)
        rows = t["x"].numel() // max(1, t["x"].shape[-1])
        r_saved = None

        def returned(name):
            """dx or dg as the backward returned it (autograd may copy it into x.grad): its storage, and
            which of its elements the backward's kernels wrote, noted while it is fresh."""
            def hook(grad):
                roles[name] = _storage(grad)
                if name == "dx" and isinstance(grad, torch.Tensor) and Phase.current is not None and \
                        Phase.current.kernel_made(grad)[0] is False:
                    stored["dx"] = Phase.current.stored(grad)
            return hook
        x.register_hook(returned("dx"))
        g.register_hook(returned("dg"))
        _running("rmsnorm (the forward through TritonRMSNorm)", t["x"])
        with Phase(triton) as fwd:
            y = mod.rmsnorm(x, g, **kw)
        if isinstance(y, torch.Tensor):
            roles["y"] = _storage(y)
            r_saved, info["saved"] = _saved_r(y, rows)
            if r_saved is not None:
                stored["r_saved"] = fwd.stored(r_saved)
                r_saved = r_saved.detach().clone()       # before the backward can change it
            info["saved_r"] = r_saved is not None
            if progress is not None:
                progress.update(info={"failed_in": "bwd", "saved": info["saved"], "saved_r": info["saved_r"]},
                                tensors={"y": y.detach().as_subclass(torch.Tensor).cpu().clone(),
                                         # as for any output: said only of one the kernels did not make whole
                                         "y.stored": fwd.stored(y) if fwd.kernel_made(y)[0] is False else None})
        _running("y.backward() (the backward through TritonRMSNorm)", t["x"])
        with Phase(triton) as bwd:
            y.backward(t["dy"])
        out = {"y": y.detach() if isinstance(y, torch.Tensor) else y, "dx": x.grad, "dg": g.grad}
        if r_saved is not None:
            out["r_saved"] = r_saved
        info["dy_modified"] = not torch.equal(dy_before, t["dy"])
        phases = {"fwd": fwd, "bwd": bwd}
    else:
        raise ValueError(f"unknown task {op!r}")
    for k in ("y", "r", "dx", "dg"):
        if isinstance(out.get(k), torch.Tensor):
            roles.setdefault(k, _storage(out[k]))
    info.update({name: p.summary(roles) for name, p in phases.items()})
    info["kernel_made"], info["kernel_stored"], info["host_made"] = {}, {}, {}
    for k, v in out.items():
        if isinstance(v, torch.Tensor) and MADE_IN.get(k) in phases:
            info["kernel_made"][k], info["kernel_stored"][k] = phases[MADE_IN[k]].kernel_made(v)
            info["host_made"][k] = phases[MADE_IN[k]].host_made(v)
            # which elements no kernel stored: said only of an output the kernels did not make whole (one the
            # host converted from a buffer they stored, say, was made all the same)
            if (k in ("y", "r") or (k == "dx" and op == "backward")) and info["kernel_made"][k] is False:
                stored[k] = phases[MADE_IN[k]].stored(v)
    tensors, info = _plain(out, info)
    for k, mask in stored.items():
        if mask is not None and k in tensors and mask.numel() == tensors[k].numel():  # (r_saved's too)
            tensors[f"{k}.stored"] = mask.reshape(tensors[k].shape).contiguous()
    return tensors, info


MADE_IN = {"y": "fwd", "r": "fwd", "dx": "bwd", "dg": "bwd"}     # the phase whose kernels make each output


def _undefined_lanes(info) -> bool:
    """Did a kernel of this task load masked-off lanes without other= (NaN in the simulator)?"""
    return any(L.get("undefined_lanes") for p in ("fwd", "bwd") for L in info.get(p, {}).get("launches", []))


def _with_zero_lanes(mod, task, inputs, triton) -> dict:
    """The task's outputs once more, with masked-off lanes loaded as 0.0 instead of NaN: the grader then
    sees whether those loads were the only thing wrong ({} if this run fails)."""
    memory = sys.modules["mini_triton.memory"]
    memory.UNDEFINED_FLOAT = 0.0
    try:
        return run_task(mod, task, inputs, triton)[0]
    except Exception:                                 # noqa: BLE001 -- the first run's outputs stand
        return {}
    finally:
        memory.UNDEFINED_FLOAT = float("nan")


def _plain(out, info):
    """Only plain, contiguous CPU tensors leave this process; anything else is named."""
    import torch
    tensors = {}
    for k, v in out.items():
        if isinstance(v, torch.Tensor):
            tensors[k] = v.detach().as_subclass(torch.Tensor).cpu().clone().contiguous()
            info.setdefault("dtypes", {})[k] = str(v.dtype).removeprefix("torch.")
        else:
            info.setdefault("not_tensors", {})[k] = type(v).__name__
    return tensors, info


# --- GPU timing ------------------------------------------------------------------------------------------

def capture_cuda():
    """Keep the timing and graph functions before the submission can touch them."""
    import torch
    _CUDA.update(event=torch.cuda.Event, record=torch.cuda.Event.record, elapsed=torch.cuda.Event.elapsed_time,
                 sync=torch.cuda.synchronize, empty=torch.empty, graph_class=torch.cuda.CUDAGraph,
                 graph=torch.cuda.graph, replay=torch.cuda.CUDAGraph.replay, stream_class=torch.cuda.Stream,
                 current_stream=torch.cuda.current_stream, use_stream=torch.cuda.stream,
                 wait_stream=torch.cuda.Stream.wait_stream, no_grad=torch.no_grad,
                 profile=torch.profiler.profile, cuda_activity=torch.profiler.ProfilerActivity.CUDA,
                 generator=torch.Generator, manual_seed=torch.Generator.manual_seed, randn=torch.randn,
                 rand=torch.rand, copy=torch._C.TensorBase.copy_, add_=torch._C.TensorBase.add_,
                 zero_=torch._C.TensorBase.zero_, tensor_class=torch.Tensor, index_select=torch.index_select,
                 detach=torch._C.TensorBase.detach, clone=torch._C.TensorBase.clone,
                 as_subclass=torch._C.TensorBase.as_subclass)


def _cuda() -> dict:
    """The kept functions (kept now if the grader's own process asks first)."""
    if not _CUDA:
        capture_cuda()
    return _CUDA


L2_FLUSH_BYTES = 256 * 1024 * 1024      # more than any GPU's L2 cache: zeroing it evicts the inputs


def _l2_flush_buffer():
    import torch
    return _cuda()["empty"](L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")


class NotCapturable(Exception):
    """The step could not be captured in a CUDA graph (a host synchronisation in it, say)."""


def captured(step, warmup=3):
    """(replay, outputs): ``step`` captured in a CUDA graph, after ``warmup`` calls on a side stream.

    ``replay()`` runs the captured kernels again, on the same buffers: the kernels' own GPU time,
    without the host's Python, autograd and launch work. Capturing runs the submission's code once
    more; what its kernels compute on replay is checked afterwards (run_graph).
    """
    c = _cuda()
    side, main = c["stream_class"](), c["current_stream"]()
    c["wait_stream"](side, main)
    try:
        with c["use_stream"](side):
            for _ in range(warmup):
                step()
        c["wait_stream"](main, side)
        graph = c["graph_class"]()
        with c["graph"](graph):
            out = step()
    except Exception as e:                           # noqa: BLE001 -- whatever stops the capture is reported
        c["sync"]()
        raise NotCapturable(capture_failure(e)) from None
    return (lambda: c["replay"](graph)), out


def capture_failure(e: BaseException) -> str:
    """What stopped a capture, for the student: the first error (a failed capture raises again when
    it ends, with the first one as its context) and the line of the submission that raised it."""
    while e.__context__ is not None and e.__context__ is not e:
        e = e.__context__
    first = (str(e).strip().splitlines() or [""])[0][:200]
    libraries = tuple(str(Path(m.__file__).parent) for m in (sys.modules.get("torch"), sys.modules.get("triton"))
                      if m is not None and getattr(m, "__file__", None)) + (str(Path(__file__).parent),)
    where = None
    for frame in traceback.extract_tb(e.__traceback__):
        if not frame.filename.startswith(libraries) and not frame.filename.startswith("<"):
            where = f"{Path(frame.filename).name} line {frame.lineno}: {(frame.line or '').strip()[:100]}"
    return f"{type(e).__name__}: {first}" + (f", raised at {where}" if where else "")


def run_graph(step, static_inputs, fresh, names):
    """(milliseconds per replay, outputs): ``step`` captured while ``static_inputs`` hold decoy values,
    then replayed after ``fresh(static_inputs)`` has filled them with inputs never seen before.

    A submission that does less work while it is captured, or whose captured kernels copy outputs
    it computed before, is caught: only kernels that really run on the replayed inputs give outputs
    that match the reference of those inputs (which the grader checks).
    """
    replay, out = captured(step)
    with _CUDA["no_grad"]():
        fresh(static_inputs)
    ms = time_cuda(replay)
    out = out if isinstance(out, (tuple, list)) else (out,)
    if len(out) < len(names):
        raise NotCapturable(f"the captured step returned {len(out)} values, not {len(names)}")
    return ms, dict(zip(names, out))


def kernel_times(step, prepare=None):
    """(outputs, [[name, ms], ...] slowest first): what one call of ``step`` ran on the GPU.

    The profiler records every kernel, copy and fill the step puts on the GPU with the GPU's own
    start and end times, so their sum is the step's GPU time without a CUDA graph: the fallback
    for a step that cannot be captured, and the per-kernel breakdown of the feedback.
    ``prepare()`` runs first (it fills the inputs with values the step has never seen), then the
    L2 cache is flushed, as time_cuda does before each timed call.
    """
    c = _cuda()
    step()                                            # the first call at a shape may compile or allocate
    if prepare:
        with c["no_grad"]():
            prepare()
    c["zero_"](_l2_flush_buffer())
    c["sync"]()
    with c["profile"](activities=[c["cuda_activity"]]) as prof:
        out = step()
        c["sync"]()
    per = {}
    for e in prof.events():
        if str(e.device_type).rsplit(".", 1)[-1] == "CUDA":
            per[e.name] = per.get(e.name, 0.0) + e.time_range.elapsed_us() / 1e3
    return out, sorted(([k, v] for k, v in per.items()), key=lambda kv: -kv[1])


def time_cuda(fn, warmup_ms=100.0, rep_ms=200.0, min_reps=25, rounds=3):
    """Milliseconds of ``fn`` on the GPU: the best of ``rounds`` medians, each measured as
    triton.testing.do_bench does.

    A time-based warm-up first (clocks ramp up, caches and allocators settle: a fixed
    handful of calls left one grading in ten 2x slow), then at least ``min_reps``
    timed calls per round, the L2 cache flushed before each. Taking the best round
    keeps a transient slowdown of the machine from deciding a verdict.
    """
    return min(_median_cuda(fn, warmup_ms if i == 0 else 0.0, rep_ms, min_reps) for i in range(rounds))


def _median_cuda(fn, warmup_ms, rep_ms, min_reps):
    c = _cuda()
    event, record, elapsed, sync = c["event"], c["record"], c["elapsed"], c["sync"]
    flush = _l2_flush_buffer()
    fn()
    sync()
    start, end = event(enable_timing=True), event(enable_timing=True)
    record(start)
    for _ in range(5):
        fn()
    record(end)
    sync()
    estimate = max(elapsed(start, end) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate))):
        fn()
    times = []
    for _ in range(max(min_reps, int(rep_ms / estimate))):
        flush.zero_()
        start, end = event(enable_timing=True), event(enable_timing=True)
        record(start)
        fn()
        record(end)
        sync()
        times.append(elapsed(start, end))
    times.sort()
    return times[len(times) // 2]


def speed_inputs(shape, dtype_name, seed, device="cpu", out=None):
    """The timing inputs (x, g, dy), made from a seed on ``device`` so the grader can rebuild them
    exactly; written into ``out`` (three tensors) when given. Only functions kept before the
    submission was imported are used: it cannot watch or change the inputs being made."""
    import torch
    c = _cuda()
    gen = c["generator"](device=device)
    c["manual_seed"](gen, seed)
    dtype = getattr(torch, dtype_name)
    M, N = shape
    if out is None:
        out = tuple(c["empty"](*s, dtype=dtype, device=device) for s in ((M, N), (N,), (M, N)))
    c["copy"](out[0], c["randn"](M, N, generator=gen, device=device))
    c["copy"](out[1], c["add_"](c["rand"](N, generator=gen, device=device), 0.5))
    c["copy"](out[2], c["randn"](M, N, generator=gen, device=device))
    return out


def run_speed(mod, task):
    """Correctness on sampled rows at the timing shape; the forward's and forward+backward's times:
    launched eagerly (what a user's wall clock sees), replayed from a CUDA graph (the kernels
    alone: the graded GPU time), and each kernel's time from the profiler (the graded GPU time
    when the step cannot be captured). The outputs of the graded run, on inputs the submission
    had never seen (seed + GRAPH_SEED or + PROFILE_SEED), go back to the grader, which checks them."""
    import torch
    shape, dtype, seed = task["shape"], task["dtype"], task["seed"]
    x, g, dy = speed_inputs(shape, dtype, seed, device="cuda")
    rows = torch.tensor(task["rows"], device="cuda")
    y, _ = mod.rmsnorm_forward(x, g)
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    dx, dg = torch.autograd.grad(mod.rmsnorm(xg, gg), (xg, gg), dy)
    out = {"y": y.detach()[rows], "dx": dx.detach()[rows], "dg": dg.detach()}
    del y, dx, dg
    info = {"fwd_ms": time_cuda(lambda: mod.rmsnorm_forward(x, g)[0]),
            "fwdbwd_ms": time_cuda(lambda: torch.autograd.grad(mod.rmsnorm(xg, gg), (xg, gg), dy))}
    for kind, names in (("fwd", ("y",)), ("fwdbwd", ("dx", "dg"))):
        got = _gpu_timed(mod, kind, names, task, rows, info)
        out.update({f"{k}_gpu": t for k, t in got.items()})
    return _plain(out, info)


def _gpu_timed(mod, kind, names, task, rows, info) -> dict:
    """One kind of step's GPU time into ``info``; the outputs of the graded run (or none)."""
    import torch
    shape, dtype, seed, device = task["shape"], task["dtype"], task["seed"], task.get("device", "cuda")
    xs, gs, dys = statics = speed_inputs(shape, dtype, seed + DECOY_SEED, device=device)
    if kind == "fwd":
        def step():
            return mod.rmsnorm_forward(xs, gs)[0]
    else:
        xs.requires_grad_(True)
        gs.requires_grad_(True)

        def step():
            return torch.autograd.grad(mod.rmsnorm(xs, gs), (xs, gs), dys)
    got = None
    try:
        info[f"{kind}_graph_ms"], got = run_graph(
            step, statics, lambda s: speed_inputs(shape, dtype, seed + GRAPH_SEED, device, out=s), names)
        got = {k: _timed_output(t, k, rows) for k, t in got.items()}
    except NotCapturable as e:
        info[f"{kind}_graph_error"] = str(e)
    try:
        last, info[f"{kind}_kernels"] = kernel_times(
            step, lambda: speed_inputs(shape, dtype, seed + PROFILE_SEED, device, out=statics))
    except Exception as e:                           # noqa: BLE001 -- the graph's time still stands
        info[f"{kind}_profile_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        return got or {}
    if got is None:                                  # no graph: the profiled step is the graded one
        last = last if isinstance(last, (tuple, list)) else (last,)
        got = {k: _timed_output(t, k, rows) for k, t in zip(names, last)}
        info[f"{kind}_profiled_ms"] = sum(ms for _, ms in info[f"{kind}_kernels"])
    return got


def _timed_output(t, name, rows):
    """A timed step's output as a plain tensor, before anything of the submission's runs again."""
    c = _CUDA
    if not isinstance(t, c["tensor_class"]):
        return t                                     # _plain names what it is
    t = c["as_subclass"](c["detach"](t), c["tensor_class"])
    return c["clone"](t) if name == "dg" else c["index_select"](t, 0, rows)


def signature(key: bytes, outputs_json: bytes, outputs_pt: bytes) -> str:
    """What the worker writes to outputs.sig, and the grader recomputes: an HMAC of both output files."""
    return hmac.new(key, hashlib.sha256(outputs_json).digest() + hashlib.sha256(outputs_pt).digest(),
                    hashlib.sha256).hexdigest()


def _signer():
    """Read the grader's key from stdin, before the submission exists, and keep it only in a closure.

    The outputs are signed with it, so files a submission writes in their place
    (from an atexit hook, a thread, a forked process) fail the grader's check.
    """
    key = sys.stdin.buffer.read(32)
    sys.stdin.close()
    try:
        os.close(0)
    except OSError:
        pass
    return lambda outputs_json, outputs_pt: signature(key, outputs_json, outputs_pt)


def _write_outputs(job_dir, results, tensors, sign):
    import io
    import torch
    buf = io.BytesIO()
    torch.save(tensors, buf)
    pt = buf.getvalue()
    js = json.dumps(results).encode()
    (job_dir / "outputs.pt").write_bytes(pt)
    (job_dir / "outputs.json").write_bytes(js)
    (job_dir / "outputs.sig").write_text(sign(js, pt))


def main(argv):
    sign = _signer()
    submission, job_dir = Path(argv[0]), Path(argv[1])
    root = Path(argv[2]) if len(argv) > 2 else Path(__file__).resolve().parent.parent
    job = json.loads((job_dir / "job.json").read_text())
    backend = job.get("backend", "mini_triton")
    # The grader's own setup: a failure here is never the submission's (it is not loaded yet).
    import torch
    inputs = torch.load(job_dir / "inputs.pt", weights_only=True)
    if backend != "mini_triton" and torch.cuda.is_available():
        capture_cuda()
    triton = _setup(root, backend)
    watch_norms(submission)
    results = {"_worker": {"torch": torch.__version__, "cuda": torch.version.cuda, "python": sys.version.split()[0]}}
    (job_dir / "outputs.json").write_bytes(b"")          # the job folder is writable
    (job_dir / "outputs.json").unlink()
    print(READY, flush=True)
    tensors = {}
    print(f"{RUNNING}importing rmsnorm.py", flush=True)
    try:
        mod = _load_submission(submission)
    except BaseException as e:                     # noqa: BLE001 -- report, never crash silently
        results["_import"] = {"error": _describe(e)}
        _write_outputs(job_dir, results, {}, sign)
        return 0
    done, tensors = run_tasks(mod, job["tasks"], inputs, triton)
    _write_outputs(job_dir, {**results, **done}, tensors, sign)
    return 0


def run_tasks(mod, tasks, inputs, triton) -> tuple:
    """(results, tensors) of every task: per task "ok" and its statistics, or its error and what it made
    before the error; tensors named "task.output"."""
    results, tensors = {}, {}
    for name, task in tasks.items():
        progress = {}
        try:
            out, info = run_task(mod, task, inputs, triton, progress)
            tensors.update({f"{name}.{k}": v for k, v in out.items()})
            results[name] = {"ok": True, **info}
            if triton is not None and _undefined_lanes(info):
                tensors.update({f"{name}.{k}.if_zero": v for k, v in _with_zero_lanes(mod, task, inputs, triton)
                                .items() if "." not in k})
        except BaseException as e:                 # noqa: BLE001
            results[name] = {"error": _describe(e), **progress.get("info", {})}
            tensors.update({f"{name}.{k}": v.contiguous() for k, v in progress.get("tensors", {}).items()
                            if v is not None})
    return results, tensors


def _describe(e: BaseException) -> str:
    """The error in a student's terms: its type and message, and where in rmsnorm.py."""
    where = ""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if frame.filename.endswith("rmsnorm.py"):
            where = f" (rmsnorm.py line {frame.lineno})"
            break
    hint = _hint(e)
    return f"{type(e).__name__}: {e}"[:ERROR_CAP - len(where) - len(hint)] + where + hint


def _hint(e: BaseException) -> str:
    """What to do about errors whose cause is the grader's sandbox rather than the math."""
    if isinstance(e, SystemExit):
        return ": rmsnorm.py must not end the process (exit(), sys.exit()); return the outputs instead"
    if isinstance(e, MemoryError) or "can't allocate memory" in str(e):
        try:
            import resource
            cap = resource.getrlimit(resource.RLIMIT_AS)[0]
        except (ImportError, OSError, ValueError):
            cap = -1
        size = f" at {cap / 2 ** 30:.0f} GiB" if cap > 0 else ""
        return (f": the grader caps a job's memory{size}; allocate only the outputs (y, r, dx, dg) and a small "
                f"partial-dg buffer, never a copy of the input per row or program")
    return ""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
