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
from .worker import NotCapturable, run_graph, speed_inputs, time_cuda

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
    """Eager launched as usual, eager replayed from a CUDA graph (its kernels alone), and a copy."""
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    out = torch.empty_like(x)
    times = {"fwd": time_cuda(lambda: eager(x, g)),
             "fwdbwd": time_cuda(lambda: torch.autograd.grad(eager(xg, gg), (xg, gg), dy)),
             "copy": time_cuda(lambda: out.copy_(x))}
    try:
        times["fwd_graph"], _ = run_graph(lambda: eager(x, g), (), lambda s: None, ("y",))
        times["fwdbwd_graph"], _ = run_graph(lambda: torch.autograd.grad(eager(xg, gg), (xg, gg), dy), (),
                                             lambda s: None, ("dx", "dg"))
    except NotCapturable:                            # never seen; the verdict does not need these
        pass
    return times


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


WHAT = {"fwd": "forward", "fwdbwd": "forward+backward"}
SHORT = {"float32": "fp32", "bfloat16": "bf16"}
# the least time a step can take, in copies of x: a forward reads x and writes y (one copy's bytes),
# a backward reads x and dy and writes dx (one and a half)
LEAST_COPIES = {"fwd": (1.0, "read x, write y"), "fwdbwd": (2.5, "forward 1; backward 1.5: read x and dy, write dx")}


def gpu_time(kind: str, info: dict) -> tuple[float | None, str]:
    """(milliseconds, how they were measured): the graded GPU time of one kind of step.

    A CUDA graph's replay when the step could be captured; else the sum of its kernels'
    durations from the profiler; None when neither was measured."""
    if info.get(f"{kind}_graph_ms"):
        return info[f"{kind}_graph_ms"], "replayed from a CUDA graph"
    if info.get(f"{kind}_profiled_ms"):
        why = info.get(f"{kind}_graph_error", "")
        return info[f"{kind}_profiled_ms"], (
            f"the sum of its kernels' durations: it could not be captured in a CUDA graph ({why}); a "
            f"wrapper that synchronises with the host (.item(), .cpu(), printing or testing a tensor's "
            f"value) cannot be, and in a model it stalls the GPU")
    return None, info.get(f"{kind}_graph_error") or info.get(f"{kind}_profile_error") or "no GPU time"


def kernel_name(name: str) -> str:
    """A kernel's name as a student reads it: "void at::native::reduce_kernel<512, 1, ...>(...)" is
    "at::native::reduce_kernel"; a Triton kernel's name is its function's."""
    name = name.removeprefix("void ")
    for stop in "<(":
        name = name.split(stop, 1)[0]
    return name.strip()[:60] or "?"


def kernel_list(kind: str, info: dict, base: dict, top: int = 4) -> str:
    """Each kernel's time per step, in copies of x: "rmsnorm_bwd_kernel 0.122 ms (1.6 copies)"."""
    kernels = info.get(f"{kind}_kernels") or []
    if not kernels:
        return ""
    shown = [f"{kernel_name(name)} {ms:.3f} ms ({ms / base['copy']:.1f} copies of x)" for name, ms in kernels[:top]]
    rest = sum(ms for _, ms in kernels[top:])
    if rest:
        shown.append(f"{len(kernels) - top} more {rest:.3f} ms")
    least, why = LEAST_COPIES[kind]
    return (f" Per step on the GPU: {'; '.join(shown)}. A copy of x takes {base['copy']:.3f} ms; a {WHAT[kind]} "
            f"takes at least {least:g} copies ({why}).")


def gpu_verdict(kind: str, dtype: str, shape, info: dict, base: dict, needed_pct: float,
                wrong: str | None, wall_needed: float) -> tuple[bool, str]:
    """(passed, message): the GPU time of the submission's kernels as a percentage of copy bandwidth.

    The kernels' own time is graded, not the wall clock: at this shape a call's host time (Python,
    autograd, allocations, launches) is up to twice its kernels' time and varies between runs,
    while a model hides it (CUDA graphs, or a GPU kept busy). The message says which kernels took
    the time, and how much of a normal call was host time."""
    what, name = WHAT[kind], SHORT[dtype]
    head = f"{what} {name} at {shape[0]}x{shape[1]}"
    if wrong:
        return False, (f"{head}: while it was being timed (replayed from a CUDA graph with new inputs, or "
                       f"profiled), your {what} gave wrong outputs ({wrong}); it is right when called "
                       f"normally. Does your wrapper behave differently under a CUDA graph or the profiler?")
    ms, how = gpu_time(kind, info)
    nbytes = traffic_bytes(kind, shape, dtype)
    copy_gbs = traffic_bytes("fwd", shape, dtype) / base["copy"] / 1e6      # a copy moves what a forward does
    if ms is None:                                   # the profiler failed too: the wall clock decides
        ok, msg = verdict(kind, dtype, shape, info.get(f"{kind}_ms"), base, wall_needed)
        return ok, f"{msg}. No GPU time could be measured ({how}), so the wall time was graded."
    gbs = nbytes / ms / 1e6
    if gbs > PLAUSIBLE * copy_gbs:
        return False, (f"{head}: the measured GPU time ({ms:.4f} ms) is faster than copying the data; the "
                       f"measurement was tampered with or broken, and is not used")
    pct = 100 * gbs / copy_gbs
    eager_kernels = base.get(f"{kind}_graph")
    msg = (f"{head}: your kernels took {ms:.3f} ms on the GPU ({how}), {gbs:.0f} GB/s = {pct:.0f}% of copy "
           f"bandwidth ({copy_gbs:.0f} GB/s); {needed_pct:.0f}% needed" +
           (f"; {eager_kernels / ms:.2f}x eager PyTorch's kernels ({eager_kernels:.3f} ms)" if eager_kernels
            else "") + "." + kernel_list(kind, info, base))
    wall = info.get(f"{kind}_ms")
    if wall:
        msg += (f" A normal call takes {wall:.3f} ms of wall time ({base[kind] / wall:.2f}x eager's "
                f"{base[kind]:.3f} ms)" +
                (f": {wall - ms:.3f} ms of it is host time (Python, autograd, allocations, launches), which "
                 f"is not graded" if wall - ms > 0.005 else "") + ".")
    if pct < needed_pct:
        msg += (" To go faster, move fewer bytes: a kernel well above its share of copies re-reads x, writes and "
                "reads back an M x N buffer, or runs blocks too small to keep the memory busy. `make bench` "
                "times your forward and backward.")
    return pct >= needed_pct, msg


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
