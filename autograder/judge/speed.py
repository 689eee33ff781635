"""Rubric item 10's verdict: a step's GPU time against a copy's, from the job's timed replay.

The job's timed replay (job/judge/timed.py) and the grader's own baselines and references (autograder/speed.py)
come in; the verdict goes out. A step the judge could not run or capture, that ran torch's own work, changed its
inputs or gave wrong outputs in a checked replay earns nothing (``refusal``); a time faster than a copy of the
same bytes is physically impossible and is rejected as a broken measurement (``PLAUSIBLE``).
"""
from __future__ import annotations

from rmsnorm_testkit import text
from rmsnorm_testkit.predict import PLAUSIBLE as PLAUSIBLE_SHARE

from ..rubric import PARTS
from ..speed import timing, traffic_bytes

PLAUSIBLE = 1.15        # no kernel moves its bytes faster than this multiple of the measured copy


WHAT = {step: what for step, (what, _) in timing.STEPS.items()}         # "fwd" -> "forward"


def least_time(kind: str) -> tuple[float, str]:
    """(the least time of a step, in copies of x; why): (1, "read x, write y"), or for forward+backward
    (2.5, "forward 1; backward 1.5: read x and dy, write dx")."""
    kernels = timing.kernels_of(kind)
    why = timing.moves(kernels[-1])
    if len(kernels) > 1:
        why = "; ".join(f"{timing.KERNELS[k][0]} {timing.least_copies(k):g}" for k in kernels) + ": " + why
    return timing.least_copies(kind), why


LEAST_COPIES = {kind: least_time(kind) for kind in timing.STEPS}
# The kernels the assignment names, and the least time each can take, in copies of x.
OWN_KERNELS = {kernel: timing.least_copies(kernel) for kernel in timing.KERNELS}
KERNEL_NAME_CHARS = 60       # a kernel's name as the feedback lists it: C++ template arguments cut off
PYTORCH_PREFIXES = ("at::", "cub", "Memcpy", "Memset", "elementwise_kernel", "reduce_kernel")


def not_captured(why: str) -> str:
    """Why a step could not be captured in a CUDA graph, and what to do, from the error that stopped it."""
    if "unjoined" in why.lower():
        return ("it launches work on another CUDA stream and does not make the current stream wait for it "
                "(launch on the current stream, or end with torch.cuda.current_stream().wait_stream(side))")
    if "subclass of torch.Tensor" in why:
        return "it returned something other than plain tensors"
    return ("your wrapper makes Python wait for the GPU (.item(), .cpu(), .tolist(), printing or testing a "
            "tensor's value, torch.cuda.synchronize()), or launches work on a stream other than the current "
            "one; in a model that leaves the GPU idle at every call: remove it")


def not_timed(story: str, error: str, cause: str | None = None) -> str:
    """Why a forward+backward was not timed: its untimed call failed (``error``, the job's line for it, and its
    ``cause`` when the job named one); the forward's own parts were timed without it."""
    owner = " (item 3 charges the missing dg)" if cause == "no_dg_backward" else ""
    return (f"the forward+backward on {story} was not timed: its first call failed with {error}{owner}. The "
            f"forward's speed parts were graded on their own; this part times a complete backward")


def refusal(kind: str, info: dict, own=None) -> str | None:
    """Why the timed replay of one kind of step cannot be graded (None when it can): the judge could not run it
    from its recipe or capture it, torch did the work, kernels that are neither PyTorch's nor among ``own`` (the
    names of the functions the submission's file defines) ran, it changed its inputs, or checked replays came out
    wrong (job/judge/timed.py)."""
    what = WHAT[kind]
    why = info.get(f"{kind}_replay_error")
    if why:
        return (f"the grader could not run your {what} again from what it recorded ({why}). Item 10 times your "
                f"kernels as the grader runs them itself: each kernel compiled from your file, launched as your "
                f"wrappers launched it, with the torch ops they ran, on inputs only the grader sees")
    why = info.get(f"{kind}_graph_error")
    if why or f"{kind}_graph_ms" not in info:
        why = why or "no time was measured"
        return (f"your {what} could not be captured in a CUDA graph ({why}): {not_captured(why)}. Item 10 times "
                f"each step as a CUDA graph replays it, as torch.compile's \"reduce-overhead\" mode and inference "
                f"servers run a model; a step that cannot be captured earns no points here")
    work = info.get(f"{kind}_torch_work") or []
    if work:
        first, rest = work[0], work[1:]
        more = (f" (and {len(rest)} more torch op{'s' if len(rest) > 1 else ''}, over "
                f"{sum(int(w.get('reads') or 0) for w in rest)} elements in all)" if rest else "")
        return (f"your {what} ran torch's {first.get('op')} over {first.get('reads')} elements"
                + (f" at {first['where']}" if first.get("where") else "") + more +
                " while it was timed: the work must be done in your own kernels, and PyTorch's "
                "operations on whole tensors are not timed as yours (moving data, as a copy, a cast or the "
                "sum of a buffer of partial results, is fine)")
    foreign = sorted({kernel_name(n) for n, _ in info.get(f"{kind}_kernels") or []
                      if not is_pytorch(n) and own is not None and kernel_name(n) not in own})
    if foreign:
        return (f"your {what} ran kernels that your file does not define ({', '.join(foreign[:4])}): item 10 "
                f"times your own kernels, not a library's")
    changed = info.get(f"{kind}_inputs_changed") or []
    if changed:
        return (f"your {what} changed its input{'s' if len(changed) > 1 else ''} {' and '.join(changed)} while "
                f"it was timed: a step must leave its inputs as they were (callers reuse them)")
    wrong = info.get(f"{kind}_replays_wrong")
    if wrong:
        return (f"{wrong} of the {info.get(f'{kind}_replays_checked', wrong)} timed replays of your {what} gave "
                f"wrong outputs for their inputs (each replay had new ones): a time is graded only when every replay "
                f"computed the step. A kernel that reads memory no step wrote (torch.empty is not zeros), races, or "
                f"keeps state between calls (a buffer kept from an earlier call holds zeros here) gives such outputs")
    return None


def kernel_name(name: str) -> str:
    """A kernel's name as a student reads it: "void at::native::reduce_kernel<512, 1, ...>(...)" is
    "at::native::reduce_kernel"; a Triton kernel's name is its function's."""
    name = name.removeprefix("void ")
    for stop in "<(":
        name = name.split(stop, 1)[0]
    return name.strip()[:KERNEL_NAME_CHARS] or "?"


def is_pytorch(name: str) -> bool:
    return kernel_name(name).startswith(PYTORCH_PREFIXES)


def kernel_list(kind: str, info: dict, base: dict, top: int = 4) -> str:
    """Each kernel's time per step, and the time of how many copies of x that is."""
    kernels = info.get(f"{kind}_kernels") or []
    if not kernels:
        return ""
    shown = [f"{kernel_name(name)}{' (PyTorch)' if is_pytorch(name) else ''} {ms:.3f} ms "
             f"({ms / base['copy']:.1f} copies)" for name, ms in kernels[:top]]
    rest = kernels[top:]
    if rest:
        shown.append(f"{len(rest)} more kernel{'s' if len(rest) > 1 else ''}: {sum(ms for _, ms in rest):.3f} ms "
                     f"in all")
    least, why = LEAST_COPIES[kind]
    return (f" Time per kernel, and as how many copies of x (reading and writing one x-sized tensor: "
            f"{base['copy']:.3f} ms) it takes: {'; '.join(shown)}. A {WHAT[kind]} needs at least "
            f"{least:g} cop{'y' if least == 1 else 'ies'} ({why}).")


def advice(kind: str, info: dict, base: dict) -> str:
    """What to try, from where the time went: PyTorch operations, or one of the student's kernels
    taking well over the least it could."""
    kernels = info.get(f"{kind}_kernels") or []
    total = sum(ms for _, ms in kernels)
    tips = []
    torch_ms = sum(ms for name, ms in kernels if is_pytorch(name))
    if total and torch_ms > 0.15 * total:
        tips.append(f"{100 * torch_ms / total:.0f}% of this GPU time is PyTorch operations (the kernels marked "
                    f"PyTorch) run by your Python code: each reads and writes whole tensors; do that work in "
                    f"your kernels instead")
    for name, ms in kernels:
        least = OWN_KERNELS.get(kernel_name(name))
        if least and ms / base["copy"] > 1.2 * least:
            tips.append(f"{kernel_name(name)} takes as long as {ms / base['copy']:.1f} copies of x where {least:g} "
                        f"is the least: it moves more bytes than it must (x read twice, as when a block shorter "
                        f"than the row makes it loop over the row twice; an M x N buffer written and read back), "
                        f"or keeps too few loads in flight (tiny blocks, too few programs or warps)")
    if not tips:
        tips.append("move fewer bytes: read x (and dy) once, write each output once, and keep enough loads in "
                    "flight (a whole row per block where it fits, enough programs and warps)")
    return (" To go faster: " + "; ".join(tips) + ". `make bench` shows your GPU time as the grader measures it, "
            "beside the wall time.")


def gpu_verdict(kind: str, dtype: str, shape, info: dict, base: dict, needed_pct: float,
                wrong: str | None, own=None) -> tuple[bool, str]:
    """(passed, message): the GPU time of the submission's step, replayed from a CUDA graph on inputs it
    has never seen, as a percentage of copy bandwidth.

    The kernels' own time is graded, not the wall clock: at this shape a call's host time (Python,
    autograd, allocations, launches) is up to twice its kernels' time and varies between runs,
    while a model hides it (CUDA graphs, or a GPU kept busy); the judge's process runs the step from its recipe
    (job/judge/timed.py), so no host code of the submission's is there to time. The message says which kernels
    took the time, and what to try when the part fails."""
    what, name = WHAT[kind], text.dtype_name(dtype)
    head = f"{what} {name} at {shape[0]}x{shape[1]}"
    why = refusal(kind, info, own)
    if why:
        return False, f"{head}: {why}."
    if wrong:
        return False, (f"{head}: replayed from a CUDA graph on new inputs, your {what} gave wrong outputs "
                       f"({wrong}); it is right when called normally. Does your wrapper behave differently "
                       f"while it is captured, keep outputs from an earlier call, or launch on another stream?")
    ms = info[f"{kind}_graph_ms"]
    if implausible(kind, shape, dtype, info, base):
        return False, (f"{head}: the measured GPU time ({ms:.4f} ms) is faster than copying the data; the "
                       f"measurement was tampered with or broken, and is not used")
    copy_gbs = copy_bandwidth(shape, dtype, base)
    gbs = traffic_bytes(kind, shape, dtype) / ms / 1e6
    pct = 100 * gbs / copy_gbs
    eager_kernels = base.get(f"{kind}_graph")
    msg = (f"{head}: the GPU ran your {what} in {ms:.3f} ms (replayed from a CUDA graph): {gbs:.0f} GB/s = "
           f"{pct:.0f}% of copy bandwidth (a plain copy on this GPU: {copy_gbs:.0f} GB/s); {needed_pct:.0f}% "
           f"needed" + (f"; {eager_kernels / ms:.2f}x as fast as eager PyTorch's kernels ({eager_kernels:.3f} ms)"
                        if eager_kernels else "") + "." + kernel_list(kind, info, base))
    if pct < needed_pct:
        msg += advice(kind, info, base)
    return pct >= needed_pct, msg


def implausible(kind: str, shape, dtype: str, info: dict, base: dict) -> bool:
    """Is the step's measured GPU time faster than copying its data could be (a broken or tampered measurement)?"""
    ms = info.get(f"{kind}_graph_ms")
    if not isinstance(ms, (int, float)):
        return False
    return ms <= 0 or traffic_bytes(kind, shape, dtype) / ms / 1e6 > PLAUSIBLE * copy_bandwidth(shape, dtype, base)


def copy_bandwidth(shape, dtype: str, base: dict) -> float:
    """GB/s of the measured copy of x (``base["copy"]`` ms)."""
    return timing.copy_bytes(shape, dtype) / base["copy"] / 1e6


# -- item 10 predicted on a CPU grading, and the leaderboard -----------------------------------------------------
def _step_and_dtype(part: str) -> tuple:
    """("fwd", "fp32") for 10.1: the step and dtype a speed part times, read from its name in the rubric."""
    name = PARTS[part].name                                    # "forward fp32", "forward+backward bf16"
    what, dtype = name.rsplit(" ", 1)
    return next(kind for kind, w in WHAT.items() if w == what), dtype


ITEM_10_PARTS = [p for p in PARTS if p.startswith("10.")]
PATH_ENTRY = "GPU path of the prediction"      # the leaderboard's entry saying which path the wrappers took


def board_name(part: str, predicted: bool) -> str:
    """A speed part's name on the leaderboard: "forward fp32, % of copy" (" (predicted)" on a CPU grading)."""
    return f"{PARTS[part].name}, % of copy" + (" (predicted)" if predicted else "")


def predictions(outcome, tasks) -> dict:
    """{dtype: the prediction the judge made} of the predict tasks (``tasks``: {dtype: task name}) that ran."""
    out = {}
    for dtype, task in tasks.items():
        info = getattr(outcome, "info", {}).get(task)
        got = info.get("prediction") if isinstance(info, dict) else None
        if isinstance(got, dict) and isinstance(got.get("shares"), dict):
            out[dtype] = got
    return out


def _share(pred: dict, kind: str):
    """A step's predicted share of copy; None where there is none, or where it is above a copy (``_implausible``)."""
    value = pred.get("shares", {}).get(kind)
    return float(value) if isinstance(value, (int, float)) and 0 <= value <= PLAUSIBLE_SHARE else None


def _implausible(pred: dict, kind: str) -> bool:
    """Did the model put this step above a copy's bandwidth (no prediction: it missed part of the work)?"""
    value = pred.get("shares", {}).get(kind)
    return kind in (pred.get("implausible") or {}) or (isinstance(value, (int, float)) and value > PLAUSIBLE_SHARE)


def _path(predicted: dict, key: str) -> str | None:
    """Which GPU path the wrappers took ("line": the note's sentence, "short": the leaderboard's words), as the
    first dtype's prediction says it."""
    for pred in predicted.values():
        said = (pred.get("path") or {}).get(key) if isinstance(pred.get("path"), dict) else None
        if said:
            return str(said)[:text.SUMMARY_CHARS]
    return None


def prediction_note(predicted: dict, needed: dict) -> str:
    """The note a CPU grading adds to item 10: each speed part's predicted share of copy beside what it needs (a
    share above a copy's: implausible, no prediction), which GPU path the wrappers took, and what may make the
    prediction wrong; or why there is none."""
    if not any(_share(p, kind) is not None or _implausible(p, kind) for p in predicted.values() for kind in WHAT):
        return ("No prediction of item 10: its steps did not run to the end on the simulator (the parts above say "
                "why, or they took longer than the prediction's few seconds).")
    cells = []
    for part in ITEM_10_PARTS:
        kind, dtype = _step_and_dtype(part)
        pred = predicted.get(dtype, {})
        share = _share(pred, kind)
        said = ("implausible: above a copy's bandwidth, so not a prediction" if _implausible(pred, kind) else
                f"≈ {'n/a' if share is None else f'{share:.0f}%'} of copy")
        cells.append(f"{PARTS[part].name} {said} ({part} needs {needed[part]:.0f}%)")
    gpu = next(iter(predicted.values())).get("gpu", "H200")
    path = _path(predicted, "line")
    notes = list(dict.fromkeys(str(n)[:text.SUMMARY_CHARS] for p in predicted.values() for n in p.get("notes", [])))
    return (f"Predicted on an {gpu} from the simulator's record of your kernels (a prediction, no points: item 10 "
            f"is measured on the course GPU after the deadline): " + "; ".join(cells) + "."
            + (f" The GPU's path: {path}." if path else "") + "".join(f" Note: {n}." for n in notes[:4]))


def predicted_leaderboard(predicted: dict) -> list:
    """Gradescope's leaderboard entries of a CPU grading: each speed part's predicted share of copy (higher
    first; "implausible", as text, where the model put it above a copy), the forward+backward's traffic in copies
    of x (lower first), and which GPU path the wrappers took. No points ride on them."""
    entries = []
    for part in ITEM_10_PARTS:
        kind, dtype = _step_and_dtype(part)
        share = _share(predicted.get(dtype, {}), kind)
        if share is not None:
            entries.append({"name": board_name(part, True), "value": round(share, 1), "order": "desc"})
        elif _implausible(predicted.get(dtype, {}), kind):
            entries.append({"name": board_name(part, True), "value": "implausible (above a copy)"})
    for dtype, pred in predicted.items():
        copies = (pred.get("copies") or {}).get("fwdbwd")
        if isinstance(copies, (int, float)):
            entries.append({"name": f"forward+backward {dtype}, traffic in copies of x (predicted)",
                            "value": round(float(copies), 2), "order": "asc"})
    path = _path(predicted, "short")
    if path:
        entries.append({"name": PATH_ENTRY, "value": path})
    return entries


def measured_entry(part: str, dtype: str, shape, info: dict, base: dict, refused: bool) -> dict | None:
    """The leaderboard entry of a GPU grading's speed part (``dtype`` torch's name of its dtype): its measured share
    of copy; None when it was not timed, or its time was refused."""
    kind, _ = _step_and_dtype(part)
    ms = info.get(f"{kind}_graph_ms")
    if refused or not isinstance(ms, (int, float)) or ms <= 0:
        return None
    pct = 100 * traffic_bytes(kind, shape, dtype) / ms / 1e6 / copy_bandwidth(shape, dtype, base)
    return {"name": board_name(part, False), "value": round(pct, 1), "order": "desc"}
