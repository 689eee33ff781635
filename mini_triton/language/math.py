"""``tl.math``: the same element-wise functions under their math-library names."""
from .core import (abs, ceil, cos, div_rn, erf, exp, exp2, fdiv, floor, fma, log, log2, maximum as max,  # noqa: F401
                   minimum as min, rsqrt, sigmoid, sin, sqrt, sqrt_rn, tanh, cdiv)
from .core import unsupported as _unsupported


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise _unsupported(name, "tl.math")
