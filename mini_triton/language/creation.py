"""Programs and the blocks they start from: ``tl.program_id``, ``tl.arange``, ``tl.full``, loops, casts.

A kernel's first lines ask which program it is (``tl.program_id``) and build the blocks of lane
indices and constants it computes with. Shapes are compile-time constants (``tl.constexpr``), and a
block's length must be a power of 2: that is what Triton can lay out across a program's threads.
"""
import builtins

import torch

from .. import dtypes
from .. import frontend, pipeline, runtime
from ..arithmetic import cast as cast_block
from ..blocks import Affine, as_block, check_shape, const_int, loop_index, make_int, scalar, tensor, unwrap
from ..errors import CompilationError

__all__ = ["program_id", "num_programs", "arange", "full", "zeros", "zeros_like", "static_range", "range", "cast"]


def dtype_arg(d):
    """``d`` as a tl dtype (a constexpr is unwrapped), or a TypeError naming what was given."""
    d = unwrap(d)
    if not isinstance(d, dtypes.dtype):
        raise TypeError(f"{runtime.location()}: expected a tl dtype such as tl.float32, got {d!r}")
    return d


def program_id(axis):
    """The index of the running program along grid axis ``axis`` (int32)."""
    axis = const_int(axis, "program_id axis")
    if axis not in (0, 1, 2):
        raise CompilationError("program_id axis must be 0, 1 or 2")
    ch = runtime.current()
    if ch.launch.grid[axis] == 1:
        ch.launch.lone_axes.add(axis)          # every program gets 0 here (races.py names it in a race)
        return scalar(0, dtypes.int32)
    return tensor(ch.program_id(axis), dtypes.int32, ())


def num_programs(axis):
    """The grid size along ``axis`` (int32)."""
    axis = const_int(axis, "num_programs axis")
    return scalar(runtime.current().launch.grid[axis], dtypes.int32)


def arange(start, end):
    """[start, start + 1, ..., end - 1]: ``end - start`` must be a power of 2, both constexpr."""
    start = const_int(start, "tl.arange start")
    end = const_int(end, "tl.arange end")
    n = end - start
    if n <= 0 or n & (n - 1):
        message = (f"{runtime.location()}: tl.arange({start}, {end}) has {n} elements; the number of elements must "
                   f"be a power of 2. Round up with triton.next_power_of_2 and mask the extra lanes.")
        if n <= 0:
            raise CompilationError(message)
        runtime.refuse(message)                    # recorded: the lanes are what the code says
    runtime.current().max_numel = builtins.max(runtime.current().max_numel, n)
    return make_int(dtypes.int32, (n,), Affine(torch.tensor([start], dtype=torch.int64), (1,)))


def full(shape, value, dtype):
    """A block of ``shape`` filled with ``value`` (shared by all programs until written)."""
    shape = check_shape(shape)
    dtype = dtype_arg(dtype)
    value = unwrap(value)
    if isinstance(value, tensor):
        v = cast_block(value, dtype)
        if v.numel != 1:
            raise CompilationError("tl.full needs a scalar value")
        h = v.handle.reshape(v.lead, *([1] * len(shape))).expand(v.lead, *shape)
        return tensor(h, dtype, shape)
    h = torch.tensor(value, dtype=dtypes.storage_dtype(dtype)).reshape(1, *([1] * len(shape)))
    return tensor(h.expand(1, *shape), dtype, shape)


def zeros(shape, dtype):
    """A block of zeros (shared by all programs until written)."""
    return full(shape, 0, dtype)


def zeros_like(input):
    return zeros(input.shape, input.dtype)


def static_range(arg1, arg2=None, step=1):
    """A loop unrolled at compile time: the bounds must be constexpr ints."""
    if arg2 is None:
        arg1, arg2 = 0, arg1
    return builtins.range(const_int(arg1, "static_range bound"), const_int(arg2, "static_range bound"),
                          const_int(step, "static_range step"))


def range(arg1, arg2=None, step=1, num_stages=None, loop_unroll_factor=None, disallow_acc_multi_buffer=False,
          flatten=False, warp_specialize=False):
    """A runtime loop (``tl.range``): like Python's range, the bounds may be runtime scalars.

    The bounds may differ from program to program, as in a persistent (grid-stride) loop
    ``tl.range(pid, n_rows, num_programs)``: programs that make the same number of trips run
    together, each with its own loop variable (a scalar block); programs whose trip counts differ
    are split into groups of equal counts, so most of a grid still runs as one chunk.
    """
    if arg2 is None:
        arg1, arg2 = 0, arg1
    stages = unwrap(num_stages)                      # pipeline.py: the shared memory of the loads it pipelines
    bounds = [as_block(unwrap(b)) for b in (arg1, arg2, step)]
    if all(b.lead == 1 for b in bounds):             # one index for every program: a Python int, a runtime value
        trips = map(loop_index, builtins.range(int(bounds[0]), int(bounds[1]), int(bounds[2])))
        return pipeline.loop(trips, stages) if runtime.CURRENT is not None else trips
    start, stop, stride = torch.broadcast_tensors(*(b.handle.reshape(-1).to(torch.int64) for b in bounds))
    if bool((stride == 0).any()):
        raise ValueError(f"{runtime.location()}: tl.range step must not be zero")
    trips = torch.clamp(-((start - stop) // stride), min=0)        # ceil((stop - start) / step), >= 0
    if bool((trips != trips[0]).any()):
        raise runtime.Divergence(trips)                             # group the programs by trip count
    return pipeline.loop((make_int(dtypes.int32, (), handle=start + i * stride) for i in builtins.range(int(trips[0]))),
                         stages)


def python_range(*args):
    """Python's ``range`` in a kernel: Triton compiles ``for i in range(...)`` as it compiles ``tl.range``, a
    runtime loop whose bounds may differ from program to program (a grid-stride loop, ``range(pid, n_rows,
    num_programs)``), so it runs as :func:`range` does here: programs with the same trip count together."""
    if not 1 <= len(args) <= 3:
        raise TypeError(f"range expected 1 to 3 arguments, got {len(args)}")
    return range(*args)


frontend.BUILTINS["range"] = python_range       # the kernel language's builtin (frontend.py), bound from here


def cast(input, dtype, fp_downcast_rounding=None, bitcast=False):
    """``input`` converted to ``dtype`` (``bitcast=True``: its bits reinterpreted), as ``x.to(dtype)``."""
    return cast_block(input, dtype_arg(dtype), bitcast=bitcast)
