"""``tl.math``: the element-wise functions Triton keeps in ``triton.language.math`` (the same functions
as ``tl.exp``, ``tl.rsqrt``...), taken from the one table of tl operations (ops.py)."""
from . import ops as _ops
from .unsupported import missing_name as _missing_name

globals().update(_ops.MATH)
__all__ = sorted(_ops.MATH)
__getattr__ = _missing_name("tl.math")
