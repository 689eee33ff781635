"""``libdevice``: CUDA's math library, which kernels call as ``libdevice.rsqrt(x)`` and the like.

On a GPU these are NVIDIA's device functions (some are fast approximations: ``fast_expf``...).
The simulator computes each with torch, correctly rounded, in the block's dtype (fp32 math for
16-bit blocks when the GPU would convert too, as in ``pow``). Integer-bit tricks (``clz``,
``popc``, ``byte_perm``...) are not here; a missing function says so, with its name.
"""
import torch

from ...arithmetic import full_rank
from ...blocks import as_block, tensor
from ... import runtime
from .. import core, names


def _unary(torch_fn, name, out_bool=False):
    def f(x):
        x = as_block(x)
        if not x.dtype.is_floating():
            raise TypeError(f"{runtime.location()}: libdevice.{name} expects a floating-point block, got {x.dtype!r}")
        h = torch_fn(x.handle)
        return tensor(h, core.int1 if out_bool else x.dtype, x.shape)
    f.__name__ = name
    f.__doc__ = f"libdevice.{name}, computed by torch (correctly rounded)."
    return f


def _binary(torch_fn, name):
    def f(x, y):
        (a, b), ty, shape = core._promoted(x, y)
        if not ty.is_floating():
            raise TypeError(f"{runtime.location()}: libdevice.{name} expects floating-point blocks, got {ty!r}")
        return tensor(torch_fn(full_rank(a, ty, shape), full_rank(b, ty, shape)), ty, shape)
    f.__name__ = name
    f.__doc__ = f"libdevice.{name}, computed by torch (correctly rounded)."
    return f


_UNARY = {
    "sqrt": torch.sqrt, "sqrt_rn": torch.sqrt, "sqrt_rz": torch.sqrt, "rsqrt": torch.rsqrt, "rsqrt_rn": torch.rsqrt,
    "exp": torch.exp, "fast_expf": torch.exp, "exp2": torch.exp2, "exp10": lambda h: torch.pow(10.0, h),
    "expm1": torch.expm1, "log": torch.log, "fast_logf": torch.log, "log2": torch.log2, "log10": torch.log10,
    "log1p": torch.log1p, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": torch.asin,
    "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh,
    "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh, "erf": torch.erf, "erfc": torch.erfc,
    "erfinv": torch.erfinv, "lgamma": torch.lgamma, "floor": torch.floor, "ceil": torch.ceil,
    "trunc": torch.trunc, "round": torch.round, "rint": torch.round, "nearbyint": torch.round,
    "abs": torch.abs, "rcp_rn": torch.reciprocal,
    "saturatef": lambda h: torch.clamp(h, 0.0, 1.0), "cbrt": lambda h: torch.sign(h) * torch.abs(h).pow(1 / 3),
}
_BOOL = {"isnan": torch.isnan, "isinf": torch.isinf, "isfinited": torch.isfinite, "finitef": torch.isfinite,
         "signbit": torch.signbit}
_BINARY = {"pow": torch.pow, "fast_powf": torch.pow, "fmod": torch.fmod,
           "atan2": torch.atan2, "hypot": torch.hypot, "copysign": torch.copysign, "div_rn": torch.div,
           "fast_dividef": torch.div, "remainder": torch.remainder, "nextafter": torch.nextafter}

for _name, _fn in _UNARY.items():
    globals()[_name] = _unary(_fn, _name)
for _name, _fn in _BOOL.items():
    globals()[_name] = _unary(_fn, _name, out_bool=True)
for _name, _fn in _BINARY.items():
    globals()[_name] = _binary(_fn, _name)


def fma(x, y, z):
    """libdevice.fma: x * y + z (a GPU rounds once; here the product is rounded first)."""
    return x * y + z


fma_rn = fma


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    if name in names.LIBDEVICE:
        where = f"{runtime.location()}: " if runtime.CURRENT is not None else ""
        raise core._Unsupported(f"{where}libdevice.{name} is not in mini_triton's libdevice (Triton has it; the "
                               f"simulator has the math functions kernels commonly call: "
                               f"{', '.join(sorted([*_UNARY, *_BINARY])[:12])}, ...); write it with tl operations, "
                               f"or see mini_triton/README.md")
    raise core.unsupported(name, "libdevice")
