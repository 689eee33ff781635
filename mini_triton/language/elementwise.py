"""Element-wise math: one table of functions for ``tl``, ``tl.math`` and libdevice alike.

Each lane is computed on its own, so these are plain torch functions applied to a block's handle.
The tables below hold every such function the simulator has, under Triton's names; each namespace
takes the names Triton has in it (names.py): ``tl.exp``, ``tl.math.exp`` and ``libdevice.exp`` are one
entry. torch computes them correctly rounded; a GPU may use faster approximations (≤ 2 ulp).
"""
import enum

import torch

from .. import dtypes
from .. import frontend, runtime
from ..arithmetic import binary, full_rank, unary_op
from ..blocks import as_block, broadcast_shape, make_int, tensor, unwrap
from . import names



def _round_half_away(h):
    """CUDA's round(): halves away from zero (torch.round, like rint, takes them to the even neighbour).
    h - trunc(h) is exact, so 0.49999997 stays 0."""
    t = torch.trunc(h)
    return t + torch.where(torch.abs(h - t) >= 0.5, torch.sign(h), torch.zeros_like(h))


# float -> float, the type kept
UNARY = {
    "exp": torch.exp, "exp2": torch.exp2, "log": torch.log, "log2": torch.log2, "sqrt": torch.sqrt,
    "sqrt_rn": torch.sqrt, "sqrt_rz": torch.sqrt, "rsqrt": torch.rsqrt, "rsqrt_rn": torch.rsqrt, "sin": torch.sin,
    "cos": torch.cos, "erf": torch.erf, "floor": torch.floor, "ceil": torch.ceil, "sigmoid": torch.sigmoid,
    "fast_expf": torch.exp, "exp10": lambda h: torch.pow(10.0, h), "expm1": torch.expm1, "fast_logf": torch.log,
    "log10": torch.log10, "log1p": torch.log1p, "tan": torch.tan, "asin": torch.asin, "acos": torch.acos,
    "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh, "asinh": torch.asinh,
    "acosh": torch.acosh, "atanh": torch.atanh, "erfc": torch.erfc, "erfinv": torch.erfinv, "lgamma": torch.lgamma,
    "trunc": torch.trunc, "round": lambda h: _round_half_away(h), "rint": torch.round, "nearbyint": torch.round,
    "rcp_rn": torch.reciprocal, "saturatef": lambda h: torch.clamp(h, 0.0, 1.0),
    "cbrt": lambda h: torch.sign(h) * torch.abs(h).pow(1 / 3),
}
# float -> int1
PREDICATES = {"isnan": torch.isnan, "isinf": torch.isinf, "isfinited": torch.isfinite, "finitef": torch.isfinite,
              "signbit": torch.signbit}
# two floats -> float, promoted to one type first
BINARY = {"pow": torch.pow, "fast_powf": torch.pow, "fmod": torch.fmod, "atan2": torch.atan2, "hypot": torch.hypot,
          "copysign": torch.copysign, "div_rn": torch.div, "fast_dividef": torch.div, "remainder": torch.remainder,
          "nextafter": torch.nextafter}


def _not_float(space, name, ty):
    return TypeError(f"{runtime.location()}: {space}.{name} expects a floating-point block, got {ty!r}")


def unary_function(name, space="tl"):
    """``space``.``name`` from the UNARY table: ``tl.exp``, ``libdevice.exp``..."""
    torch_fn = UNARY[name]
    if space == "tl":
        def f(x, *args, **kwargs):
            return unary_op(torch_fn, x, name=name)
    else:
        def f(x):
            x = as_block(x)
            if not x.dtype.is_floating():
                raise _not_float(space, name, x.dtype)
            return unary_op(torch_fn, x, float_only=False)
    f.__name__ = name
    f.__doc__ = f"{space}.{name}: computed exactly (correctly rounded) by torch; GPUs may use a fast approximation."
    return f


def predicate_function(name, space="libdevice"):
    """``space``.``name`` from the PREDICATES table: a block of int1."""
    torch_fn = PREDICATES[name]

    def f(x):
        x = as_block(x)
        if not x.dtype.is_floating():
            raise _not_float(space, name, x.dtype)
        return tensor(torch_fn(x.handle), dtypes.int1, x.shape)
    f.__name__ = name
    f.__doc__ = f"{space}.{name}, computed by torch."
    return f


def binary_function(name, space="libdevice"):
    """``space``.``name`` from the BINARY table: both operands promoted to one float type."""
    torch_fn = BINARY[name]

    def f(x, y):
        (a, b), ty, shape = promoted(x, y)
        if not ty.is_floating():
            raise TypeError(f"{runtime.location()}: {space}.{name} expects floating-point blocks, got {ty!r}")
        return tensor(torch_fn(full_rank(a, ty, shape), full_rank(b, ty, shape)), ty, shape)
    f.__name__ = name
    f.__doc__ = f"{space}.{name}, computed by torch (correctly rounded)."
    return f


def promoted(*vals):
    """Operands as blocks, the type Triton's rules promote them to, and their broadcast shape."""
    blocks = [as_block(v) for v in vals]
    lit = [not isinstance(v, tensor) for v in vals]          # a Python literal
    ty, ty_lit = blocks[0].dtype, lit[0]
    for b, b_lit in zip(blocks[1:], lit[1:]):
        ty = dtypes.binary_result_type(ty, ty_lit, b.dtype, b_lit)
        ty_lit = ty_lit and b_lit
    shape = ()
    for b in blocks:
        shape = broadcast_shape(shape, b.shape)
    return blocks, ty, shape


def result(h, ty, shape):
    """A block of type ``ty`` from a computed handle (integers are range-checked)."""
    if ty.is_int() and not ty.is_bool():
        return make_int(ty, shape, handle=h)
    return tensor(h, ty, shape)


def abs(x):
    x = as_block(x)
    if x.dtype.is_floating():
        return tensor(torch.abs(x.handle), x.dtype, x.shape)
    return make_int(x.dtype, x.shape, handle=torch.abs(x.handle)) if not x.dtype.is_bool() else x


class PropagateNan(enum.Enum):
    """``tl.maximum(x, y, propagate_nan=tl.PropagateNan.ALL)``: a NaN operand gives NaN (NONE: it loses)."""
    NONE = 0x0000
    ALL = 0xFFFF


def _extremum(x, y, propagate_nan, which):
    (a, b), ty, shape = promoted(x, y)
    nan_wins = unwrap(propagate_nan) is PropagateNan.ALL
    if ty.is_floating() and not nan_wins:
        fn = torch.fmax if which == "max" else torch.fmin
    else:
        fn = torch.maximum if which == "max" else torch.minimum
    return result(fn(full_rank(a, ty, shape), full_rank(b, ty, shape)), ty, shape)


def maximum(x, y, propagate_nan=PropagateNan.NONE):
    """Element-wise max. Like Triton's default, a NaN loses to a number (PropagateNan.ALL: it wins)."""
    return _extremum(x, y, propagate_nan, "max")


def minimum(x, y, propagate_nan=PropagateNan.NONE):
    return _extremum(x, y, propagate_nan, "min")


frontend.ELEMENTWISE.update(min=minimum, max=maximum)       # Triton's builtin min and max on blocks


def clamp(x, min, max, propagate_nan=PropagateNan.NONE):
    return minimum(maximum(x, min, propagate_nan), max, propagate_nan)


def where(condition, x, y):
    """Per lane: x where condition is true, else y."""
    c = as_block(condition)
    if not c.dtype.is_bool():
        c = c != 0
    (a, b), ty, shape = promoted(x, y)
    shape = broadcast_shape(shape, c.shape)
    h = torch.where(full_rank(c, dtypes.int1, shape), full_rank(a, ty, shape), full_rank(b, ty, shape))
    return result(h, ty, shape)


def add(x, y, sanitize_overflow=True):
    return binary(x, y, "add")


def sub(x, y, sanitize_overflow=True):
    return binary(x, y, "sub")


def mul(x, y, sanitize_overflow=True):
    return binary(x, y, "mul")


def fma(x, y, z):
    """x * y + z (a GPU rounds once; here the product is rounded first)."""
    return x * y + z


def div_rn(x, y):
    return x / y


def fdiv(x, y, ieee_rounding=False):
    return x / y


def cdiv(x, div):
    """Ceiling division of integers: (x + div - 1) // div."""
    if not isinstance(x, tensor) and not isinstance(div, tensor):
        return (unwrap(x) + unwrap(div) - 1) // unwrap(div)
    return (x + div - 1) // div


def swizzle2d(i, j, size_i, size_j, size_g):
    """Tile (i, j) of a size_i x size_j grid renumbered so that groups of size_g rows are walked
    column by column (the grouped ordering of Triton's matmul tutorial, for L2 reuse)."""
    ij = i * size_j + j
    size_gj = size_g * size_j
    group_id = ij // size_gj
    off_i = group_id * size_g
    size_g = minimum(size_i - off_i, size_g)
    ij = ij % size_gj
    return off_i + ij % size_g, ij // size_g


_TABLE = [n for n in UNARY if n in names.TL]
for _name in _TABLE:
    globals()[_name] = unary_function(_name)
del _name

__all__ = ["abs", "PropagateNan", "maximum", "minimum", "clamp", "where", "add", "sub", "mul", "fma", "div_rn",
           "fdiv", "cdiv", "swizzle2d", *_TABLE]
