"""``libdevice``: CUDA's math library, which kernels call as ``libdevice.rsqrt(x)`` and the like.

On a GPU these are NVIDIA's device functions (some are fast approximations: ``fast_expf``...).
The simulator computes each with torch, correctly rounded, in the block's dtype (fp32 math for
16-bit blocks when the GPU would convert too, as in ``pow``): the functions of the element-wise
table (elementwise.py) whose names libdevice has. Integer-bit tricks (``clz``, ``popc``,
``byte_perm``...) are not here; a missing function says so, with its name.
"""
from .. import elementwise as _elementwise
from .. import names as _names
from .. import unsupported as _unsupported
from ..unsupported import missing_name as _missing_name

_BUILD = {**dict.fromkeys(_elementwise.UNARY, _elementwise.unary_function),
          **dict.fromkeys(_elementwise.PREDICATES, _elementwise.predicate_function),
          **dict.fromkeys(_elementwise.BINARY, _elementwise.binary_function)}
globals().update({name: build(name, "libdevice") for name, build in _BUILD.items() if name in _names.LIBDEVICE})
abs = _elementwise.abs
fma = fma_rn = _elementwise.fma

__all__ = sorted([*(n for n in _BUILD if n in _names.LIBDEVICE), "abs", "fma", "fma_rn"])
__getattr__ = _missing_name("libdevice", offered=[*_elementwise.UNARY, *_elementwise.BINARY])
_unsupported.LIBDEVICE.update({name: globals()[name] for name in __all__})   # what a Triton 2 name stands for
