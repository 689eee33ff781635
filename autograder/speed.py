"""GPU speed (rubric item 10), the trusted side's measurements: baselines and references.

The submission's steps are timed in its job by the judge's process (job/judge/timed.py), from the recipe the
submission's process recorded: each replayed by the judge, captured in its CUDA graph and replayed on inputs made
from seeds the judge drew, none of which the submission's process ever holds. The grader times PyTorch eager and a
plain device copy itself, in its own process, with the same functions (here), makes the replayed inputs again from
their seeds and their float64 reference (here), and judges the step in judge/speed.py. Every byte count and "copies
of x" comes from rmsnorm_testkit.timing's traffic model.
"""
from __future__ import annotations

import torch
from rmsnorm_testkit import timing
from rmsnorm_testkit.compare import eager, reference


def traffic_bytes(kind: str, shape, dtype: str) -> int:
    """Minimum bytes a step moves: forward reads x, writes y (2·M·N); backward reads x, dy, writes dx (3·M·N)."""
    return timing.least_bytes(kind, shape, dtype)


def baseline_times(shape, dtype: str, seed: int) -> dict:
    """Milliseconds of PyTorch eager (forward, forward+backward) and of a copy of x."""
    times = _baseline_times(*timing.speed_inputs(shape, dtype, seed, device="cuda"))
    torch.cuda.empty_cache()                     # the inputs are gone with _baseline_times' frame
    return times


def _baseline_times(x, g, dy) -> dict:
    """Eager launched as usual, eager replayed from a CUDA graph (its kernels alone), and a copy."""
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    out = torch.empty_like(x)
    times = {"fwd": timing.time_cuda(lambda: eager(x, g)),
             "fwdbwd": timing.time_cuda(lambda: torch.autograd.grad(eager(xg, gg), (xg, gg), dy)),
             "copy": timing.time_cuda(lambda: out.copy_(x))}
    try:
        times["fwd_graph"], _ = timing.run_graph(lambda: eager(x, g), (), lambda s: None, ("y",))
        times["fwdbwd_graph"], _ = timing.run_graph(lambda: torch.autograd.grad(eager(xg, gg), (xg, gg), dy),
                                                    (), lambda s: None, ("dx", "dg"))
    except timing.NotCapturable:                     # never seen; the verdict does not need these
        pass
    return times


def reference_at_rows(shape, dtype: str, seed: int, rows, device: str = "cuda") -> tuple:
    """(x rows, float64 reference of y and dx at those rows and of the full dg) for the timing inputs."""
    x, ref = full_reference(shape, dtype, seed, device)
    idx = torch.tensor(rows, device=device)
    out = x[idx].cpu(), {"y": ref["y"][idx].cpu(), "dx": ref["dx"][idx].cpu(), "dg": ref["dg"].cpu()}
    del x, ref
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def full_reference(shape, dtype: str, seed: int, device: str = "cuda") -> tuple:
    """(x, float64 reference of y, dx and dg) of the timing inputs made from ``seed``, on ``device``: a
    replay's whole outputs are compared with them there (milliseconds on a GPU)."""
    x, g, dy = timing.speed_inputs(shape, dtype, seed, device=device)
    y, _, dx, dg = reference(x, g, dy)
    return x, {"y": y, "dx": dx, "dg": dg}
