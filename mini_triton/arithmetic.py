"""Arithmetic and casts: what ``+``, ``<``, ``&`` and ``.to()`` do to blocks.

Triton's rules decide the result's type (dtypes.binary_result_type): a Python literal never
widens a block (``bf16 * 2.0`` is bf16), ``int / int`` is a float division, and ``//`` and ``%``
on integers truncate toward zero as in C. Integer results narrower than 64 bits are checked
for overflow (blocks.make_int), where a GPU would wrap silently. Casts convert as a GPU does:
round-to-nearest-even between floats, truncation from float to int, wrap-around between ints.

Integer arithmetic on affine blocks (``pid * stride + tl.arange(0, B)``) stays affine: adding
two of them, or multiplying one by a scalar all programs share, only combines bases and
strides, so the pointers a kernel builds never become a tensor of offsets (blocks.py says why
that matters). Pointer arithmetic is integer arithmetic on a pointer's offsets.

This module gives blocks (blocks.tensor) their arithmetic operators and ``.to()``/``.cast()``
when it is imported; the package imports it with the rest of the simulator.
"""
from __future__ import annotations

import torch

from . import dtypes
from . import runtime
from .blocks import (Affine, aligned, as_block, broadcast_affine, broadcast_shape, constexpr, make_int,
                     tensor)
from .errors import CompilationError


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
    if blk.dtype.is_ptr() or (isinstance(dtype, dtypes.dtype) and dtype.is_ptr()):
        raise NotImplementedError(f"{runtime.location()}: casting pointers is not supported by mini_triton; "
                                  f"index the tensor with integer offsets instead (ptr + offs)")
    if not isinstance(dtype, dtypes.dtype):
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
        return blk.retyped(dtype)                                  # widening keeps the affine form
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
# A float block's +, -, * or / waits for its first use: a tl.store computes it straight into memory
# (blocks.tensor.pending).
_DEFERRED = {"add", "sub", "mul", "truediv"}
COMPARISONS = {"lt", "le", "gt", "ge", "eq", "ne"}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
           "and": "&", "or": "|", "xor": "^", "lshift": "<<", "rshift": ">>",
           "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def binary(a, b, op) -> tensor:
    a_lit, b_lit = not isinstance(a, tensor), not isinstance(b, tensor)   # literals: they never widen a block
    if a_lit:
        a = as_block(a)
    if b_lit:
        b = as_block(b)
    if a.dtype.is_ptr() or b.dtype.is_ptr():
        return _pointer_arith(a, b, op)
    div_or_mod = op in ("truediv", "floordiv", "mod")
    ty = dtypes.binary_result_type(a.dtype, a_lit, b.dtype, b_lit, div_or_mod)
    if op == "truediv" and ty.is_int():
        ty = dtypes.float32                          # int / int is a float division in Triton
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
    ha, hb = full_rank(a, ty, shape), full_rank(b, ty, shape)
    if op in _DEFERRED and ty.is_floating() and shape:
        return tensor(None, ty, shape, pending=(_TORCH_OPS[op], ha, hb, max(ha.shape[0], hb.shape[0])))
    out = _compute(ha, hb, op, ty)
    if op in COMPARISONS:
        return tensor(out, dtypes.int1, shape)
    if ty.is_bool():
        return tensor(out, dtypes.int1, shape)
    if ty.is_int():
        return make_int(ty, shape, handle=out)
    return tensor(out, ty, shape)


def _compute(ha, hb, op, ty) -> torch.Tensor:
    """``ha op hb`` on handles of type ``ty``."""
    if op == "floordiv" or (op == "mod" and ty.is_int()):
        if bool((hb == 0).any()):
            raise ZeroDivisionError(f"{runtime.location()}: integer division by zero")
        # Triton divides integers like C: truncate toward zero, remainder has the dividend's sign
        return torch.div(ha, hb, rounding_mode="trunc") if op == "floordiv" else torch.fmod(ha, hb)
    if op == "mod":
        return torch.fmod(ha, hb)
    return _TORCH_OPS[op](ha, hb)


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
        base = fa.base + fb.base if op == "add" else fa.base - fb.base
        strides = tuple(x + sign * y for x, y in zip(fa.strides, fb.strides))
        return make_int(ty, shape, Affine(base, strides))
    # mul: affine times a scalar shared by all programs stays affine
    for f, g in ((fa, fb), (fb, fa)):
        if not any(g.strides) and g.base.numel() == 1:
            c = int(g.base)
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
        return binary(offsets_of(a), offsets_of(b), "sub")
    elif op in COMPARISONS and a.dtype.is_ptr() and b.dtype.is_ptr() and a.buf is b.buf:
        return binary(offsets_of(a), offsets_of(b), op)
    else:
        raise TypeError(f"{runtime.location()}: unsupported pointer arithmetic: {a.dtype!r} "
                        f"{_SYMBOL.get(op, op)} {b.dtype!r}")
    offs = binary(offsets_of(ptr), off.to(dtypes.int64) if off.dtype is not dtypes.int64 else off,
                  "add" if sign == 1 else "sub")
    return offs.retyped(ptr.dtype, buf=ptr.buf)


def offsets_of(ptr: tensor) -> tensor:
    """The element offsets of a pointer block, as an int64 block."""
    return ptr.retyped(dtypes.int64)


def unary_op(fn, blk, *, float_only=True, name="") -> tensor:
    blk = as_block(blk)
    if float_only and not blk.dtype.is_floating():
        raise TypeError(f"{runtime.location()}: tl.{name} expects a floating-point block, got {blk.dtype!r}")
    return tensor(fn(blk.handle), blk.dtype, blk.shape)


# ---------------------------------------------------------------------------
# the block's operators: x + 1 is binary(x, 1, "add"), 1 - x is binary(1, x, "sub")
# ---------------------------------------------------------------------------
def _operator(op):
    def method(self, other):
        return binary(self, other, op)
    method.__name__ = f"__{op}__"
    return method


def _reflected(op):
    def method(self, other):
        return binary(other, self, op)
    method.__name__ = f"__r{op}__"
    return method


def negate(x: tensor) -> tensor:
    if x.dtype.is_ptr():
        raise TypeError("cannot negate a pointer")
    a = x.affine() if x.dtype.is_int() else None
    if a is not None:
        return make_int(x.dtype, x.shape, Affine(-a.base, tuple(-s for s in a.strides)))
    return tensor(-x.handle, x.dtype, x.shape)


def invert(x: tensor) -> tensor:
    if not x.dtype.is_int():
        raise TypeError(f"~ needs an integer or boolean block, got {x.dtype!r}")
    if x.dtype.is_bool():
        return tensor(~x.handle, x.dtype, x.shape)
    return make_int(x.dtype, x.shape, handle=~x.handle)


def power(x, other):
    raise NotImplementedError(f"{runtime.location()}: the ** operator is not supported in Triton kernels; "
                              f"multiply (x * x), or use tl.exp and tl.log, or libdevice.pow")


def _to(x, dtype, bitcast=False, fp_downcast_rounding=None):
    return cast(x, dtype, bitcast=bitcast)


def _cast(x, dtype, fp_downcast_rounding=None, bitcast=False):
    return cast(x, dtype, bitcast=bitcast)


for _op in _SYMBOL:
    setattr(tensor, f"__{_op}__", _operator(_op))
    if _op not in COMPARISONS:                  # a < b is b > a: Python reflects comparisons itself
        setattr(tensor, f"__r{_op}__", _reflected(_op))
tensor.__neg__, tensor.__invert__, tensor.__pow__ = negate, invert, power
tensor.__pos__ = lambda x: x
tensor.to, tensor.cast = _to, _cast
