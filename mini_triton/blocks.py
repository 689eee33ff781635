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
"""
from __future__ import annotations

import math

import torch

from . import dtypes as D
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
    the memory of one kernel argument.
    """

    __slots__ = ("_h", "dtype", "shape", "aff", "buf", "__weakref__")

    def __init__(self, handle, dtype, shape, aff=None, buf=None):
        self._h = handle
        self.dtype = dtype
        self.shape = tuple(shape)
        if self.shape and math.prod(self.shape) > MAX_NUMEL:
            check_numel(self.shape)
        self.aff = aff
        self.buf = buf

    # -- the representation --------------------------------------------
    @property
    def handle(self) -> torch.Tensor:
        """The values as a torch tensor of shape (L, *shape)."""
        if self._h is None:
            self._h = self.aff.materialize(self.shape)
        return self._h

    @property
    def lead(self) -> int:
        return (self._h if self._h is not None else self.aff.base).shape[0]

    @property
    def type(self):
        return self.dtype

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

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

    # -- operators -------------------------------------------------------
    def __add__(self, o): return binary(self, o, "add")
    def __radd__(self, o): return binary(o, self, "add")
    def __sub__(self, o): return binary(self, o, "sub")
    def __rsub__(self, o): return binary(o, self, "sub")
    def __mul__(self, o): return binary(self, o, "mul")
    def __rmul__(self, o): return binary(o, self, "mul")
    def __truediv__(self, o): return binary(self, o, "truediv")
    def __rtruediv__(self, o): return binary(o, self, "truediv")
    def __floordiv__(self, o): return binary(self, o, "floordiv")
    def __rfloordiv__(self, o): return binary(o, self, "floordiv")
    def __mod__(self, o): return binary(self, o, "mod")
    def __rmod__(self, o): return binary(o, self, "mod")
    def __and__(self, o): return binary(self, o, "and")
    def __rand__(self, o): return binary(o, self, "and")
    def __or__(self, o): return binary(self, o, "or")
    def __ror__(self, o): return binary(o, self, "or")
    def __xor__(self, o): return binary(self, o, "xor")
    def __rxor__(self, o): return binary(o, self, "xor")
    def __lshift__(self, o): return binary(self, o, "lshift")
    def __rlshift__(self, o): return binary(o, self, "lshift")
    def __rshift__(self, o): return binary(self, o, "rshift")
    def __rrshift__(self, o): return binary(o, self, "rshift")
    def __lt__(self, o): return binary(self, o, "lt")
    def __le__(self, o): return binary(self, o, "le")
    def __gt__(self, o): return binary(self, o, "gt")
    def __ge__(self, o): return binary(self, o, "ge")
    def __eq__(self, o): return binary(self, o, "eq")
    def __ne__(self, o): return binary(self, o, "ne")
    def __pow__(self, o):
        raise NotImplementedError(f"{runtime.location()}: the ** operator is not supported in Triton kernels; "
                                  f"multiply (x * x), or use tl.exp and tl.log, or libdevice.pow")

    def __neg__(self):
        if self.dtype.is_ptr():
            raise TypeError("cannot negate a pointer")
        a = self.affine() if self.dtype.is_int() else None
        if a is not None:
            return make_int(self.dtype, self.shape, Affine(-a.base, tuple(-s for s in a.strides)))
        return tensor(-self.handle, self.dtype, self.shape)

    def __pos__(self):
        return self

    def __invert__(self):
        if not self.dtype.is_int():
            raise TypeError(f"~ needs an integer or boolean block, got {self.dtype!r}")
        if self.dtype.is_bool():
            return tensor(~self.handle, self.dtype, self.shape)
        return make_int(self.dtype, self.shape, handle=~self.handle)

    def __getitem__(self, idx):
        return subscript(self, idx)

    # -- methods (Triton's tensor has them too) ---------------------------------
    def to(self, dtype, bitcast=False, fp_downcast_rounding=None):
        return cast(self, dtype, bitcast=bitcast)

    def cast(self, dtype, fp_downcast_rounding=None, bitcast=False):
        return cast(self, dtype, bitcast=bitcast)

    def split(self):
        return split(self)

    def permute(self, *dims):
        return trans(self, *dims)

    def trans(self, *dims):
        return trans(self, *dims)

    def expand_dims(self, axis):
        return expand_dims(self, axis)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        where = f"{runtime.location()}: " if runtime.CURRENT is not None else ""
        raise AttributeError(f"{where}a block has no attribute or method {name!r} in mini_triton; call the "
                             f"function form instead (tl.{name}(x, ...)), or see mini_triton/README.md for "
                             f"what is supported")

    def reshape(self, *shape, can_reorder=False):
        return reshape(self, *shape)

    def view(self, *shape):
        return self.reshape(*shape)

    @property
    def T(self):
        return trans(self)


# ---------------------------------------------------------------------------
# construction helpers
# ---------------------------------------------------------------------------
def scalar(value, dtype=None) -> tensor:
    """A block of shape () shared by all programs (a literal or a kernel argument)."""
    dtype = dtype or D.of_python_scalar(value)
    return tensor(torch.tensor([value], dtype=D.storage_dtype(dtype)), dtype, ())


def make_int(dtype, shape, aff=None, handle=None) -> tensor:
    """An integer block; int32 (and narrower) results are checked for overflow."""
    blk = tensor(handle, dtype, shape, aff=aff)
    if dtype.kind in ("int", "uint") and dtype.primitive_bitwidth < 64:
        check_int_range(blk)
    return blk


def check_int_range(blk: tensor):
    lo_ok, hi_ok = D.int_range(blk.dtype)
    if blk.aff is not None and blk._h is None:
        llo, lhi = blk.aff.lane_range(blk.shape)
        lo = int(blk.aff.base.min()) + llo
        hi = int(blk.aff.base.max()) + lhi
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
    pad = len(target) - len(shape)
    strides = (0,) * pad + tuple(s if n != 1 else 0 for s, n in zip(a.strides, shape))
    return Affine(a.base, strides)


# ---------------------------------------------------------------------------
# casts
# ---------------------------------------------------------------------------
def _wrap_int(h: torch.Tensor, dtype) -> torch.Tensor:
    bits = dtype.primitive_bitwidth
    if bits >= 64:
        return h
    if dtype.kind == "uint":
        return torch.remainder(h, 1 << bits)
    return torch.remainder(h + (1 << (bits - 1)), 1 << bits) - (1 << (bits - 1))


def convert_handle(h: torch.Tensor, src, dst) -> torch.Tensor:
    """Convert values of type src to dst: RNE for floats, truncation float→int, wrap int→int."""
    if dst.is_bool():
        return h != 0
    if dst.is_floating():
        return h.to(dst.torch)
    # integer destination
    if src.is_floating():
        h = torch.trunc(h.float() if src.primitive_bitwidth < 32 else h)
        h = torch.nan_to_num(h, nan=0.0).to(torch.int64)
    else:
        h = h.to(torch.int64)
    return _wrap_int(h, dst)


def cast(blk, dtype, bitcast=False) -> tensor:
    if isinstance(dtype, constexpr):
        dtype = dtype.value
    blk = as_block(blk)
    if blk.dtype.is_ptr() or (isinstance(dtype, D.dtype) and dtype.is_ptr()):
        raise NotImplementedError(f"{runtime.location()}: casting pointers is not supported by mini_triton; "
                                  f"index the tensor with integer offsets instead (ptr + offs)")
    if not isinstance(dtype, D.dtype):
        raise TypeError(f".to() expects a tl dtype such as tl.float32, got {dtype!r}")
    if dtype is blk.dtype:
        return blk
    if bitcast:
        if dtype.primitive_bitwidth != blk.dtype.primitive_bitwidth:
            raise CompilationError(f"{runtime.location()}: bitcast between types of different sizes "
                                   f"({blk.dtype!r} → {dtype!r})")
        h = blk.handle
        if blk.dtype.kind in ("int", "uint"):
            h = _wrap_int(h, blk.dtype).to(blk.dtype.torch)
        h = h.contiguous().view(dtype.torch)
        if dtype.kind in ("int", "uint"):
            h = h.to(torch.int64)
        return tensor(h, dtype, blk.shape)
    if blk.dtype.kind in ("int", "uint") and dtype.kind in ("int", "uint") \
            and dtype.primitive_bitwidth >= blk.dtype.primitive_bitwidth and blk.aff is not None:
        return tensor(blk._h, dtype, blk.shape, aff=blk.aff)      # widening keeps the affine form
    return tensor(convert_handle(blk.handle, blk.dtype, dtype), dtype, blk.shape)


# ---------------------------------------------------------------------------
# binary operators
# ---------------------------------------------------------------------------
_TORCH_OPS = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "truediv": torch.div,
    "and": torch.bitwise_and, "or": torch.bitwise_or, "xor": torch.bitwise_xor,
    "lshift": torch.bitwise_left_shift, "rshift": torch.bitwise_right_shift,
    "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge, "eq": torch.eq, "ne": torch.ne,
}
_COMPARISONS = {"lt", "le", "gt", "ge", "eq", "ne"}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
           "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>",
           "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _is_literal(v):
    return not isinstance(v, tensor)


def binary(a, b, op) -> tensor:
    a_lit, b_lit = _is_literal(a), _is_literal(b)
    a, b = as_block(a), as_block(b)
    if a.dtype.is_ptr() or b.dtype.is_ptr():
        return _pointer_arith(a, b, op)
    div_or_mod = op in ("truediv", "floordiv", "mod")
    ty = D.binary_result_type(a.dtype, a_lit, b.dtype, b_lit, div_or_mod)
    if op == "truediv" and ty.is_int():
        ty = D.float32                          # int / int is a float division in Triton
    if op in ("and", "or", "xor", "lshift", "rshift") and not ty.is_int():
        raise TypeError(f"{runtime.location()}: operator {_SYMBOL[op]} needs integer or boolean "
                        f"operands, got {a.dtype!r} and {b.dtype!r}")
    if op == "floordiv" and not ty.is_int():
        raise TypeError(f"{runtime.location()}: // is integer division in Triton; got {ty!r} operands "
                        f"(use / and tl.floor for floats)")
    shape = broadcast_shape(a.shape, b.shape)
    if ty.is_int() and op in ("add", "sub", "mul") and not ty.is_bool():
        fast = _affine_arith(a, b, op, ty, shape)
        if fast is not None:
            return fast
    ha = full_rank(a, ty, shape)
    hb = full_rank(b, ty, shape)
    if op == "floordiv" or (op == "mod" and ty.is_int()):
        if bool((hb == 0).any()):
            raise ZeroDivisionError(f"{runtime.location()}: integer division by zero")
        # Triton divides integers like C: truncate toward zero, remainder has the dividend's sign
        out = torch.div(ha, hb, rounding_mode="trunc") if op == "floordiv" else torch.fmod(ha, hb)
    elif op == "mod":
        out = torch.fmod(ha, hb)
    else:
        out = _TORCH_OPS[op](ha, hb)
    if op in _COMPARISONS:
        return tensor(out, D.int1, shape)
    if ty.is_bool():
        return tensor(out, D.int1, shape)
    if ty.is_int():
        return make_int(ty, shape, handle=out)
    return tensor(out, ty, shape)


def full_rank(blk: tensor, ty, shape) -> torch.Tensor:
    """``blk``'s handle converted to ``ty`` and aligned to the rank of ``shape``."""
    h = blk.handle
    if blk.dtype is not ty:
        h = convert_handle(h, blk.dtype, ty) if not (blk.dtype.is_int() and ty.is_int() and not ty.is_bool()) \
            else h.to(torch.int64)
    return aligned(h, blk.shape, len(shape))


def _affine_arith(a, b, op, ty, shape):
    fa, fb = a.affine(), b.affine()
    if fa is None or fb is None:
        return None
    fa, fb = broadcast_affine(fa, a.shape, shape), broadcast_affine(fb, b.shape, shape)
    if op in ("add", "sub"):
        sign = 1 if op == "add" else -1
        base = fa.base + sign * fb.base
        strides = tuple(x + sign * y for x, y in zip(fa.strides, fb.strides))
        return make_int(ty, shape, Affine(base, strides))
    # mul: affine times a scalar shared by all programs stays affine
    for f, g in ((fa, fb), (fb, fa)):
        if not any(g.strides) and g.base.numel() == 1:
            c = int(g.base[0])
            return make_int(ty, shape, Affine(f.base * c, tuple(s * c for s in f.strides)))
    if not any(fa.strides) and not any(fb.strides):
        return make_int(ty, shape, Affine(fa.base * fb.base, fa.strides))
    return None


def _pointer_arith(a, b, op):
    if op in ("add", "sub") and a.dtype.is_ptr() and b.dtype.is_int():
        ptr, off, sign = a, b, (1 if op == "add" else -1)
    elif op == "add" and b.dtype.is_ptr() and a.dtype.is_int():
        ptr, off, sign = b, a, 1
    elif op == "sub" and a.dtype.is_ptr() and b.dtype.is_ptr():
        if a.buf is not b.buf:
            raise TypeError(f"{runtime.location()}: subtracting pointers into different tensors")
        return binary(_offsets(a), _offsets(b), "sub")
    elif op in _COMPARISONS and a.dtype.is_ptr() and b.dtype.is_ptr() and a.buf is b.buf:
        return binary(_offsets(a), _offsets(b), op)
    else:
        raise TypeError(f"{runtime.location()}: unsupported pointer arithmetic: {a.dtype!r} "
                        f"{_SYMBOL.get(op, op)} {b.dtype!r}")
    offs = binary(_offsets(ptr), off.to(D.int64) if off.dtype is not D.int64 else off,
                  "add" if sign == 1 else "sub")
    return tensor(offs._h, ptr.dtype, offs.shape, aff=offs.aff, buf=ptr.buf)


def _offsets(ptr: tensor) -> tensor:
    """The element offsets of a pointer block, as an int64 block."""
    return tensor(ptr._h, D.int64, ptr.shape, aff=ptr.aff)


offsets_of = _offsets


# ---------------------------------------------------------------------------
# indexing: x[:, None]
# ---------------------------------------------------------------------------
def subscript(blk: tensor, idx) -> tensor:
    if not isinstance(idx, tuple):
        idx = (idx,)
    new_shape, src_dim, view = [], 0, [slice(None)]
    for item in idx:
        if item is None:
            new_shape.append(1)
            view.append(None)
        elif isinstance(item, slice) and item == slice(None):
            if src_dim >= len(blk.shape):
                scalar = (" (a scalar: tl.sum, tl.max and tl.min without axis= reduce the whole block to one "
                          "value; give axis=1 for one value per row)") if not blk.shape else ""
                raise CompilationError(f"{runtime.location()}: too many indices for a block of shape "
                                       f"{list(blk.shape)}{scalar}")
            new_shape.append(blk.shape[src_dim])
            view.append(slice(None))
            src_dim += 1
        elif item is Ellipsis:
            rest = len(blk.shape) - src_dim - sum(1 for i in idx if i is not None and i is not Ellipsis
                                                  and i != slice(None))
            for _ in range(rest):
                new_shape.append(blk.shape[src_dim])
                view.append(slice(None))
                src_dim += 1
        else:
            raise NotImplementedError(f"{runtime.location()}: block indexing supports only ':' and None (got "
                                      f"{item!r}); Triton blocks cannot be sliced or indexed by position: load the "
                                      f"part you need with its own offsets, or use tl.split/tl.where")
    while src_dim < len(blk.shape):
        new_shape.append(blk.shape[src_dim])
        view.append(slice(None))
        src_dim += 1
    return expand_to(blk, tuple(new_shape), tuple(view))


def expand_to(blk: tensor, new_shape, view) -> tensor:
    """Insert singleton dimensions (``view`` is the torch index over the handle)."""
    aff = blk.affine() if (blk.dtype.is_int() or blk.dtype.is_ptr()) else None
    if aff is not None and (blk._h is None or not blk.shape):
        strides, it = [], iter(aff.strides)
        for v in view[1:]:
            strides.append(0 if v is None else next(it))
        return tensor(None, blk.dtype, new_shape, aff=Affine(aff.base, tuple(strides)), buf=blk.buf)
    return tensor(blk.handle[view], blk.dtype, new_shape, buf=blk.buf)


def unary_op(fn, blk, *, float_only=True, name="") -> tensor:
    blk = as_block(blk)
    if float_only and not blk.dtype.is_floating():
        raise TypeError(f"{runtime.location()}: tl.{name} expects a floating-point block, got {blk.dtype!r}")
    return tensor(fn(blk.handle), blk.dtype, blk.shape)


# ---------------------------------------------------------------------------
# compile-time constants, and the shape operations blocks have as methods
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
        raise CompilationError(
            f"{runtime.location()}: {what} must be a compile-time constant (tl.constexpr), but it is a "
            f"runtime value. Annotate the kernel parameter as `NAME: tl.constexpr` and pass it by keyword.")
    if isinstance(v, bool) or not isinstance(v, int):
        raise CompilationError(f"{runtime.location()}: {what} must be an int, got {v!r}")
    return v


def check_shape(shape, what="block shape"):
    """A block shape of compile-time powers of 2."""
    shape = shape if isinstance(shape, (tuple, list)) else (shape,)
    shape = tuple(const_int(s, what) for s in unwrap(shape))
    for s in shape:
        if s <= 0 or s & (s - 1):
            raise CompilationError(f"{runtime.location()}: {what} {list(shape)}: every dimension "
                                   f"must be a power of 2")
    return shape


def reshape(input, *shape, can_reorder=False):
    x = as_block(input)
    if len(shape) == 1 and isinstance(unwrap(shape[0]), (tuple, list)):
        shape = tuple(unwrap(shape[0]))
    shape = check_shape(shape, "reshape shape")
    if math.prod(shape) != x.numel:
        raise CompilationError(f"{runtime.location()}: cannot reshape a block of shape {list(x.shape)} "
                               f"to {list(shape)}")
    return tensor(x.handle.reshape(x.lead, *shape), x.dtype, shape)


def trans(input, *dims):
    """Transpose a 2-D block (or permute with ``dims``)."""
    x = as_block(input)
    if len(dims) == 1 and isinstance(unwrap(dims[0]), (tuple, list)):
        dims = tuple(unwrap(dims[0]))
    if not dims:
        if len(x.shape) != 2:
            raise CompilationError(f"{runtime.location()}: tl.trans without dims needs a 2-D block, got "
                                   f"shape {list(x.shape)}")
        dims = (1, 0)
    dims = tuple(const_int(d, "trans dim") for d in dims)
    if sorted(dims) != list(range(len(x.shape))):
        raise CompilationError(f"{runtime.location()}: {dims} is not a permutation of the block's dims")
    return tensor(x.handle.permute(0, *(d + 1 for d in dims)), x.dtype, tuple(x.shape[d] for d in dims))


def expand_dims(input, axis):
    """A new dimension of size 1 at ``axis`` (or at each axis of a list)."""
    x = as_block(input)
    axes = unwrap(axis)
    axes = [axes] if not isinstance(axes, (tuple, list)) else list(axes)
    n = len(x.shape) + len(axes)
    axes = sorted(const_int(a, "expand_dims axis") % n for a in axes)
    return x[tuple(None if d in axes else slice(None) for d in range(n))]


def join(a, b):
    """A block with a new last dimension of size 2 holding ``a`` and ``b`` (tl.join; tl.split undoes it).
    The two are broadcast to one shape; their dtypes must match."""
    a, b = as_block(a), as_block(b)
    if a.dtype is not b.dtype:
        raise CompilationError(f"{runtime.location()}: tl.join needs two blocks of one dtype, got "
                               f"{a.dtype!r} and {b.dtype!r}")
    shape = broadcast_shape(a.shape, b.shape)
    check_numel(shape + (2,))
    ha, hb = torch.broadcast_tensors(full_handle(a, shape), full_handle(b, shape))
    return tensor(torch.stack((ha, hb), dim=-1), a.dtype, shape + (2,))


def split(a):
    """(a[..., 0], a[..., 1]) of a block whose last dimension has 2 elements (tl.split)."""
    x = as_block(a)
    if not x.shape or x.shape[-1] != 2:
        raise CompilationError(f"{runtime.location()}: tl.split needs a block whose last dimension has 2 "
                               f"elements (as tl.join makes), got shape {list(x.shape)}")
    h = x.handle
    return tensor(h[..., 0], x.dtype, x.shape[:-1]), tensor(h[..., 1], x.dtype, x.shape[:-1])
