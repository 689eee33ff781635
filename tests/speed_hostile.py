"""Hostile submissions against item 10 (GPU speed), each built on one slow but honest control: the tricks
kernel leaderboards are attacked with, tried on this grader.

``CONTROL`` is tests/corpus/simple.py whose wrappers launch each kernel ``REPEAT`` times: correct, and
about twelve times too slow, so it earns 0 of item 10's 10 points. Every entry of ``HOSTILE`` is that
control plus one trick that would make the timed step look fast; ``STOPPED_BY`` says what stops it:

- ``scan``: the static scan refuses the file (it earns nothing at all);
- ``plain``: an output that is not a plain torch.Tensor is refused before any of its code runs;
- ``capture``: the step cannot be captured in a CUDA graph, and a step that cannot be captured earns
  nothing in its part;
- ``watch``: torch computed over M x N elements while the step was captured;
- ``compare``: the replay ran on inputs from a secret seed drawn after the capture, and every element
  of its outputs is compared, so outputs computed ahead, kept from earlier, or right only at some rows
  fail;
- ``inputs``: the step changed its inputs.

The labels say what stopped each while the timing shared the submission's process; the judge's process now times
the step from its recipe (autograder/job/judge/timed.py), which no trick on the submission's own process reaches.
tests/test_autograder_speed_hostile.py grades each on a GPU (item 10 only) and holds it to the control's score;
on the CPU, tests/test_autograder_hostile.py checks which the scan refuses, and grades the lazy output.
"""
from hostile import SIMPLE, after_imports, edit

REPEAT_LINE = "REPEAT = 12                      # each kernel launched this many times: correct, and slow\n"
FWD_LAUNCH = ("    rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps, "
              "BLOCK=triton.next_power_of_2(N))\n")
BWD_LAUNCH = ("    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N, x2.stride(0), dy2.stride(0),\n"
              "                             BLOCK=triton.next_power_of_2(N))\n")
FWD_RETURN = "    return y.view(x.shape), r\n"
FWD_START = "def rmsnorm_forward(x, g, eps=1e-5):\n"
TIMING_SHAPE = "x.is_cuda and tuple(x.shape) == (16384, 4096)"


def _repeated(launch):
    return "    for _ in range(REPEAT):\n" + "".join("    " + line + "\n" for line in launch.splitlines())


CONTROL = after_imports(edit(SIMPLE, (FWD_LAUNCH, _repeated(FWD_LAUNCH)), (BWD_LAUNCH, _repeated(BWD_LAUNCH))),
                        REPEAT_LINE)

# y = x * g for every row: one read of x, one write of y (a copy's time), wrong everywhere
CHEAP_KERNEL = '''
@triton.jit
def cheap_kernel(x_ptr, g_ptr, y_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * N + cols, x * g, mask=mask)
'''


def _before_forward(src, code):
    return edit(src, (FWD_START, code + "\n\n" + FWD_START))


def _in_forward(src, code):
    """``code`` at the top of rmsnorm_forward, after y and r exist (it may return early)."""
    marker = "    r = torch.empty(M, dtype=torch.float32, device=x.device)\n"
    return edit(src, (marker, marker + code))


LAZY = _in_forward(_before_forward(CONTROL, '''_PENDING = {}


class LazyY(torch.Tensor):
    """y whose kernels run only when it is first read: detach() is what a grader calls after timing."""
    def detach(self):
        work = _PENDING.pop(self.data_ptr(), None)
        if work is not None:
            work()
        return super().detach()'''), f'''    if {TIMING_SHAPE}:
        def work():
            for _ in range(REPEAT):
                rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps,
                                         BLOCK=triton.next_power_of_2(N))
        lazy = y.as_subclass(LazyY)
        _PENDING[lazy.data_ptr()] = work
        return lazy.view(x.shape), r
''')

SYNC = f'''    if {TIMING_SHAPE} and float(x[0, 0]) != float(x[0, 0]):   # a host read: not capturable
        raise ValueError("NaN in x")
'''
SYNC_ONLY = _in_forward(CONTROL, SYNC)
SYNC_PATCHED_PROFILER = _in_forward(_before_forward(CONTROL, '''Span = torch.autograd.profiler_util.Interval
_slow = Span.elapsed_us
Span.elapsed_us = lambda self: _slow(self) / REPEAT     # the profiler's durations, a twelfth'''), SYNC)

# The seeds the grader used to draw its timing inputs from (a constant plus fixed offsets), and the
# recipe of those inputs (rmsnorm_testkit.timing.speed_inputs, shipped with the starter): y for each, computed
# at the first call, then a lookup kernel copies the y whose first elements match x's.
PREDICTED_SEED = _in_forward(_before_forward(edit(CONTROL, (
    "def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, N, x_stride, y_stride, eps, BLOCK: tl.constexpr):\n"
    "    row = tl.program_id(0).to(tl.int64)\n",
    "def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, N, x_stride, y_stride, eps, BLOCK: tl.constexpr,\n"
    "                       skip_ptr=None, SKIP: tl.constexpr = False):\n"
    "    if SKIP:\n"
    "        if tl.load(skip_ptr) != 0:\n"
    "            return\n"
    "    row = tl.program_id(0).to(tl.int64)\n")), '''PREDICTED = (2024, 2025, 2026, 2027)
_TABLE = {}


@triton.jit
def lookup_kernel(x_ptr, keys_ptr, table_ptr, y_ptr, hit_ptr, n_keys, numel, BLOCK: tl.constexpr):
    eight = tl.arange(0, 8)
    first = tl.load(x_ptr + eight).to(tl.float32)
    at = tl.zeros((8,), dtype=tl.int64) - 1
    for k in range(n_keys):
        key = tl.load(keys_ptr + k * 8 + eight)
        same = tl.sum((key == first).to(tl.int32), axis=0) == 8
        at = tl.where(same, k, at)
    hit = tl.max(at, axis=0)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = (offs < numel) & (hit >= 0)
    tl.store(y_ptr + offs, tl.load(table_ptr + hit * numel + offs, mask=m, other=0.0), mask=m)
    if tl.program_id(0) == 0:
        tl.store(hit_ptr, (hit >= 0).to(tl.int32))


def predicted(shape, dtype, device):
    if (shape, dtype) not in _TABLE:
        M, N = shape
        keys, ys = [], []
        for seed in PREDICTED:
            gen = torch.Generator(device=device)
            gen.manual_seed(seed)
            xs = torch.randn(M, N, generator=gen, device=device).to(dtype)
            gs = (torch.rand(N, generator=gen, device=device) + 0.5).to(dtype)
            xf = xs.float()
            ys.append((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5) * gs.float()).to(dtype))
            keys.append(xs[0, :8].float())
        _TABLE[shape, dtype] = torch.stack(keys).contiguous(), torch.stack(ys).contiguous()
    return _TABLE[shape, dtype]'''), f'''    if {TIMING_SHAPE}:
        keys, table = predicted(tuple(x.shape), x.dtype, x.device)
        hit = torch.empty(1, dtype=torch.int32, device=x.device)
        lookup_kernel[(triton.cdiv(M * N, 4096),)](x2, keys, table, y, hit, len(PREDICTED), M * N, BLOCK=4096)
        for _ in range(REPEAT):                 # the honest path, skipped on the GPU when the lookup hit
            rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps,
                                     BLOCK=triton.next_power_of_2(N), skip_ptr=hit, SKIP=True)
        return y.view(x.shape), r
''')

# The rows the grader compared (its feedback printed them), and every tenth row, computed; the rest cheap.
SAMPLED_ROWS = _in_forward(_before_forward(CONTROL, CHEAP_KERNEL + '''
CHECKED_ROWS = [0, 1, 777, 4095, 8191, 12000, 16382, 16383]
_ROWS = {}


@triton.jit
def rows_kernel(x_ptr, g_ptr, y_ptr, r_ptr, rows_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.load(rows_ptr + tl.program_id(0)).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(y_ptr + row * N + cols, x * r * g, mask=mask)
    tl.store(r_ptr + row, r)'''), f'''    if {TIMING_SHAPE}:
        if x.device not in _ROWS:
            _ROWS[x.device] = torch.cat([torch.arange(0, M, 10), torch.tensor(CHECKED_ROWS)]).to(x.device)
        rows = _ROWS[x.device]
        cheap_kernel[(M,)](x2, g, y, N, BLOCK=triton.next_power_of_2(N))
        rows_kernel[(rows.numel(),)](x2, g, y, r, rows, N, eps, BLOCK=triton.next_power_of_2(N))
        return y.view(x.shape), r
''')

LIBRARY_AT_TIMING_SHAPE = _in_forward(CONTROL, f'''    if {TIMING_SHAPE}:
        y = torch.nn.functional.rms_norm(x2, (N,), g, eps)
        r = torch.rsqrt(x2.float().pow(2).mean(-1) + eps)
        return y.view(x.shape), r
''')

SIDE_STREAM = _in_forward(_before_forward(CONTROL, "_SIDE = {}"), f'''    if {TIMING_SHAPE}:
        side = _SIDE.setdefault(x.device, torch.cuda.Stream(x.device))
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):           # the work forked off, never joined back
            for _ in range(REPEAT):
                rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps,
                                         BLOCK=triton.next_power_of_2(N))
        return y.view(x.shape), r
''')

def _cached(key):
    """The control whose forward, at the timing shape, returns what it returned before for the same ``key``."""
    return _in_forward(_before_forward(CONTROL, "_SEEN = {}"), f'''    if {TIMING_SHAPE}:
        key = {key}
        if key in _SEEN:
            return _SEEN[key]
        for _ in range(REPEAT):
            rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps,
                                     BLOCK=triton.next_power_of_2(N))
        _SEEN[key] = y.view(x.shape), r
        return _SEEN[key]
''')


CACHE_BY_POINTER = _cached("(x2.data_ptr(), g.data_ptr(), x.dtype)")
CACHE_BY_HASH = _cached("(float(x2[0, :64].float().sum()), float(x2[-1, -64:].float().sum()), x.dtype)")

# A thread computes the real y after the timed step has returned a cheap one.
POOL = "from concurrent.futures import ThreadPoolExecutor\n\n_POOL = ThreadPoolExecutor(1)\n"
THREAD = _in_forward(_before_forward(CONTROL, POOL + CHEAP_KERNEL), f'''    if {TIMING_SHAPE}:
        cheap_kernel[(M,)](x2, g, y, N, BLOCK=triton.next_power_of_2(N))

        def later():
            for _ in range(REPEAT):
                rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps,
                                         BLOCK=triton.next_power_of_2(N))
        _POOL.submit(later)
        return y.view(x.shape), r
''')

CAPTURE_ONLY_CHEAP = _in_forward(_before_forward(CONTROL, CHEAP_KERNEL), f'''    if {TIMING_SHAPE} and \\
            torch.cuda.is_current_stream_capturing():
        cheap_kernel[(M,)](x2, g, y, N, BLOCK=triton.next_power_of_2(N))   # what a CUDA graph will replay
        return y.view(x.shape), r
''')

# y written over x: one launch, no buffer of its own.
WRITES_INPUTS = _in_forward(CONTROL, f'''    if {TIMING_SHAPE}:
        rmsnorm_fwd_kernel[(M,)](x2, g, x2, r, N, x2.stride(0), x2.stride(0), eps,
                                 BLOCK=triton.next_power_of_2(N))
        return x2.view(x.shape), r
''')

PATCHED_TIMER = _before_forward(CONTROL, '''Event = torch.cuda.Event
_measured = Event.elapsed_time
Event.elapsed_time = lambda self, end: _measured(self, end) / REPEAT''')

PATCHED_REPLAY = _before_forward(CONTROL, '''Graph = torch.cuda.CUDAGraph
_replay = Graph.replay
Graph.replay = lambda self: None                       # replays nothing: a timed replay takes no time''')

# name: (the trick, what stops it, the source)
HOSTILE = {
    "lazy_output": ("y is a tensor subclass whose kernels run when the grader reads it, after the timing",
                    "plain", LAZY),
    "sync_patched_profiler": ("a host read makes the step uncapturable, and the profiler's durations are divided",
                              "scan", SYNC_PATCHED_PROFILER),
    "sync_only": ("a host read makes the step uncapturable (the old fallback timed its kernels alone)", "capture",
                  SYNC_ONLY),
    "predicted_seed": ("y computed ahead for the seeds the grader used to draw, then looked up and copied",
                       "compare", PREDICTED_SEED),
    "sampled_rows": ("the rows the feedback named and every tenth row computed, the rest cheap", "compare",
                     SAMPLED_ROWS),
    "library_at_timing_shape": ("F.rms_norm at the timing shape only", "watch", LIBRARY_AT_TIMING_SHAPE),
    "side_stream": ("the kernels on a side stream the current stream never waits for", "capture", SIDE_STREAM),
    "cache_by_pointer": ("y kept from an earlier call on the same memory", "compare", CACHE_BY_POINTER),
    "cache_by_hash": ("y kept from an earlier call with the same first and last elements", "capture",
                      CACHE_BY_HASH),
    "thread": ("a cheap y returned, the real one computed later by a thread", "scan", THREAD),
    "capture_only_cheap": ("a cheap kernel while a CUDA graph is captured, the real ones otherwise", "compare",
                           CAPTURE_ONLY_CHEAP),
    "writes_inputs": ("y written over x", "inputs", WRITES_INPUTS),
    "patched_timer": ("CUDA events' elapsed time divided, through another name", "scan", PATCHED_TIMER),
    "patched_replay": ("a CUDA graph's replay that does nothing, through another name", "scan", PATCHED_REPLAY),
}
