"""Blocks: the values a Triton kernel computes with.

Inside a kernel, ``tl.arange(0, 128)`` is a *block* of 128 lanes, ``x_ptr +
offs`` a block of 128 pointers, ``tl.load`` a block of 128 values. Each lane
is one thread's value; a program computes on whole blocks at once.

The simulator stores a block of shape ``S`` as a torch tensor of shape
``(L, *S)``: the leading dimension holds one copy per program in the running
chunk (L = P), or a single copy shared by all of them (L = 1). See runtime.py.

Integer blocks that are affine in the lane index -- ``pid * stride +
tl.arange(0, B)`` -- keep that form (:class:`Affine`) instead of a tensor of
offsets. A load through an affine pointer is then a strided *view* of the
tensor, and its bounds, race and traffic checks cost O(programs), not
O(lanes). This is the main reason the simulator is fast.

This module holds the value types: blocks (:class:`tensor`), their affine form
and compile-time constants (:class:`constexpr`). What operators and casts do to
blocks is arithmetic.py's; how their shape changes, shapes.py's.
"""
from __future__ import annotations

import math

import torch

from . import dtypes
from . import runtime
from .errors import BlockTruthError, CompilationError, Int32OverflowError

# Triton refuses to compile a block of more elements than this (TRITON_MAX_TENSOR_NUMEL): a
# block lives in the registers of one program, and no GPU has room for more.
MAX_NUMEL = 1 << 20


def check_numel(shape):
    """Refuse a block larger than Triton allows, before the simulator tries to allocate it."""
    n = math.prod(shape)
    if n > MAX_NUMEL:
        raise CompilationError(
            f"{runtime.location()}: a block of shape {list(shape)} has {n} elements; Triton's maximum is "
            f"{MAX_NUMEL} (2^20: numel ({n}) exceeds triton maximum tensor numel ({MAX_NUMEL})). A block "
            f"lives in one program's registers: tile the work (a loop over chunks of the row) instead of "
            f"one block the size of the whole problem.")


class Affine:
    """value[p, i0, i1, ...] = base[p] + sum_d strides[d] * i_d (int64)."""

    __slots__ = ("base", "strides")

    def __init__(self, base: torch.Tensor, strides: tuple):
        self.base = base            # (L,) int64
        self.strides = strides      # one python int per block dimension

    def lane_range(self, shape):
        """(lowest, highest) of sum_d strides[d] * i_d over all lanes."""
        lo = sum(min(0, s * (n - 1)) for s, n in zip(self.strides, shape))
        hi = sum(max(0, s * (n - 1)) for s, n in zip(self.strides, shape))
        return lo, hi

    def materialize(self, shape) -> torch.Tensor:
        nd = len(shape)
        h = self.base.view(-1, *([1] * nd))
        for d, (n, s) in enumerate(zip(shape, self.strides)):
            if s != 0 and n > 1:
                h = h + (torch.arange(n, dtype=torch.int64) * s).view(1, *([1] * d), n, *([1] * (nd - d - 1)))
        return h.expand(h.shape[0], *shape)


class tensor:
    """A block value of shape ``shape`` and Triton type ``dtype``.

    Pointer blocks (``dtype.is_ptr()``) hold element offsets into ``buf``,
    the memory of one kernel argument. Its operators and ``.to()`` are
    arithmetic.py's, its shape methods (``x[:, None]``, ``.trans()``...) shapes.py's.
    """

    __slots__ = ("_h", "dtype", "shape", "aff", "buf", "pending", "__weakref__")

    def __init__(self, handle, dtype, shape, aff=None, buf=None, pending=None):
        self._h = handle
        self.dtype = dtype
        self.shape = tuple(shape)
        n = math.prod(self.shape) if self.shape else 1
        if n > MAX_NUMEL:
            check_numel(self.shape)
        chunk = runtime.CURRENT
        if chunk is not None and dtype.kind == "float":    # a kernel's float operation: its lanes over the threads
            chunk.issued += -(-n // chunk.threads)
        self.aff = aff
        self.buf = buf
        # (op, a, b, lead): a large element-wise result not computed yet. A tl.store of it computes it straight into
        # memory, which saves writing it once and copying it once (memory.store); any other use computes it here.
        self.pending = pending

    # -- the representation --------------------------------------------
    @property
    def handle(self) -> torch.Tensor:
        """The values as a torch tensor of shape (L, *shape)."""
        if self._h is None:
            if self.pending is not None:
                op, a, b, _ = self.pending
                self._h, self.pending = op(a, b), None
            else:
                self._h = self.aff.materialize(self.shape)
        return self._h

    @property
    def lead(self) -> int:
        if self.pending is not None:
            return self.pending[3]
        return (self._h if self._h is not None else self.aff.base).shape[0]

    @property
    def type(self):
        return self.dtype

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def symbolic(self) -> bool:
        """Held as an :class:`Affine` only: no tensor of its values made yet."""
        return self._h is None and self.pending is None

    def retyped(self, dtype, buf=None) -> tensor:
        """The same lanes as a block of type ``dtype`` (pointing into ``buf``), without a copy: an
        affine block stays affine. Offsets become pointers and back this way."""
        return tensor(self._h if self.pending is None else self.handle, dtype, self.shape, aff=self.aff, buf=buf)

    def affine(self):
        """This integer block as an :class:`Affine`, or None if it is not one."""
        if self.aff is not None:
            return self.aff
        if not self.shape:
            return Affine(self._h.reshape(-1), ())
        return None

    def __repr__(self):
        return f"<block {list(self.shape)} {self.dtype!r}>"

    # -- Python-level decisions (if / while / range / int()) ---------------
    def _uniform_scalar(self, what):
        if self.numel != 1:
            raise BlockTruthError(
                f"{runtime.location()}: Python {what} on a block of shape {list(self.shape)} is "
                f"ambiguous; a kernel can only branch on a scalar. Use tl.where(cond, a, b) to choose "
                f"per lane, or reduce first (tl.max, tl.sum).")
        v = self.handle.reshape(-1)
        if v.numel() > 1 and not bool((v == v[0]).all()):
            raise runtime.Divergence(v)
        return v[0].item()

    def __bool__(self):
        return bool(self._uniform_scalar("truth (if/while/and/or/not)"))

    def __index__(self):
        if not self.dtype.is_int():
            raise TypeError(f"{runtime.location()}: a {self.dtype!r} block cannot be used as an integer")
        return int(self._uniform_scalar("int()/range()"))

    __int__ = __index__

    def __float__(self):
        return float(self._uniform_scalar("float()"))

    def __iter__(self):
        raise CompilationError(f"{runtime.location()}: blocks cannot be iterated over in a kernel")

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a scalar")
        return self.shape[0]

    __hash__ = None

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        where = f"{runtime.location()}: " if runtime.CURRENT is not None else ""
        raise AttributeError(f"{where}a block has no attribute or method {name!r} in mini_triton; call the "
                             f"function form instead (tl.{name}(x, ...)), or see mini_triton/README.md for "
                             f"what is supported")


# ---------------------------------------------------------------------------
# construction helpers
# ---------------------------------------------------------------------------
_SCALARS: dict = {}     # (int or bool, dtype) -> its one-element handle: a block's handle is never written to


def scalar(value, dtype=None) -> tensor:
    """A block of shape () shared by all programs (a literal or a kernel argument)."""
    dtype = dtype or dtypes.of_python_scalar(value)
    if type(value) is not int and type(value) is not bool:     # (a float's key would take -0.0 for 0.0)
        return tensor(torch.tensor([value], dtype=dtypes.storage_dtype(dtype)), dtype, ())
    handle = _SCALARS.get((value, dtype))
    if handle is None:
        if len(_SCALARS) > 4096:
            _SCALARS.clear()
        handle = _SCALARS[value, dtype] = torch.tensor([value], dtype=dtypes.storage_dtype(dtype))
    return tensor(handle, dtype, ())


class loop_index(int):
    """The variable of a runtime loop whose bounds every program of the chunk shares (``for i in range(n)``): kept as
    a Python int, for speed, but a runtime value as Triton has it (the loop's int32 index, not a compile-time
    constant). So it has a block's methods (``i.to(tl.int64)``, read through :meth:`block`), its arithmetic stays a
    runtime value, and a block shape refuses it (:func:`const_int`), as Triton's compiler does."""
    __slots__ = ()

    def block(self) -> tensor:
        return scalar(int(self))

    def __repr__(self):
        return f"loop index {int(self)}"


def _keeps_loop_index(name):
    plain = getattr(int, name)

    def op(self, *other):
        out = plain(self, *other)
        return loop_index(out) if type(out) is int else out
    op.__name__ = name
    return op


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__floordiv__", "__rfloordiv__",
              "__mod__", "__rmod__", "__neg__", "__pos__", "__abs__", "__lshift__", "__rlshift__", "__rshift__",
              "__rrshift__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__invert__"):
    setattr(loop_index, _name, _keeps_loop_index(_name))


def make_int(dtype, shape, aff=None, handle=None) -> tensor:
    """An integer block; int32 (and narrower) results are checked for overflow."""
    blk = tensor(handle, dtype, shape, aff=aff)
    if dtype.kind in ("int", "uint") and dtype.primitive_bitwidth < 64:
        check_int_range(blk)
    return blk


def check_int_range(blk: tensor):
    lo_ok, hi_ok = dtypes.int_range(blk.dtype)
    if blk.aff is not None and blk._h is None:
        llo, lhi = blk.aff.lane_range(blk.shape)
        base = blk.aff.base
        lo, hi = (int(base), int(base)) if base.numel() == 1 else (int(base.min()), int(base.max()))
        lo, hi = lo + llo, hi + lhi
    else:
        h = blk.handle
        if h.numel() == 0:
            return
        lo, hi = (int(v) for v in torch.aminmax(h))
    if lo < lo_ok or hi > hi_ok:
        bad = hi if hi > hi_ok else lo
        raise Int32OverflowError(
            f"{runtime.location()}: {blk.dtype!r} overflow: a value reaches {bad}, outside "
            f"[{lo_ok}, {hi_ok}]. On a GPU it would silently wrap around. Compute offsets in "
            f"int64, e.g. row.to(tl.int64) * stride.")


def as_block(v) -> tensor:
    if isinstance(v, tensor):
        return v
    if isinstance(v, constexpr):
        v = v.value
    if isinstance(v, (bool, int, float)):
        return scalar(v)
    if isinstance(v, torch.Tensor):
        raise TypeError("a torch.Tensor cannot be used inside a kernel; pass it as a kernel argument "
                        "(it becomes a pointer) and tl.load from it")
    raise TypeError(f"unsupported value in a kernel: {v!r} ({type(v).__name__})")


def broadcast_shape(a, b):
    if a == b or not b:         # (block shapes: their size was checked when the block was made)
        return tuple(a)
    if not a:
        return tuple(b)
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise CompilationError(f"{runtime.location()}: cannot broadcast shapes {list(a)} and {list(b)}")
        out.append(max(x, y))
    check_numel(out)
    return tuple(out)


def aligned(h: torch.Tensor, shape, rank: int) -> torch.Tensor:
    """View a (L, *shape) handle with singleton dims prepended up to ``rank``."""
    missing = rank - len(shape)
    if missing == 0:
        return h
    return h.reshape(h.shape[0], *([1] * missing), *shape)


def full_handle(blk: tensor, shape) -> torch.Tensor:
    """The handle broadcast (without copying) to block shape ``shape``."""
    h = aligned(blk.handle, blk.shape, len(shape))
    return h.expand(h.shape[0], *shape)


def broadcast_affine(a: Affine, shape, target):
    """An Affine of block shape ``shape`` seen at the broadcast shape ``target``."""
    if len(shape) == len(target) and 1 not in shape:
        return a
    pad = len(target) - len(shape)
    strides = (0,) * pad + tuple(s if n != 1 else 0 for s, n in zip(a.strides, shape))
    return Affine(a.base, strides)


# ---------------------------------------------------------------------------
# compile-time constants
# ---------------------------------------------------------------------------
class constexpr:
    """A compile-time constant. As an annotation (``BLOCK: tl.constexpr``) it marks a
    kernel parameter whose value is fixed when the kernel is compiled: only such
    values may set block shapes."""

    def __init__(self, value):
        self.value = value.value if isinstance(value, constexpr) else value

    def __repr__(self):
        return f"constexpr[{self.value!r}]"

    def __index__(self):
        return self.value.__index__()

    def __int__(self):
        return int(self.value)

    def __float__(self):
        return float(self.value)

    def __bool__(self):
        return bool(self.value)

    def __eq__(self, other):
        return self.value == unwrap(other)

    def __hash__(self):
        return hash(self.value)

    def __call__(self, *args, **kwargs):
        return self.value(*args, **kwargs)


def _binop(name):
    def f(self, other):
        if isinstance(other, tensor):
            return NotImplemented
        return constexpr(getattr(self.value, name)(unwrap(other)))
    return f


for _n in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
           "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__lt__", "__le__",
           "__gt__", "__ge__", "__ne__", "__and__", "__or__", "__xor__", "__lshift__", "__rshift__",
           "__pow__"):
    setattr(constexpr, _n, _binop(_n))


def unwrap(v):
    """The value of a constexpr; anything else as it is."""
    return v.value if isinstance(v, constexpr) else v


def const_int(v, what):
    """A compile-time int (a constexpr or a Python int), or a CompilationError naming ``what``."""
    v = unwrap(v)
    if isinstance(v, tensor):
        message = (f"{runtime.location()}: {what} must be a compile-time constant (tl.constexpr), but it is a "
                   f"runtime value. Annotate the kernel parameter as `NAME: tl.constexpr` and pass it by keyword.")
        h = v.handle if v.shape == () and v.dtype.is_int() else None
        if h is None or h.numel() != 1:
            raise CompilationError(message)        # not one int that every program shares: nothing to run on
        runtime.refuse(message)                    # recorded: the value the launch passed
        return int(h.item())
    if isinstance(v, loop_index):
        message = (f"{runtime.location()}: {what} must be a compile-time constant (tl.constexpr), but it is a loop's "
                   f"variable, a runtime value for Triton's compiler; loop with tl.static_range to unroll the loop "
                   f"at compile time")
        runtime.refuse(message)                    # recorded: the value it has
        return int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise CompilationError(f"{runtime.location()}: {what} must be an int, got {v!r}")
    return v


def check_shape(shape, what="block shape"):
    """A block shape of compile-time powers of 2."""
    shape = shape if isinstance(shape, (tuple, list)) else (shape,)
    shape = tuple(const_int(s, what) for s in unwrap(shape))
    for s in shape:
        if s <= 0:
            raise CompilationError(f"{runtime.location()}: {what} {list(shape)}: every dimension must be a power of 2")
        if s & (s - 1):
            runtime.refuse(f"{runtime.location()}: {what} {list(shape)}: every dimension must be a power of 2")
    return shape
