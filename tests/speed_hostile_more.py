"""More hostile submissions against item 10 (GPU speed): tricks on the timing as it ran inside the
submission's own process (rmsnorm_testkit.timing, then in the job's one process), each built as
tests/speed_hostile.py builds its entries: the slow honest ``CONTROL`` plus one trick, which triggers only on
a GPU at the timing shape.

``MORE`` has the shape of ``HOSTILE``: name -> (the trick, what stops it, the source). Besides the ways of
tests/speed_hostile.py: ``unsealed``, the step left a hook, a torch mode or a change to the grader's timing code
behind when it returned; "too slow", the trick gains time but not enough for a part (measured on a GPU,
docs/perf.md). The labels say what stopped each while the timing shared the submission's process; since the
judge's process times the step (autograder/job/judge/timed.py), a trick on the submission's own process changes
nothing that is timed, and the GPU test holds each entry to its control's score either way.
"""
from hostile import edit
from speed_hostile import CHEAP_KERNEL, CONTROL, TIMING_SHAPE, _before_forward, _in_forward

HONEST = '''            for _ in range(REPEAT):
                rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps,
                                         BLOCK=triton.next_power_of_2(N))
'''


def _indented(code):
    return "".join("    " + line if line.strip() else line for line in code.splitlines(True))


# 1. A torch-function mode sees every torch call the grader makes, the kept C methods included: the replay
# computes a cheap y (a copy's time), and the grader's detach() of it, after the timing, runs the real kernels
# on the inputs of the last timed replay first.
FUNCTION_MODE = _in_forward(_before_forward(CONTROL, CHEAP_KERNEL + '''
import contextlib

_PENDING = {}
_MODES = contextlib.ExitStack()
_MODE_ON = []


class Spy(torch.overrides.TorchFunctionMode):
    """Runs the pending work of a tensor when someone detaches it."""
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") == "detach" and args and isinstance(args[0], torch.Tensor):
            work = _PENDING.get(args[0].data_ptr())
            if work is not None:
                work()
        return func(*args, **(kwargs or {}))'''), f'''    if {TIMING_SHAPE}:
        if not _MODE_ON:
            _MODE_ON.append(_MODES.enter_context(Spy()))
        if torch.cuda.is_current_stream_capturing():
            cheap_kernel[(M,)](x2, g, y, N, BLOCK=triton.next_power_of_2(N))

            def work():
{_indented(HONEST)}            _PENDING[y.data_ptr()] = work
            return y.view(x.shape), r
''')

# 2. unittest.mock.patch by a string: the testkit's time_cuda, which the job calls through its module,
# replaced by one that divides every time it measures.
MOCK_PATCH = _in_forward(_before_forward(CONTROL, '''from unittest import mock

_TIMER = mock.patch("rmsnorm_testkit.timing.time_cuda",
                    side_effect=lambda *a, **k: _TIMER.temp_original(*a, **k) / REPEAT)
_STARTED = []'''), f'''    if {TIMING_SHAPE} and not _STARTED:
        _STARTED.append(_TIMER.start())
''')

# 3. pydoc.locate by a string reaches the table of kept functions; its elapsed time is replaced in place.
PYDOC_LOCATE = _in_forward(_before_forward(CONTROL, '''import pydoc

_TABLE = []


def divide_kept_timer():
    table = pydoc.locate("rmsnorm_testkit.timing.CUDA")
    slow = table["elapsed"]
    table.update(elapsed=lambda start, end: slow(start, end) / REPEAT)
    _TABLE.append(table)'''), f'''    if {TIMING_SHAPE} and not _TABLE:
        divide_kept_timer()
''')

# 4. A profile hook sees the grader's speed_inputs return the new inputs of each timed replay (untimed: the
# events are recorded after it): the real kernels run then, and the captured step writes a scratch buffer
# for a copy's time.
PROFILE_HOOK = _in_forward(_before_forward(CONTROL, CHEAP_KERNEL + '''
import sys

_ON_INPUTS = {}


def after_inputs(frame, event, arg):
    """When a function returns the tensors (x, g, dy) a pending work reads, run that work."""
    if event == "return" and isinstance(arg, tuple) and len(arg) == 3 and isinstance(arg[0], torch.Tensor):
        work = _ON_INPUTS.get(arg[0].data_ptr())
        if work is not None:
            work()'''), f'''    if {TIMING_SHAPE} and torch.cuda.is_current_stream_capturing():
        scratch = torch.empty_like(y)
        cheap_kernel[(M,)](x2, g, scratch, N, BLOCK=triton.next_power_of_2(N))

        def work():
{HONEST}        _ON_INPUTS[x2.data_ptr()] = work
        sys.setprofile(after_inputs)
        return y.view(x.shape), r
''')

# 5. torch's fused rms_norm inside a custom op named clone: the grader's watch sees an op it takes for moving
# data, and not the ops inside it (a dispatch mode is off while it handles an op).
CUSTOM_OP = _in_forward(_before_forward(CONTROL, '''@torch.library.custom_op("student_rmsnorm::clone", mutates_args=())
def norm_named_clone(x: torch.Tensor, g: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    y = torch.nn.functional.rms_norm(x, (x.shape[-1],), g, eps)
    r = torch.rsqrt(x.float().pow(2).mean(-1) + eps)
    return y, r


@norm_named_clone.register_fake
def norm_shapes(x, g, eps):
    return torch.empty_like(x), x.new_empty(x.shape[:-1], dtype=torch.float32)'''), f'''    if {TIMING_SHAPE}:
        y, r = torch.ops.student_rmsnorm.clone(x2, g, eps)
        return y.view(x.shape), r
''')

# 6. A counter in GPU memory, bumped by each replay of the captured step: the first DECOY_REPLAYS replays (the
# first round of the timing, its warm-up and its reps) write the cheap y and skip the real kernels; later
# rounds are honest, so the last replay, whose outputs are checked, is right, and the best round is the decoy.
COUNTER = _in_forward(_before_forward(edit(CONTROL, (
    "def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, N, x_stride, y_stride, eps, BLOCK: tl.constexpr):\n"
    "    row = tl.program_id(0).to(tl.int64)\n",
    "def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, N, x_stride, y_stride, eps, BLOCK: tl.constexpr,\n"
    "                       count_ptr=None, DECOY: tl.constexpr = 0):\n"
    "    if DECOY > 0:\n"
    "        if tl.load(count_ptr) <= DECOY:\n"
    "            return\n"
    "    row = tl.program_id(0).to(tl.int64)\n")),
    '''# more replays than the first round takes at a copy's time, fewer than two rounds
DECOY_REPLAYS = 2300
_COUNTERS = {}


@triton.jit
def count_kernel(count_ptr):
    tl.store(count_ptr, tl.load(count_ptr) + 1)


@triton.jit
def decoy_kernel(x_ptr, g_ptr, y_ptr, count_ptr, N, DECOY: tl.constexpr, BLOCK: tl.constexpr):
    if tl.load(count_ptr) <= DECOY:
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
        g = tl.load(g_ptr + cols, mask=mask, other=0.0)
        tl.store(y_ptr + row * N + cols, x * g, mask=mask)'''), f'''    if {TIMING_SHAPE}:
        key = (x2.data_ptr(), x.dtype)
        if not torch.cuda.is_current_stream_capturing():
            _COUNTERS[key] = torch.zeros(1, dtype=torch.int32, device=x.device)   # a warm-up call: not captured
        else:
            count = _COUNTERS[key]
            count_kernel[(1,)](count)
            decoy_kernel[(M,)](x2, g, y, count, N, DECOY=DECOY_REPLAYS, BLOCK=triton.next_power_of_2(N))
            for _ in range(REPEAT):
                rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps,
                                         BLOCK=triton.next_power_of_2(N), count_ptr=count, DECOY=DECOY_REPLAYS)
            return y.view(x.shape), r
''')

# 7. torch's rms_norm in row blocks of an eighth: each op reads under the M x N / 4 elements the watch
# counts as work, so no op of the captured step is found.
CHUNKED = _in_forward(CONTROL, f'''    if {TIMING_SHAPE}:
        for rows in range(0, M, M // 8):
            part = x2[rows:rows + M // 8]
            y[rows:rows + M // 8] = torch.nn.functional.rms_norm(part, (N,), g, eps)
            r[rows:rows + M // 8] = torch.rsqrt(part.float().pow(2).mean(-1) + eps)
        return y.view(x.shape), r
''')

# name: (the trick, what stops it, the source)
MORE = {
    "function_mode_detach": ("a TorchFunctionMode sees the grader's kept detach after the timing and runs the "
                             "real kernels then; the replay computed a cheap y",
                             "unsealed (a torch mode left active)", FUNCTION_MODE),
    "mock_patched_timer": ("unittest.mock.patch, by a string, on the testkit's time_cuda: every time divided",
                           "unsealed (the timing code changed)", MOCK_PATCH),
    "pydoc_located_table": ("pydoc.locate, by a string, reaches the kept table; its elapsed time divided",
                            "unsealed (the kept functions changed)", PYDOC_LOCATE),
    "profile_hook_prepare": ("a sys.setprofile hook runs the real kernels when the grader's untimed input "
                             "refill returns; the replay writes a scratch buffer",
                             "unsealed (a profile hook left)", PROFILE_HOOK),
    "custom_op_named_clone": ("F.rms_norm inside a torch.library custom op named clone, which the watch takes "
                              "for moving data", "too slow (torch's norm: 33% of copy where 75% is needed)",
                              CUSTOM_OP),
    "device_counter_decoy": ("a GPU counter makes the first round's replays cheap and wrong, later rounds "
                             "honest: the best round is timed, the last replay checked",
                             "compare, or too slow (the cheap rounds: 42% of copy)", COUNTER),
    "chunked_library": ("F.rms_norm over eighths of the rows: each op reads less than the watch's limit",
                        "too slow (23% of copy)", CHUNKED),
}
