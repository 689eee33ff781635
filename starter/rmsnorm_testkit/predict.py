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

    predict.item_10(impl, "fp32")   -> Item10: shares {"fwd": %, "fwdbwd": %}, each step's Prediction, notes

`make bench` on the CPU and the grader's note on item 10 print it. It is a prediction, not a grade: where the
model can be wrong is said in mini_triton/perf.py and in the handout ("Part (e)").
"""
from __future__ import annotations

import dataclasses

import torch

from .compare import DTYPES as ALL_DTYPES
from .timing import SPEED_SHAPE, STEPS, TIMED_DTYPES, copy_bytes, least_bytes, speed_inputs

ROWS = 512                      # the rows the traffic is simulated at
DTYPES = {name: ALL_DTYPES[name] for name in TIMED_DTYPES}      # "fp32" -> torch.float32, the dtypes item 10 times


@dataclasses.dataclass
class Item10:
    """The prediction of item 10's two steps in one dtype, on one GPU."""
    gpu: str
    dtype: str
    shares: dict                # {"fwd": % of copy, "fwdbwd": % of copy}; None where the step did not run
    steps: dict                 # {"fwd": perf.Prediction, ...}
    notes: list                 # what may make it wrong, in a student's words
    copies: dict = dataclasses.field(default_factory=dict)    # {step: bytes from memory, in copies of x}

    def line(self) -> str:
        """"forward fp32 ≈ 97% of copy, forward+backward ≈ 94%"."""
        return ", ".join(f"{STEPS[k][0]} {self.dtype} ≈ {_pct(self.shares.get(k))} of copy" if i == 0 else
                         f"{STEPS[k][0]} ≈ {_pct(self.shares.get(k))}" for i, k in enumerate(STEPS))


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


def traffic(impl, dtype: str, rows: int = ROWS, n: int = SPEED_SHAPE[1]) -> dict:
    """{step: [perf.Work]} of each step at (rows, n) on the simulator; a step that raises is left out."""
    import mini_triton as triton
    out = {}
    for kind, step in _steps(impl, *speed_inputs((rows, n), DTYPES[dtype], seed=0)).items():
        try:
            with triton.record(host_ops=True) as rec:
                step()
            out[kind] = perf_model().works(rec)
        except Exception:                            # noqa: BLE001 -- the tests say why; here it is not predicted
            pass
    return out


def plans(impl, dtype: str, shape=SPEED_SHAPE) -> dict:
    """{step: (the planned launches, the host ops' works)} of each step at ``shape``: on tensors of torch's meta
    device (no data at all), or, for code that refuses them (a check of the device), on CPU tensors whose memory
    nothing touches. A step whose code needs values (it reads a result back) is left out."""
    import mini_triton as triton
    M, N = shape
    out = {}
    for device in ("meta", "cpu"):
        try:
            x, dy = (torch.empty(M, N, dtype=DTYPES[dtype], device=device) for _ in range(2))
            g = torch.empty(N, dtype=DTYPES[dtype], device=device)
        except (RuntimeError, MemoryError):                  # no room for item 10's tensors here
            break
        for kind, step in _steps(impl, x, g, dy, clone=False).items():
            if kind in out:
                continue
            try:
                with triton.plan() as rec:
                    step()
                out[kind] = (rec.launches, [w for w in map(perf_model().host_op_work, rec.host_ops) if w is not None])
            except Exception:                        # noqa: BLE001 -- the other device, or no plan
                pass
        del x, dy, g
    return out


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


def from_runs(works: dict, planned: dict, dtype: str, gpu: str = "H200", rows: int = ROWS,
              shape=SPEED_SHAPE) -> Item10:
    """The prediction from a step's traffic at ``rows`` (``traffic``; in a grading, the judge's own records) and
    its plan at ``shape`` (``plans``)."""
    model = perf_model().GPUS[gpu]
    t_copy = perf_model().copy_seconds(copy_bytes(shape, DTYPES[dtype]), model)
    shares, steps, notes, copies = {}, {}, [], {}
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
        for w, (name, us) in zip(at, steps[kind].kernels):
            if w.kind == "kernel" and w.programs < model.sms and us > 0.1 * steps[kind].us and \
                    not any(name in n for n in notes):
                notes.append(f"{name} runs {w.programs:.0f} programs, fewer than the {model.name}'s {model.sms} SMs, "
                             f"so most of the GPU waits (a grid taken from the GPU's SM count on a GPU but a "
                             f"constant on the CPU runs another size there)")
    return Item10(model.name, dtype, shares, steps, notes, copies)


def item_10(impl, dtype: str, gpu: str = "H200", shape=SPEED_SHAPE) -> Item10:
    """Item 10's prediction for ``impl`` (an rmsnorm.py loaded on the simulator) in ``dtype`` ("fp32", "bf16")."""
    return from_runs(traffic(impl, dtype, ROWS, shape[1]), plans(impl, dtype, shape), dtype, gpu, ROWS, shape)
