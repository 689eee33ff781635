"""GPU speed (rubric item 10), the trusted side: baselines, references and verdicts.

The submission's kernels are timed in its sandboxed job (worker.run_speed, with
CUDA event functions captured before the submission is imported). The grader
times PyTorch eager and a plain device copy itself, in its own process, on the
same inputs, and decides here. A reported time faster than a copy of the same
bytes is physically impossible and is rejected as a broken measurement.
"""
from __future__ import annotations

import torch

from .check import eager, reference
from .worker import speed_inputs, time_cuda

PLAUSIBLE = 1.15        # no kernel moves its bytes faster than this multiple of the measured copy


def traffic_bytes(kind: str, shape, dtype: str) -> int:
    """Minimum bytes moved: forward reads x, writes y (2·M·N); backward reads x, dy, writes dx (3·M·N)."""
    M, N = shape
    elem = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    return (2 if kind == "fwd" else 5) * M * N * elem


def baseline_times(shape, dtype: str, seed: int) -> dict:
    """Milliseconds of PyTorch eager (forward, forward+backward) and of a copy of x."""
    times = _baseline_times(*speed_inputs(shape, dtype, seed, device="cuda"))
    torch.cuda.empty_cache()                     # the inputs are gone with _baseline_times' frame
    return times


def _baseline_times(x, g, dy) -> dict:
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    out = torch.empty_like(x)
    return {"fwd": time_cuda(lambda: eager(x, g)),
            "fwdbwd": time_cuda(lambda: torch.autograd.grad(eager(xg, gg), (xg, gg), dy)),
            "copy": time_cuda(lambda: out.copy_(x))}


def reference_at_rows(shape, dtype: str, seed: int, rows, device: str = "cuda") -> tuple:
    """(x rows, float64 reference of y and dx at those rows and of the full dg) for the timing inputs."""
    x, g, dy = speed_inputs(shape, dtype, seed, device=device)
    y, _, dx, dg = reference(x, g, dy)
    idx = torch.tensor(rows, device=device)
    out = x[idx].cpu(), {"y": y[idx].cpu(), "dx": dx[idx].cpu(), "dg": dg.cpu()}
    del x, g, dy, y, dx, dg
    if device == "cuda":
        torch.cuda.empty_cache()
    return out


def verdict(kind: str, dtype: str, shape, ms: float, base: dict, needed: float) -> tuple[bool, str]:
    """(passed, message) for one timing against eager, with GB/s and the percentage of copy bandwidth."""
    what = {"fwd": "forward", "fwdbwd": "forward+backward"}[kind]
    name = {"float32": "fp32", "bfloat16": "bf16"}[dtype]
    nbytes = traffic_bytes(kind, shape, dtype)
    copy_gbs = traffic_bytes("fwd", shape, dtype) / base["copy"] / 1e6      # a copy moves what a forward does
    if not ms or ms <= 0:
        return False, f"{what} {name}: no valid time was measured"
    gbs = nbytes / ms / 1e6
    speedup = base[kind] / ms
    msg = (f"{what} {name} at {shape[0]}x{shape[1]}: {ms:.3f} ms, {gbs:.0f} GB/s = {100 * gbs / copy_gbs:.0f}% "
           f"of copy bandwidth ({copy_gbs:.0f} GB/s); {speedup:.2f}x PyTorch eager ({base[kind]:.3f} ms), "
           f"{needed:.2f}x needed")
    if gbs > PLAUSIBLE * copy_gbs:
        return False, f"{what} {name}: the measured time ({ms:.4f} ms) is faster than copying the data; " \
                      f"the measurement was tampered with or broken"
    return speedup >= needed, msg
