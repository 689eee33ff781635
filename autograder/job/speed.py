"""The speed task (rubric item 10), the job's side: the submission's steps timed on the GPU.

Correctness first, on sampled rows at the timing shape; then the forward's and forward+backward's
times three ways (rmsnorm_timing): launched eagerly (what a user's wall clock sees), replayed from a
CUDA graph (the kernels alone: the graded GPU time), and each kernel's time from the profiler (the
graded GPU time when the step cannot be captured). The GPU-timed steps run on inputs the submission
has never seen (seed + an offset), made with functions kept before it was imported: it cannot hand
back outputs it computed earlier. Their outputs go back to the grader, which checks them
(autograder/speed.py decides).
"""
import torch

from .protocol import plain
from .shared import load, text

timing = load("rmsnorm_timing")

GRAPH_SEED, PROFILE_SEED, DECOY_SEED = 2, 3, 1      # offsets from the task's seed


def run_speed(mod, task):
    """(tensors, info) of the speed task: the outputs at sampled rows, and every time measured."""
    shape, dtype, seed = task["shape"], task["dtype"], task["seed"]
    x, g, dy = timing.speed_inputs(shape, dtype, seed, device="cuda")
    rows = torch.tensor(task["rows"], device="cuda")
    y, _ = mod.rmsnorm_forward(x, g)
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    dx, dg = torch.autograd.grad(mod.rmsnorm(xg, gg), (xg, gg), dy)
    out = {"y": y.detach()[rows], "dx": dx.detach()[rows], "dg": dg.detach()}
    del y, dx, dg
    info = {"fwd_ms": timing.time_cuda(lambda: mod.rmsnorm_forward(x, g)[0]),
            "fwdbwd_ms": timing.time_cuda(lambda: torch.autograd.grad(mod.rmsnorm(xg, gg), (xg, gg), dy))}
    for kind, names in (("fwd", ("y",)), ("fwdbwd", ("dx", "dg"))):
        got = gpu_timed(mod, kind, names, task, rows, info)
        out.update({f"{k}_gpu": t for k, t in got.items()})
    return plain(out, info)


def gpu_timed(mod, kind, names, task, rows, info) -> dict:
    """One kind of step's GPU time into ``info``; the outputs of the graded run (or none)."""
    shape, dtype, seed, device = task["shape"], task["dtype"], task["seed"], task.get("device", "cuda")
    xs, gs, dys = statics = timing.speed_inputs(shape, dtype, seed + DECOY_SEED, device=device)
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
        info[f"{kind}_graph_ms"], got = timing.run_graph(
            step, statics, lambda s: timing.speed_inputs(shape, dtype, seed + GRAPH_SEED, device, out=s), names)
        got = {k: _timed_output(t, k, rows) for k, t in got.items()}
    except timing.NotCapturable as e:
        info[f"{kind}_graph_error"] = str(e)
    try:
        last, info[f"{kind}_kernels"] = timing.kernel_times(
            step, lambda: timing.speed_inputs(shape, dtype, seed + PROFILE_SEED, device, out=statics))
    except Exception as e:                           # noqa: BLE001 -- the graph's time still stands
        info[f"{kind}_profile_error"] = text.error_line(e)
        return got or {}
    if got is None:                                  # no graph: the profiled step is the graded one
        last = last if isinstance(last, (tuple, list)) else (last,)
        got = {k: _timed_output(t, k, rows) for k, t in zip(names, last)}
        info[f"{kind}_profiled_ms"] = sum(ms for _, ms in info[f"{kind}_kernels"])
    return got


def _timed_output(t, name, rows):
    """A timed step's output as a plain tensor, before anything of the submission's runs again."""
    c = timing.kept()
    if not isinstance(t, c["tensor_class"]):
        return t                                     # plain() names what it is
    t = c["as_subclass"](c["detach"](t), c["tensor_class"])
    return c["clone"](t) if name == "dg" else c["index_select"](t, 0, rows)
