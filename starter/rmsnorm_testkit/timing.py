"""GPU timing, shared by `make bench` (bench.py) and the grader (item 10), and the least a step must move.

A step (a forward; a forward and backward through autograd) is timed three ways:

- ``time_cuda``: CUDA events around each call, the L2 cache flushed before each, the best of a few
  medians: a call as the GPU sees it, host work included (the method of ``triton.testing.do_bench``);
- ``run_graph``: the step captured once in a CUDA graph (``captured``) and replayed: its kernels
  alone, without the host's Python, autograd and launches. Item 10 grades this GPU time;
- ``kernel_times``: the profiler's record of each kernel one call ran: where the time went, and the
  GPU time of a step that cannot be captured.

Every torch function the timing calls is kept in one table (``kept()``) the first time it is needed.
The grader's job keeps them (``keep()``) before it imports a submission, so a submission that replaces,
say, ``torch.cuda.Event.elapsed_time`` changes nothing measured here.

Times are judged against the traffic model (``KERNELS``): the M x N tensors each kernel must read and
write at the least. The bytes of a step, its least time in copies of x and the GB/s of a time follow
from it. The module imports without CUDA: the GPU is touched only when something is timed.
"""
import contextlib
import sys
import traceback
from pathlib import Path

import torch

from .text import CODE_LINE_CHARS, error_line

# -- the least a step must move -----------------------------------------------------------------------------

# Per kernel: its phase, and the M x N tensors it must read and write, each element once. g, r and a
# partial-dg buffer are of size N or M, negligible beside them.
KERNELS = {"rmsnorm_fwd_kernel": ("forward", ("x",), ("y",)),
           "rmsnorm_bwd_kernel": ("backward", ("x", "dy"), ("dx",))}
# The steps that are timed: what they are called, and the kernels they run.
STEPS = {"fwd": ("forward", ("rmsnorm_fwd_kernel",)),
         "fwdbwd": ("forward+backward", ("rmsnorm_fwd_kernel", "rmsnorm_bwd_kernel"))}
COPY_ELEMENTS = 2           # a copy of x reads and writes each element once: the unit of "copies of x"
SPEED_SHAPE = (16384, 4096)  # the shape item 10 times (and predict.py predicts), in each of TIMED_DTYPES
TIMED_DTYPES = ("fp32", "bf16")


def kernels_of(what) -> tuple:
    """The kernels of a step ("fwd", "fwdbwd"), or the one kernel named."""
    return STEPS[what][1] if what in STEPS else (what,)


def least_elements(what) -> int:
    """Elements of M x N tensors a kernel or a step moves per element of x at the least: the forward 2 (read x,
    write y), the backward 3 (read x and dy, write dx), a forward+backward step 5."""
    return sum(len(KERNELS[k][1]) + len(KERNELS[k][2]) for k in kernels_of(what))


def least_copies(what) -> float:
    """The least time of a kernel or a step, in copies of x: the forward 1, the backward 1.5, a step 2.5."""
    return least_elements(what) / COPY_ELEMENTS


def moves(kernel) -> str:
    """What ``kernel`` must move, in words: "read x and dy, write dx"."""
    _, read, written = KERNELS[kernel]
    return f"read {' and '.join(read)}, write {' and '.join(written)}"


_SIZES: dict = {}                # torch dtype -> bytes per element, once known


def element_size(dtype) -> int:
    """Bytes per element of a dtype given as torch's or by its name ("bfloat16"), as torch makes one (its error for
    a dtype it cannot make); remembered, since the grader's judge asks for every argument of every launch."""
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    size = _SIZES.get(dtype)
    if size is None:
        size = _SIZES[dtype] = torch.empty((), dtype=dtype).element_size()
    return size


def least_bytes(what, shape, dtype) -> int:
    """Bytes a kernel or a step moves at the least on an (M, N) input of ``dtype``."""
    M, N = shape
    return least_elements(what) * M * N * element_size(dtype)


def copy_bytes(shape, dtype) -> int:
    """Bytes a copy of an (M, N) x moves: what the copy bandwidth is measured with."""
    M, N = shape
    return COPY_ELEMENTS * M * N * element_size(dtype)


# -- the torch functions timing uses, kept ----------------------------------------------------------------

CUDA = {}                   # the kept functions (keep())


def keep():
    """Keep the timing, graph and input-making functions, before a submission can touch them.

    Where torch has them, the C methods themselves are kept (an event's record and elapsed time, a graph's
    replay, the device synchronisation): torch's Python classes look those up again at every call, in
    classes that a submission could reach, while a kept C method runs as it was."""
    event = _c_class("_CudaEventBase", torch.cuda.Event, "elapsed_time")
    graph = _c_class("_CUDAGraph", torch.cuda.CUDAGraph, "replay")
    record, current = event.record, torch.cuda.current_stream
    if event is not torch.cuda.Event:                # the C method takes the stream; Event.record finds it
        def record(ev, _c_record=event.record):
            return _c_record(ev, current())
    CUDA.update(event=event, record=record, elapsed=event.elapsed_time,
                sync=getattr(torch._C, "_cuda_synchronize", torch.cuda.synchronize), empty=torch.empty,
                graph_class=torch.cuda.CUDAGraph, equal=torch.equal,
                graph=torch.cuda.graph, replay=graph.replay, stream_class=torch.cuda.Stream,
                current_stream=torch.cuda.current_stream, use_stream=torch.cuda.stream,
                wait_stream=torch.cuda.Stream.wait_stream, no_grad=torch.no_grad,
                profile=torch.profiler.profile, cuda_activity=torch.profiler.ProfilerActivity.CUDA,
                generator=torch.Generator, manual_seed=torch.Generator.manual_seed, randn=torch.randn,
                rand=torch.rand, copy=torch._C.TensorBase.copy_, add_=torch._C.TensorBase.add_,
                zero_=torch._C.TensorBase.zero_, tensor_class=torch.Tensor, index_select=torch.index_select,
                detach=torch._C.TensorBase.detach, clone=torch._C.TensorBase.clone,
                as_subclass=torch._C.TensorBase.as_subclass)


def _c_class(name, python_class, method):
    """torch._C's class ``name`` where it has ``method`` (a CUDA build of torch), else ``python_class``."""
    c_class = getattr(torch._C, name, None)
    return c_class if c_class is not None and hasattr(c_class, method) else python_class


def kept() -> dict:
    """The kept functions (kept now, if nothing kept them before)."""
    if not CUDA:
        keep()
    return CUDA


L2_FLUSH_BYTES = 256 * 1024 * 1024      # more than any GPU's L2 cache: zeroing it evicts the inputs


def l2_flush_buffer():
    return kept()["empty"](L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")


# -- the timing inputs -----------------------------------------------------------------------------------

def speed_inputs(shape, dtype, seed, device="cpu", out=None):
    """The timing inputs (x, g, dy) of ``dtype`` (torch's, or its name), made from a seed on ``device``, so
    the grader can rebuild them exactly; written into ``out`` (three tensors) when given. Only kept
    functions are used: a submission cannot watch or change the inputs being made."""
    c = kept()
    gen = c["generator"](device=device)
    c["manual_seed"](gen, seed)
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    M, N = shape
    if out is None:
        out = tuple(c["empty"](*s, dtype=dtype, device=device) for s in ((M, N), (N,), (M, N)))
    c["copy"](out[0], c["randn"](M, N, generator=gen, device=device))
    c["copy"](out[1], c["add_"](c["rand"](N, generator=gen, device=device), 0.5))
    c["copy"](out[2], c["randn"](M, N, generator=gen, device=device))
    return out


# -- a call's time: CUDA events ---------------------------------------------------------------------------

MAX_REPS = 1000     # timed calls in a round at most: a median of a thousand is steady, and a step that looks
                    # instant while its time is estimated cannot make a round last for ever


def time_cuda(fn, warmup_ms=100.0, rep_ms=200.0, min_reps=25, rounds=3, prepare=None, after=None):
    """Milliseconds of ``fn`` on the GPU: the best of ``rounds`` medians, each measured as
    triton.testing.do_bench does.

    A time-based warm-up first (clocks ramp up, caches and allocators settle: a fixed
    handful of calls left one grading in ten 2x slow), then at least ``min_reps``
    timed calls per round, the L2 cache flushed before each. Taking the best round
    keeps a transient slowdown of the machine from deciding a verdict. ``prepare(reps)``, when given, runs
    before each timed call, untimed (the grader fills the inputs with new values there), before the flush;
    ``reps`` is how many timed calls its round makes (at most MAX_REPS). ``after()``, when given, runs after each
    round's last timed call, untimed, before anything else runs (the grader checks that call's outputs there).
    """
    return min(_median_cuda(fn, warmup_ms if i == 0 else 0.0, rep_ms, min_reps, prepare, after)
               for i in range(rounds))


def _median_cuda(fn, warmup_ms, rep_ms, min_reps, prepare=None, after=None):
    c = kept()
    event, record, elapsed, sync = c["event"], c["record"], c["elapsed"], c["sync"]
    flush = l2_flush_buffer()
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
    times, reps = [], min(MAX_REPS, max(min_reps, int(rep_ms / estimate)))
    for _ in range(reps):
        if prepare is not None:
            prepare(reps)
        c["zero_"](flush)
        start, end = event(enable_timing=True), event(enable_timing=True)
        record(start)
        fn()
        record(end)
        sync()
        times.append(elapsed(start, end))
    if after is not None:
        after()
    times.sort()
    return times[len(times) // 2]


# -- the kernels alone: a CUDA graph ----------------------------------------------------------------------

class NotCapturable(Exception):
    """The step could not be captured in a CUDA graph (a host synchronisation in it, say)."""


def captured(step, warmup=3, watch=None):
    """(replay, outputs): ``step`` captured in a CUDA graph, after ``warmup`` calls on a side stream
    (compilation, autotuning and the allocator settle first, as PyTorch's CUDA-graph recipe does).

    ``replay()`` runs the captured kernels again, on the same buffers: the kernels' own GPU time,
    without the host's Python, autograd and launch work. Capturing runs the step's code once more;
    what its kernels compute on replay is checked afterwards (run_graph). A step that reads a value
    back to the host (.item(), printing a tensor) cannot be captured: NotCapturable says why. ``watch``, a
    context manager, is entered around the captured call only (the grader's watch for torch's own work).
    """
    c = kept()
    side, main = c["stream_class"](), c["current_stream"]()
    c["wait_stream"](side, main)
    try:
        with c["use_stream"](side):
            for _ in range(warmup):
                step()
        c["wait_stream"](main, side)
        graph = c["graph_class"]()
        with c["graph"](graph), (watch if watch is not None else contextlib.nullcontext()):
            out = step()
    except Exception as e:                           # noqa: BLE001 -- whatever stops the capture is reported
        c["sync"]()
        raise NotCapturable(capture_failure(e, getattr(getattr(step, "__code__", None), "co_filename", ""))) \
            from None
    return (lambda: c["replay"](graph)), out


def capture_failure(e: BaseException, step_file: str = "") -> str:
    """What stopped a capture: the first error (a failed capture raises again when it ends, with the first
    one as its context) and the innermost line that raised it outside torch, Triton, this module and the
    file that made the step (``step_file``): the line of the code being timed."""
    while e.__context__ is not None and e.__context__ is not e:
        e = e.__context__
    ours = tuple(str(Path(m.__file__).parent) for m in (sys.modules.get("torch"), sys.modules.get("triton"))
                 if m is not None and getattr(m, "__file__", None)) + (str(Path(__file__).parent),)
    where = None
    for frame in traceback.extract_tb(e.__traceback__):
        if not frame.filename.startswith(ours) and not frame.filename.startswith("<") \
                and frame.filename != step_file:
            where = f"{Path(frame.filename).name} line {frame.lineno}: {(frame.line or '').strip()[:CODE_LINE_CHARS]}"
    return error_line(e) + (f", raised at {where}" if where else "")


def run_graph(step, static_inputs, fresh, names):
    """(milliseconds per replay, outputs): ``step`` captured while ``static_inputs`` hold decoy values,
    then replayed after ``fresh(static_inputs)`` has filled them with inputs never seen before.

    A submission that does less work while it is captured, or whose captured kernels copy outputs
    it computed before, is caught: only kernels that really run on the replayed inputs give outputs
    that match the reference of those inputs (which the grader checks).
    """
    replay, out = captured(step)
    with kept()["no_grad"]():
        fresh(static_inputs)
    ms = time_cuda(replay)
    out = out if isinstance(out, (tuple, list)) else (out,)
    if len(out) < len(names):
        raise NotCapturable(f"the captured step returned {len(out)} values, not {len(names)}")
    return ms, dict(zip(names, out))


# -- each kernel's time: the profiler ---------------------------------------------------------------------

def kernel_times(step, prepare=None):
    """(outputs, [[name, ms], ...] slowest first): what one call of ``step`` ran on the GPU.

    The profiler records every kernel, copy and fill the step puts on the GPU with the GPU's own
    start and end times, so their sum is the step's GPU time without a CUDA graph: the fallback
    for a step that cannot be captured, and the per-kernel breakdown of the feedback.
    ``prepare()`` runs first (it fills the inputs with values the step has never seen), then the
    L2 cache is flushed, as time_cuda does before each timed call.
    """
    c = kept()
    step()                                            # the first call at a shape may compile or allocate
    if prepare:
        with c["no_grad"]():
            prepare()
    c["zero_"](l2_flush_buffer())
    c["sync"]()
    with c["profile"](activities=[c["cuda_activity"]]) as prof:
        out = step()
        c["sync"]()
    per = {}
    for e in prof.events():
        if str(e.device_type).rsplit(".", 1)[-1] == "CUDA":
            per[e.name] = per.get(e.name, 0.0) + e.time_range.elapsed_us() / 1e3
    return out, sorted(([k, v] for k, v in per.items()), key=lambda kv: -kv[1])
