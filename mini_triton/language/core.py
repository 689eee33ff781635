"""``triton.language`` (tl): the operations a kernel is written in.

Each function here works on blocks (blocks.py) and does what the Triton op
of the same name does; where the simulator differs from a GPU the docstring
says so. Anything not listed raises ``NotImplementedError`` with its name.
"""
from __future__ import annotations

import builtins
import difflib as _difflib

import torch

from .. import dtypes as D
from .. import descriptors, memory, runtime
from ..arithmetic import binary, cast, full_rank, unary_op
from ..blocks import Affine, as_block, broadcast_shape, full_handle, make_int, scalar, tensor
from ..blocks import constexpr  # noqa: F401 -- tl.constexpr
from ..blocks import check_shape as _check_shape
from ..blocks import const_int as _const_int
from ..blocks import is_literal as _is_literal
from ..blocks import unwrap as _unwrap
from ..shapes import expand_dims, join, reshape, split, trans  # noqa: F401 -- tl.expand_dims, tl.join...
from ..errors import CompilationError, DeviceAssertionError
from . import names as _names

# the types, under Triton's names
dtype = D.dtype
pointer_type = D.pointer_type
int1, int8, int16, int32, int64 = D.int1, D.int8, D.int16, D.int32, D.int64
uint8, uint16, uint32, uint64 = D.uint8, D.uint16, D.uint32, D.uint64
float16, bfloat16, float32, float64 = D.float16, D.bfloat16, D.float32, D.float64


def _dtype_arg(d):
    d = _unwrap(d)
    if not isinstance(d, D.dtype):
        raise TypeError(f"{runtime.location()}: expected a tl dtype such as tl.float32, got {d!r}")
    return d


def _dim(axis, ndim):
    axis = _const_int(axis, "axis")
    if not -ndim <= axis < ndim:
        raise CompilationError(f"{runtime.location()}: axis {axis} is out of range for a {ndim}-D block")
    return axis % ndim


# ---------------------------------------------------------------------------
# programs and block creation
# ---------------------------------------------------------------------------
def program_id(axis):
    """The index of the running program along grid axis ``axis`` (int32)."""
    axis = _const_int(axis, "program_id axis")
    if axis not in (0, 1, 2):
        raise CompilationError("program_id axis must be 0, 1 or 2")
    ch = runtime.current()
    if ch.launch.grid[axis] == 1:
        return scalar(0, D.int32)
    return tensor(ch.program_id(axis), D.int32, ())


def num_programs(axis):
    """The grid size along ``axis`` (int32)."""
    axis = _const_int(axis, "num_programs axis")
    return scalar(runtime.current().launch.grid[axis], D.int32)


def arange(start, end):
    """[start, start + 1, ..., end - 1]: ``end - start`` must be a power of 2, both constexpr."""
    start = _const_int(start, "tl.arange start")
    end = _const_int(end, "tl.arange end")
    n = end - start
    if n <= 0 or n & (n - 1):
        raise CompilationError(f"{runtime.location()}: tl.arange({start}, {end}) has {n} elements; "
                               f"the number of elements must be a power of 2. Round up with "
                               f"triton.next_power_of_2 and mask the extra lanes.")
    runtime.current().max_numel = builtins.max(runtime.current().max_numel, n)
    return make_int(D.int32, (n,), Affine(torch.tensor([start], dtype=torch.int64), (1,)))


def full(shape, value, dtype):
    shape = _check_shape(shape)
    dtype = _dtype_arg(dtype)
    value = _unwrap(value)
    if isinstance(value, tensor):
        v = cast(value, dtype)
        if v.numel != 1:
            raise CompilationError("tl.full needs a scalar value")
        h = v.handle.reshape(v.lead, *([1] * len(shape))).expand(v.lead, *shape)
        return tensor(h, dtype, shape)
    h = torch.tensor(value, dtype=D.storage_dtype(dtype)).reshape(1, *([1] * len(shape)))
    return tensor(h.expand(1, *shape), dtype, shape)


def zeros(shape, dtype):
    """A block of zeros (shared by all programs until written)."""
    return full(shape, 0, dtype)


def zeros_like(input):
    return zeros(input.shape, input.dtype)


def full_like(input, value, dtype=None):
    return full(input.shape, value, dtype or input.dtype)


def static_range(arg1, arg2=None, step=1):
    """A loop unrolled at compile time: the bounds must be constexpr ints."""
    if arg2 is None:
        arg1, arg2 = 0, arg1
    return builtins.range(_const_int(arg1, "static_range bound"), _const_int(arg2, "static_range bound"),
                          _const_int(step, "static_range step"))


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
    bounds = [as_block(_unwrap(b)) for b in (arg1, arg2, step)]
    if all(b.lead == 1 for b in bounds):
        return builtins.range(int(bounds[0]), int(bounds[1]), int(bounds[2]))
    start, stop, stride = torch.broadcast_tensors(*(b.handle.reshape(-1).to(torch.int64) for b in bounds))
    if bool((stride == 0).any()):
        raise ValueError(f"{runtime.location()}: tl.range step must not be zero")
    trips = torch.clamp(-((start - stop) // stride), min=0)        # ceil((stop - start) / step), >= 0
    if bool((trips != trips[0]).any()):
        raise runtime.Divergence(trips)                             # group the programs by trip count
    return (make_int(D.int32, (), handle=start + i * stride) for i in builtins.range(int(trips[0])))


# ---------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------
load = memory.load
store = memory.store


def make_tensor_descriptor(base, shape, strides, block_shape, padding_option="zero"):
    """A descriptor of the tensor at ``base``: ``desc.load([i, j])`` reads the block of ``block_shape``
    at those offsets (zeros outside ``shape``), ``desc.store([i, j], value)`` writes its inside part."""
    return descriptors.TensorDescriptor(base, shape, strides, block_shape, padding_option)


def atomic_add(pointer, val, mask=None, sem=None, scope=None):
    """Atomically add ``val``; returns each lane's old value. Exempt from race checks."""
    return memory.atomic("add", pointer, val, mask)


def atomic_max(pointer, val, mask=None, sem=None, scope=None):
    return memory.atomic("max", pointer, val, mask)


def atomic_min(pointer, val, mask=None, sem=None, scope=None):
    return memory.atomic("min", pointer, val, mask)


def atomic_xchg(pointer, val, mask=None, sem=None, scope=None):
    return memory.atomic("xchg", pointer, val, mask)


def atomic_and(pointer, val, mask=None, sem=None, scope=None):
    return memory.atomic("and", pointer, val, mask)


def atomic_or(pointer, val, mask=None, sem=None, scope=None):
    return memory.atomic("or", pointer, val, mask)


def atomic_xor(pointer, val, mask=None, sem=None, scope=None):
    return memory.atomic("xor", pointer, val, mask)


def atomic_cas(pointer, cmp, val, sem=None, scope=None):
    """Compare-and-swap: store ``val`` where memory equals ``cmp``; returns the old value."""
    return memory.atomic("cas", pointer, val, None, cmp=cmp)


# ---------------------------------------------------------------------------
# element-wise math
# ---------------------------------------------------------------------------
def _float_fn(torch_fn, name):
    def f(x, *args, **kwargs):
        return unary_op(torch_fn, x, name=name)
    f.__name__ = name
    f.__doc__ = f"tl.{name}: computed exactly (correctly rounded) by torch; GPUs may use a fast approximation."
    return f


exp = _float_fn(torch.exp, "exp")
exp2 = _float_fn(torch.exp2, "exp2")
log = _float_fn(torch.log, "log")
log2 = _float_fn(torch.log2, "log2")
sqrt = _float_fn(torch.sqrt, "sqrt")
sqrt_rn = _float_fn(torch.sqrt, "sqrt_rn")
rsqrt = _float_fn(torch.rsqrt, "rsqrt")
sin = _float_fn(torch.sin, "sin")
cos = _float_fn(torch.cos, "cos")
erf = _float_fn(torch.erf, "erf")
floor = _float_fn(torch.floor, "floor")
ceil = _float_fn(torch.ceil, "ceil")
sigmoid = _float_fn(torch.sigmoid, "sigmoid")
tanh = _float_fn(torch.tanh, "tanh")


def abs(x):
    x = as_block(x)
    if x.dtype.is_floating():
        return tensor(torch.abs(x.handle), x.dtype, x.shape)
    return make_int(x.dtype, x.shape, handle=torch.abs(x.handle)) if not x.dtype.is_bool() else x


def _promoted(*vals):
    """Promote operands to one type by Triton's rules; returns (dtype, shape)."""
    blocks = [as_block(v) for v in vals]
    lit = [_is_literal(v) for v in vals]
    ty, ty_lit = blocks[0].dtype, lit[0]
    for b, b_lit in zip(blocks[1:], lit[1:]):
        ty = D.binary_result_type(ty, ty_lit, b.dtype, b_lit)
        ty_lit = ty_lit and b_lit
    shape = ()
    for b in blocks:
        shape = broadcast_shape(shape, b.shape)
    return blocks, ty, shape


def _result(h, ty, shape):
    if ty.is_int() and not ty.is_bool():
        return make_int(ty, shape, handle=h)
    return tensor(h, ty, shape)


def maximum(x, y, propagate_nan=None):
    """Element-wise max. Like Triton's default, a NaN loses to a number."""
    (a, b), ty, shape = _promoted(x, y)
    fn = torch.fmax if ty.is_floating() else torch.maximum
    return _result(fn(full_rank(a, ty, shape), full_rank(b, ty, shape)), ty, shape)


def minimum(x, y, propagate_nan=None):
    (a, b), ty, shape = _promoted(x, y)
    fn = torch.fmin if ty.is_floating() else torch.minimum
    return _result(fn(full_rank(a, ty, shape), full_rank(b, ty, shape)), ty, shape)


def clamp(x, min, max, propagate_nan=None):
    return minimum(maximum(x, min), max)


def where(condition, x, y):
    """Per lane: x where condition is true, else y."""
    c = as_block(condition)
    if not c.dtype.is_bool():
        c = c != 0
    (a, b), ty, shape = _promoted(x, y)
    shape = broadcast_shape(shape, c.shape)
    h = torch.where(full_rank(c, D.int1, shape), full_rank(a, ty, shape), full_rank(b, ty, shape))
    return _result(h, ty, shape)


def fma(x, y, z):
    return x * y + z


def div_rn(x, y):
    return x / y


def fdiv(x, y, ieee_rounding=False):
    return x / y


def cdiv(x, div):
    """Ceiling division of integers: (x + div - 1) // div."""
    if not isinstance(x, tensor) and not isinstance(div, tensor):
        return (_unwrap(x) + _unwrap(div) - 1) // _unwrap(div)
    return (x + div - 1) // div


def cast_(input, dtype, fp_downcast_rounding=None, bitcast=False):
    return cast(input, _dtype_arg(dtype), bitcast=bitcast)


# ---------------------------------------------------------------------------
# reductions and scans
# ---------------------------------------------------------------------------
def _reduce_setup(x, axis):
    x = as_block(x)
    if not x.shape:
        raise CompilationError(f"{runtime.location()}: cannot reduce a scalar")
    if axis is None:
        h = x.handle.reshape(x.lead, -1)
        return x, h, 1, ()
    ax = _dim(axis, len(x.shape))
    return x, x.handle, ax + 1, x.shape[:ax] + x.shape[ax + 1:]


def _keep(shape_in, axis, out_shape, keep_dims):
    if not keep_dims:
        return out_shape
    if axis is None:
        return (1,) * len(shape_in)
    ax = _dim(axis, len(shape_in))
    return shape_in[:ax] + (1,) + shape_in[ax + 1:]


def _sum_type(d):
    if d.is_bool() or (d.kind in ("int", "uint") and d.primitive_bitwidth < 32):
        return D.int32 if d.kind != "uint" else D.uint32
    return d


def sum(input, axis=None, keep_dims=False, dtype=None):
    """Sum along ``axis``, in the input's type as Triton does (small ints in int32): fp32 blocks add
    in fp32, and fp16/bf16 blocks in fp16/bf16, as a GPU does it (see _sum_16bit). Convert to fp32
    first (``x.to(tl.float32)``) to sum 16-bit values accurately."""
    x, h, dim, shape = _reduce_setup(input, axis)
    out_ty = _dtype_arg(dtype) if dtype is not None else _sum_type(x.dtype)
    if out_ty.is_floating() and out_ty.primitive_bitwidth < 32:
        r = _sum_16bit(h.to(out_ty.torch), dim, out_ty, runtime.current().launch.num_warps)
    elif out_ty.is_floating():
        acc = torch.float64 if out_ty is D.float64 else torch.float32
        r = h.to(acc).sum(dim).to(out_ty.torch)
    else:
        r = h.to(torch.int64).sum(dim)
    shape = _keep(x.shape, axis, shape, keep_dims)
    return _result(r.reshape(r.shape[0], *shape), out_ty, shape)


def _sum_16bit(h, dim, ty, num_warps):
    """A sum in fp16/bf16 as a GPU computes it: the 32 * num_warps threads of a program each add up
    their share of the elements one after another, rounding to 16 bits after every addition, then
    the threads' partial sums are added pairwise. A long row loses most of its small terms to the
    rounding of a large running sum: that is why kernels convert to fp32 before tl.sum."""
    v = h.movedim(dim, -1).to(torch.float32)
    n = v.shape[-1]
    threads = builtins.min(n, 32 * num_warps)
    v = v.reshape(*v.shape[:-1], n // threads, threads)        # thread t holds elements t, t + threads, ...
    acc = v[..., 0, :]
    for i in builtins.range(1, n // threads):
        acc = (acc + v[..., i, :]).to(ty.torch).to(torch.float32)
    while acc.shape[-1] > 1:
        half = acc.shape[-1] // 2
        acc = (acc[..., :half] + acc[..., half:]).to(ty.torch).to(torch.float32)
    return acc[..., 0].to(ty.torch)


def _minmax(input, axis, keep_dims, return_indices, which):
    x, h, dim, shape = _reduce_setup(input, axis)
    if x.dtype.is_floating() and x.dtype.primitive_bitwidth < 32:
        hv = h.float()
    else:
        hv = h
    vals, idx = (torch.max if which == "max" else torch.min)(hv, dim)
    shape_k = _keep(x.shape, axis, shape, keep_dims)
    v = _result(vals.to(h.dtype).reshape(vals.shape[0], *shape_k), x.dtype, shape_k)
    if return_indices:
        return v, make_int(D.int32, shape_k, handle=idx.reshape(idx.shape[0], *shape_k))
    return v


def max(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    """Maximum along ``axis`` (and its index with return_indices=True)."""
    return _minmax(input, axis, keep_dims, return_indices, "max")


def min(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    return _minmax(input, axis, keep_dims, return_indices, "min")


def argmax(input, axis, tie_break_left=True, keep_dims=False):
    """Index of the maximum along ``axis`` (the first one on ties)."""
    return _minmax(input, axis, keep_dims, True, "max")[1]


def argmin(input, axis, tie_break_left=True, keep_dims=False):
    return _minmax(input, axis, keep_dims, True, "min")[1]


def _scan(input, axis, reverse, fn):
    """A prefix scan in the input's type; fp16/bf16 scans round to 16 bits at every step, as on a GPU."""
    x = as_block(input)
    ax = _dim(axis, len(x.shape)) + 1
    h = x.handle
    out_ty = _sum_type(x.dtype)
    if out_ty.is_floating():
        h = h.to(torch.float64 if out_ty is D.float64 else torch.float32)
    else:
        h = h.to(torch.int64)
    if reverse:
        h = h.flip(ax)
    if out_ty.is_floating() and out_ty.primitive_bitwidth < 32:
        r = _scan_16bit(h, ax, out_ty, torch.add if fn is torch.cumsum else torch.mul)
    else:
        r = fn(h, ax)
    if reverse:
        r = r.flip(ax)
    return _result(r.to(out_ty.torch) if out_ty.is_floating() else r, out_ty, x.shape)


def _scan_16bit(h, ax, ty, op):
    out = h.clone()
    for i in builtins.range(1, h.shape[ax]):
        step = op(out.select(ax, i - 1), h.select(ax, i)).to(ty.torch).to(torch.float32)
        out.select(ax, i).copy_(step)
    return out


def cumsum(input, axis=0, reverse=False, dtype=None):
    """Inclusive prefix sum along ``axis``."""
    return _scan(input, axis, reverse, torch.cumsum)


def cumprod(input, axis=0, reverse=False):
    return _scan(input, axis, reverse, torch.cumprod)


def xor_sum(input, axis=None, keep_dims=False):
    raise unsupported("xor_sum")


# ---------------------------------------------------------------------------
# shapes
# ---------------------------------------------------------------------------
view = reshape


def ravel(x):
    return reshape(x, (as_block(x).numel,))


permute = trans


def broadcast_to(input, *shape):
    x = as_block(input)
    if len(shape) == 1 and isinstance(_unwrap(shape[0]), (tuple, list)):
        shape = tuple(_unwrap(shape[0]))
    shape = tuple(_const_int(s, "broadcast_to shape") for s in shape)
    if broadcast_shape(x.shape, shape) != shape:
        raise CompilationError(f"{runtime.location()}: cannot broadcast {list(x.shape)} to {list(shape)}")
    return tensor(full_handle(x, shape), x.dtype, shape, buf=x.buf)


def broadcast(input, other):
    a, b = as_block(input), as_block(other)
    shape = broadcast_shape(a.shape, b.shape)
    return broadcast_to(a, shape), broadcast_to(b, shape)


# ---------------------------------------------------------------------------
# matrix multiply
# ---------------------------------------------------------------------------
def _round_tf32(h: torch.Tensor) -> torch.Tensor:
    """Round fp32 values to tf32 (10 mantissa bits), nearest-even, as tensor cores do."""
    bits = h.contiguous().view(torch.int32).to(torch.int64)
    lsb = (bits >> 13) & 1
    bits = (bits + 0xFFF + lsb) & ~0x1FFF
    bits = torch.where(torch.isfinite(h), bits, h.contiguous().view(torch.int32).to(torch.int64))
    return ((bits + 2**31) % 2**32 - 2**31).to(torch.int32).view(torch.float32)


def dot(input, other, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        out_dtype=float32):
    """Matrix product of two blocks (M, K) @ (K, N) on the tensor cores.

    Like Triton, M, N and K must be at least 16, fp32 inputs use tf32 unless
    ``input_precision="ieee"``, and 16-bit inputs accumulate in fp32.
    """
    a, b = as_block(input), as_block(other)
    if len(a.shape) not in (2, 3) or len(b.shape) != len(a.shape):
        raise CompilationError(f"{runtime.location()}: tl.dot needs two 2-D (or 3-D) blocks, got "
                               f"{list(a.shape)} and {list(b.shape)}")
    if a.shape[-1] != b.shape[-2]:
        raise CompilationError(f"{runtime.location()}: tl.dot shapes {list(a.shape)} @ {list(b.shape)} "
                               f"do not match")
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    if builtins.min(M, N, K) < 16:
        raise CompilationError(f"{runtime.location()}: tl.dot needs every dimension ≥ 16 (got M={M}, "
                               f"N={N}, K={K}); pad the blocks to 16")
    if a.dtype is not b.dtype:
        raise CompilationError(f"{runtime.location()}: tl.dot operands must have the same dtype, got "
                               f"{a.dtype!r} and {b.dtype!r}")
    out_dtype = _dtype_arg(out_dtype)
    if a.dtype.is_int():
        out_dtype = D.int32
        r = torch.matmul(a.handle.to(torch.float64), b.handle.to(torch.float64)).to(torch.int64)
    else:
        prec = input_precision or ("ieee" if allow_tf32 is False else "tf32")
        ha, hb = a.handle.to(torch.float32), b.handle.to(torch.float32)
        if a.dtype is D.float32 and prec == "tf32":
            ha, hb = _round_tf32(ha), _round_tf32(hb)
        if a.dtype is D.float64:
            ha, hb = a.handle, b.handle
        r = torch.matmul(ha, hb)
    shape = a.shape[:-1] + (N,)
    out = _result(r.to(D.storage_dtype(out_dtype)), out_dtype, shape)
    if acc is not None:
        out = binary(as_block(acc), out, "add")
    return out


# ---------------------------------------------------------------------------
# debugging and compiler hints
# ---------------------------------------------------------------------------
def device_print(prefix, *args, hex=False):
    """Print each program's values (like printf from every GPU thread)."""
    ch = runtime.current()
    for i, pid in enumerate(ch.pids.tolist()):
        parts = []
        for a in args:
            a = as_block(a)
            h = a.handle[i if a.lead > 1 else 0]
            parts.append(str(h.tolist()))
        print(f"pid {ch.launch.pid_tuple(pid)} {prefix} {' '.join(parts)}")


def static_print(*values, sep=" ", end="\n", file=None, flush=False):
    print(*values, sep=sep, end=end, file=file, flush=flush)


def device_assert(cond, msg="", mask=None):
    """Fail loudly, naming the program and lane, if ``cond`` is false in any active lane."""
    c = as_block(cond)
    ch = runtime.current()
    shape = c.shape
    if mask is not None:
        shape = broadcast_shape(shape, as_block(mask).shape)
    h = full_handle(c if c.dtype.is_bool() else c != 0, shape).expand(ch.P, *shape)
    bad = ~h
    if mask is not None:
        bad = bad & full_handle(as_block(mask), shape).expand(ch.P, *shape)
    if not bool(bad.any()):
        return
    prog = int(bad.reshape(ch.P, -1).any(1).nonzero()[0])
    lane = bad[prog].nonzero()[0].tolist() if shape else []
    pid = int(ch.pids[prog])
    raise DeviceAssertionError(f"device_assert failed in {runtime.location()}, "
                               f"{ch.launch.describe(pid)}"
                               + (f", lane {lane}" if lane else "") + (f": {msg}" if msg else ""))


def static_assert(cond, msg=""):
    if not bool(_unwrap(cond)):
        raise CompilationError(f"static_assert failed: {msg}")


def debug_barrier():
    """Synchronise the threads of one program. A no-op: each program here is sequential."""


def multiple_of(input, values):
    return input


def max_contiguous(input, values):
    return input


def max_constancy(input, values):
    return input


def assume(cond):
    return None


class _Unsupported(NotImplementedError, AttributeError):
    pass


_REMOVED = {"make_block_ptr", "advance"}
# What to write instead of what the simulator does not have.
INSTEAD = {
    "reduce": "tl.sum, tl.max, tl.min, tl.argmax or tl.argmin (a custom combine function is not simulated)",
    "associative_scan": "tl.cumsum or tl.cumprod",
    "rand": "random numbers drawn on the host with torch and passed in as a tensor",
    "randn": "random numbers drawn on the host with torch and passed in as a tensor",
    "randint": "random numbers drawn on the host with torch and passed in as a tensor",
    "inline_asm_elementwise": "tl operations (the simulator runs no PTX)",
    "histogram": "tl.atomic_add of 1 into a tensor of counts",
    "gather": "a load at computed offsets, tl.load(ptr + idx)",
    "sort": "a sort on the host, or a comparison network of tl.where",
    "topk": "tl.max with return_indices=True, repeated",
}


def unsupported(name, space="tl"):
    """The error for a name the simulator lacks in ``space`` ("tl", "tl.math" or "libdevice"): one Triton
    has (not simulated), or one Triton lacks too (an old Triton 2 name, a typo), which would not compile
    on a GPU either, so the student is not sent to blame the simulator."""
    where = f"{runtime.location()}: " if runtime.CURRENT is not None else ""
    if space == "tl" and name in _REMOVED:
        return _Unsupported(f"{where}tl.{name}: block pointers were removed from Triton 3.9, the version this course "
                            f"uses (its interpreter says so too); address blocks with pointer arithmetic and "
                            f"masks, ptr + rows[:, None] * stride + cols[None, :], or with a tensor descriptor "
                            f"(tl.make_tensor_descriptor)")
    known = {"tl": _names.TL, "tl.math": _names.MATH, "libdevice": _names.LIBDEVICE}[space]
    if name in known:
        instead = f"; write {INSTEAD[name]} instead" if name in INSTEAD else ""
        return _Unsupported(f"{where}{space}.{name} is not supported by mini_triton{instead} (Triton has it; the "
                            f"simulator covers the subset of Triton used in teaching kernels; see "
                            f"mini_triton/README.md)")
    return _Unsupported(f"{where}Triton has no {space}.{name} either: this line would not compile on a GPU "
                        f"(Triton 3.6 and 3.9, the course's versions){_triton_instead(name, space, known)}")


def _triton_instead(name, space, known) -> str:
    """Where Triton 3 keeps ``name``, or the nearest names it has."""
    if space != "libdevice" and name in _names.LIBDEVICE:
        then = " (Triton 2 kept CUDA's libdevice functions in tl.math)" if space == "tl.math" else ""
        return (f". Triton 3 has it in libdevice{then}: from triton.language.extra import libdevice, then "
                f"libdevice.{name}(...)")
    if name in _names.SYNONYMS:
        return f". Write {_names.SYNONYMS[name]} instead"
    if space == "libdevice" and name in _names.TL:
        return f". It is tl.{name}"
    close = _difflib.get_close_matches(name, sorted(known), n=3, cutoff=0.75)
    return f". Did you mean {' or '.join(f'{space}.{c}' for c in close)}?" if close else ""
