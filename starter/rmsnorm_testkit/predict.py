"""Item 10 without a GPU: each step's share of a copy's bandwidth on the course GPU, predicted from the simulator.

Item 10 times the forward and the forward+backward at ``timing.SPEED_SHAPE`` (16384 x 4096), fp32 and bf16, on an
H200, and compares each step's bandwidth (its least bytes over its time) with a copy's. Simulating 16384 rows would
take gigabytes, so the prediction is made of two runs of each step, as item 10 calls it:

1. **the plan**: the step at item 10's shape on tensors of torch's meta device (a shape, no data), with its
   kernels noted and not run (``triton.plan()``): the grid each launch gets, the bytes each of its tensors spans,
   and the host's torch ops with their bytes;
2. **the traffic**: the step at ``ROWS`` rows (the same N) on the simulator (``triton.record``): what each launch
   reads, writes, re-reads, waits for and updates atomically.

Each launch's traffic is then taken to item 10's shape, argument by argument in proportion to the bytes it spans
there (x and dy grow with the rows, a partial buffer with the programs, g not at all), and the performance model
(mini_triton/perf.py) turns it into time.

Both runs take the GPU's path: while they run, the file's wrappers see the course GPU (gpu_view.py: CUDA
available, the tensors on cuda:0, the H200's 132 SMs), so a grid, block size or warp count the file picks by
device is the one it picks on the GPU, while its kernels still run on the simulator. The plan runs once more
without that view, to say which launches the device chose (``GpuPath``). A share above a copy's bandwidth
(``PLAUSIBLE``) is no prediction: the model missed part of the step's work, and it is reported as implausible.

    predict.item_10(impl, "fp32")   -> Item10: shares {"fwd": %, "fwdbwd": %}, each step's Prediction, notes, path

`make bench` on the CPU and the grader's note on item 10 print it. It is a prediction, not a grade: where the
model can be wrong is said in mini_triton/perf.py and in the handout ("Part (e)").
"""
from __future__ import annotations

import contextlib
import dataclasses

import torch

from .compare import DTYPES as ALL_DTYPES
from .gpu_view import course_gpu
from .text import ERROR_LINE_CHARS
from .timing import SPEED_SHAPE, STEPS, TIMED_DTYPES, copy_bytes, least_bytes, speed_inputs

ROWS = 512                      # the rows the traffic is simulated at
COURSE_GPU = "H200"             # the GPU item 10 is measured on (a name of mini_triton.perf.GPUS)
DTYPES = {name: ALL_DTYPES[name] for name in TIMED_DTYPES}      # "fp32" -> torch.float32, the dtypes item 10 times
PLAUSIBLE = 100.0               # % of copy: no step moves its least bytes faster than a copy moves them
# How much of the course GPU the file's wrappers see (as_gpu), the first tried first: "tensors", its tensors on
# cuda:0 and torch.cuda's answers; "cuda", torch.cuda's and is_cuda only, the tensors on their own device (for a
# file that refuses cuda:0 tensors, having chosen the simulator's device at import); None, the CPU's own path.
LEVELS = ("tensors", "cuda", None)
# What a file may ask of the device, as gpu_view.View.asked names it (the note says which it asked)
ASKED = frozenset({"torch.cuda.get_device_properties", "torch.cuda.get_device_capability",
                   "torch.cuda.get_device_name", "torch.cuda.is_available", "torch.cuda.device_count",
                   "torch.cuda.current_device", "x.is_cuda", "x.is_cpu", "x.get_device()"})


@dataclasses.dataclass
class GpuPath:
    """The path a file's wrappers took at item 10's shape with the course GPU in view: how much of it they saw
    (``level``, one of LEVELS), what they asked of the device, and each launch that differs from the one they make
    off the GPU."""
    gpu: str
    sms: int
    asked: list                 # of ASKED, sorted
    changed: list               # [[kernel, programs on the GPU, off it, num_warps on the GPU, off it]]
    compared: bool = True       # False: off the GPU a step did not plan, so not every launch could be compared
    level: str | None = "tensors"
    refused: str | None = None  # why the file refused the fuller view (the first line of its error)

    def line(self) -> str:
        """The note's sentence: "the wrappers saw an H200 (132 SMs) and launched as on it: ..."."""
        if self.level is None:
            why = f" ({self.refused})" if self.refused else ""
            return (f"your wrappers ran only without the {self.gpu} in view{why}, so the prediction follows the "
                    f"launches they make off the GPU")
        seen = f"the wrappers saw an {self.gpu} ({self.sms} SMs)"
        if self.level != LEVELS[0]:
            seen += (" through torch.cuda and x.is_cuda, x.device staying the CPU's (your file refused cuda:0 tensors"
                     + (f": {self.refused}" if self.refused else "") + ")")
        if self.changed:
            def launch(k, p, cp, w, cw):
                warps = (f" of {w} warps", f" of {cw} warps") if w != cw else ("", "")
                return f"{k} with {p} programs{warps[0]} ({cp}{warps[1]} off the GPU)"
            return f"{seen} and launched as on it: " + "; ".join(launch(*c) for c in self.changed[:2])
        if self.asked:
            same = " and launch the same off the GPU" if self.compared else ""
            return f"{seen}; they asked {', '.join(self.asked)}{same}"
        return "your file chose its launches without asking the device"

    def short(self) -> str:
        """The leaderboard's words for it."""
        if self.level is None:
            return "CPU path only (the GPU's view refused)"
        if self.changed:
            k, p, cp, _, _ = self.changed[0]
            return f"{self.gpu} path: {k[:40]} {p} programs ({cp} off the GPU)"
        if self.asked:
            return f"asked the device ({self.gpu}, {self.sms} SMs): same launches off it"
        return "launches chosen without asking the device"


@dataclasses.dataclass
class Item10:
    """The prediction of item 10's two steps in one dtype, on one GPU."""
    gpu: str
    dtype: str
    shares: dict                # {"fwd": % of copy, "fwdbwd": % of copy}; None where the step did not run
    steps: dict                 # {"fwd": perf.Prediction, ...}
    notes: list                 # what may make it wrong, in a student's words
    copies: dict = dataclasses.field(default_factory=dict)    # {step: bytes from memory, in copies of x}
    implausible: dict = dataclasses.field(default_factory=dict)   # {step: % of copy above PLAUSIBLE}: no prediction
    path: GpuPath | None = None     # which path the wrappers took with the course GPU in view

    def line(self) -> str:
        """"forward fp32 ≈ 97% of copy, forward+backward ≈ 94%"; a step above a copy: "implausible"."""
        def said(k):
            return "implausible (above a copy)" if k in self.implausible else f"≈ {_pct(self.shares.get(k))}"
        return ", ".join(f"{STEPS[k][0]} {self.dtype} {said(k)}" + (" of copy" if k not in self.implausible else "")
                         if i == 0 else f"{STEPS[k][0]} {said(k)}" for i, k in enumerate(STEPS))


def perf_model():
    """mini_triton's performance model, imported when first needed (the simulator's folder is then on the path:
    load_impl puts it there)."""
    from mini_triton import perf
    return perf


def _pct(share) -> str:
    return "n/a" if share is None else f"{share:.0f}%"


def _steps(impl, x, g, dy, clone=True):
    """Item 10's two steps on (x, g, dy): the forward (``rmsnorm_forward``), and ``rmsnorm`` with its backward
    through autograd (on copies of x and g that require grad, or on x and g themselves: ``clone=False``)."""
    xg, gg = (x.clone(), g.clone()) if clone else (x, g)
    xg.requires_grad_(True)
    gg.requires_grad_(True)
    return {"fwd": lambda: impl.rmsnorm_forward(x.detach(), g.detach()),
            "fwdbwd": lambda: torch.autograd.grad(impl.rmsnorm(xg, gg), (xg, gg), dy)}


def as_gpu(gpu: str | None, device="cpu", level: str | None = "tensors", trusted=()):
    """The course GPU ``gpu`` (a name of perf.GPUS) in the file's view at ``level`` (LEVELS: "tensors", the
    tensors on cuda:0 too; "cuda", torch.cuda and is_cuda only), or, for None or a GPU the model does not know,
    no view at all (gpu_view.course_gpu)."""
    model = perf_model().GPUS.get(gpu) if isinstance(gpu, str) else None
    if model is None or level not in LEVELS or level is None:
        return contextlib.nullcontext()
    return course_gpu(model, device, trusted, tensors=level == "tensors")


def _first_line(e: Exception) -> str:
    return f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:ERROR_LINE_CHARS]


def traffic(impl, dtype: str, rows: int = ROWS, n: int = SPEED_SHAPE[1], gpu: str | None = COURSE_GPU,
            levels=LEVELS) -> dict:
    """{step: [perf.Work]} of each step at (rows, n) on the simulator, the course GPU ``gpu`` in the file's view
    at the first of ``levels`` the step runs at; a step that raises at every level is left out."""
    return _traffic(impl, dtype, rows, n, gpu, levels)[0]


def _traffic(impl, dtype, rows, n, gpu, levels) -> tuple:
    """(``traffic``, {step: the level it ran at}, why the fullest level failed: its error's first line, or None)."""
    import mini_triton as triton
    out, at, refused = {}, {}, None
    for kind, step in _steps(impl, *speed_inputs((rows, n), DTYPES[dtype], seed=0)).items():
        for level in levels:
            try:
                with triton.record(host_ops=True) as rec, as_gpu(gpu, "cpu", level):
                    step()
                out[kind], at[kind] = perf_model().works(rec), level
                break
            except Exception as e:                   # noqa: BLE001 -- the tests say why; here it is not predicted
                if level == LEVELS[0] and refused is None:
                    refused = _first_line(e)
    return out, at, refused


def weakest(levels) -> str | None:
    """The least of the course GPU any of ``levels`` (of LEVELS) showed; the fullest when there are none."""
    levels = set(levels)
    return next((lv for lv in reversed(LEVELS) if lv in levels), LEVELS[0])


def _plan(impl, dtype: str, shape, gpu: str | None, levels=LEVELS) -> tuple:
    """({step: (launches, host-op works)}, {step: the level it planned at}, what the file asked of the device,
    the first refusal of a level) of each step planned at ``shape``: at the first of ``levels`` (the course GPU
    ``gpu`` in view) at which it plans, on meta tensors, else on CPU tensors nothing touches."""
    import mini_triton as triton
    M, N = shape
    out, at, asked, refused = {}, {}, set(), None
    for level in levels:
        for device in ("meta", "cpu"):
            if all(kind in out for kind in STEPS):
                return out, at, asked, refused
            try:
                x, dy = (torch.empty(M, N, dtype=DTYPES[dtype], device=device) for _ in range(2))
                g = torch.empty(N, dtype=DTYPES[dtype], device=device)
            except (RuntimeError, MemoryError):              # no room for item 10's tensors here
                continue
            for kind, step in _steps(impl, x, g, dy, clone=False).items():
                if kind in out:
                    continue
                view = None
                try:
                    with triton.plan() as rec, as_gpu(gpu, device, level) as view:
                        step()
                    out[kind], at[kind] = (rec.launches, [w for w in map(perf_model().host_op_work, rec.host_ops)
                                                          if w is not None]), level
                except Exception as e:               # noqa: BLE001 -- the other device or level, or no plan
                    if level == LEVELS[0] and device == "meta" and refused is None:
                        refused = _first_line(e)
                finally:
                    asked |= getattr(view, "asked", set())
            del x, dy, g
    return out, at, asked, refused


def plans(impl, dtype: str, shape=SPEED_SHAPE, gpu: str | None = COURSE_GPU) -> dict:
    """{step: (the planned launches, the host ops' works)} of each step at ``shape``, the course GPU ``gpu`` in the
    file's view: on tensors of torch's meta device (no data at all), or, for code that refuses them, on CPU tensors
    whose memory nothing touches. A step whose code needs values (it reads a result back) is left out."""
    return _plan(impl, dtype, shape, gpu)[0]


def planned(impl, dtype: str, shape=SPEED_SHAPE, gpu: str = COURSE_GPU, levels=LEVELS) -> tuple:
    """(``plans``, the GpuPath): the plan with the course GPU in view (at the first of ``levels`` it plans at), and
    which of its launches the device chose (the plan again with no view, launch by launch)."""
    steps, at, asked, refused = _plan(impl, dtype, shape, gpu, levels)
    off = _plan(impl, dtype, shape, None, levels=(None,))[0]
    changed, compared = [], all(kind in off for kind in steps)
    for kind, (launches, _) in steps.items():
        for on, cpu in zip(launches, off.get(kind, ([], []))[0]):
            if (on.kernel, on.programs, on.num_warps) != (cpu.kernel, cpu.programs, cpu.num_warps) and \
                    on.kernel not in (c[0] for c in changed):
                changed.append([on.kernel, on.programs, cpu.programs, on.num_warps, cpu.num_warps])
    level = weakest(at.values()) if at else None
    model = perf_model().GPUS[gpu]
    return steps, GpuPath(model.name, model.sms, sorted(asked & ASKED), changed, compared, level,
                          refused if level != LEVELS[0] else None)


def at_shape(works: list, planned: tuple, rows: int, shape) -> tuple:
    """(works at ``shape``, a note or None): each launch's traffic at ``rows`` taken to the planned launch of the
    same kernel, and the plan's host ops; where the two runs launched different kernels, the traffic grown with
    the rows."""
    launches, host_ops = planned
    kernels = [w for w in works if w.kind == "kernel"]
    if [w.name for w in kernels] == [p.kernel for p in launches]:
        return [w.at(p) for w, p in zip(kernels, launches)] + host_ops, None
    return [w.times(shape[0] / rows) for w in works], (
        f"your code launched other kernels at {rows} rows than at {shape[0]}, so the prediction grows the {rows}-row "
        f"run with the rows")


def from_runs(works: dict, planned: dict, dtype: str, gpu: str = COURSE_GPU, rows: int = ROWS,
              shape=SPEED_SHAPE, path: GpuPath | None = None) -> Item10:
    """The prediction from a step's traffic at ``rows`` (``traffic``; in a grading, the judge's own records) and
    its plan at ``shape`` (``plans``); ``path``, which path the wrappers took (``planned``)."""
    model = perf_model().GPUS[gpu]
    t_copy = perf_model().copy_seconds(copy_bytes(shape, DTYPES[dtype]), model)
    shares, steps, notes, copies, implausible = {}, {}, [], {}, {}
    for kind in STEPS:
        if kind not in works:
            shares[kind] = None
            notes.append(f"the {STEPS[kind][0]} did not run on the simulator, so it is not predicted")
            continue
        if kind in planned:
            at, note = at_shape(works[kind], planned[kind], rows, shape)
        else:
            at, note = [w.times(shape[0] / rows) for w in works[kind]], (
                f"the {STEPS[kind][0]} could not run at item 10's shape without its data (it reads a value back, "
                f"or refuses that shape), so the prediction grows its {rows}-row run with the rows")
        if note and note not in notes:
            notes.append(note)
        steps[kind] = perf_model().predict_works(at, model)
        copies[kind] = sum(w.hbm_bytes(model) for w in at) / copy_bytes(shape, DTYPES[dtype])
        seconds = steps[kind].us * 1e-6
        shares[kind] = 100 * (least_bytes(kind, shape, DTYPES[dtype]) / seconds) / (
            copy_bytes(shape, DTYPES[dtype]) / t_copy)
        if shares[kind] > PLAUSIBLE:
            implausible[kind], shares[kind] = shares[kind], None
            notes.append(f"the model puts the {STEPS[kind][0]} at {implausible[kind]:.0f}% of copy, faster than a copy "
                         f"of its least bytes, which no step is: it missed part of the step's work, so there is no "
                         f"prediction")
        for w, (name, us) in zip(at, steps[kind].kernels):
            if w.kind == "kernel" and w.programs < model.sms and us > 0.1 * steps[kind].us and \
                    not any(name in n for n in notes):
                notes.append(f"{name} runs {w.programs:.0f} programs, fewer than the {model.name}'s {model.sms} SMs, "
                             f"so most of the GPU waits")
    return Item10(model.name, dtype, shares, steps, notes, copies, implausible, path)


def item_10(impl, dtype: str, gpu: str = COURSE_GPU, shape=SPEED_SHAPE) -> Item10:
    """Item 10's prediction for ``impl`` (an rmsnorm.py loaded on the simulator) in ``dtype`` ("fp32", "bf16"), the
    course GPU ``gpu`` in the wrappers' view."""
    works, at, refused = _traffic(impl, dtype, ROWS, shape[1], gpu, LEVELS)
    steps, path = planned(impl, dtype, shape, gpu, LEVELS[LEVELS.index(weakest(at.values())):])
    path.level = weakest(([path.level] if steps else []) + list(at.values())) if steps or at else None
    path.refused = path.refused or refused if path.level != LEVELS[0] else None
    return from_runs(works, steps, dtype, gpu, ROWS, shape, path)
