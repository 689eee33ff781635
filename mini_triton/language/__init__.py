"""``triton.language`` for the simulator: ``tl = mini_triton.language``."""
from . import core, extra, math  # noqa: F401 -- tl.extra.libdevice, tl.math
from .core import *  # noqa: F401,F403
from .core import (abs, cast_ as cast, constexpr, dtype, max, min, pointer_type, range, sum)  # noqa: F401
from ..blocks import tensor  # noqa: F401
from ..dtypes import (bfloat16, float16, float32, float64, int1, int8, int16, int32, int64,  # noqa: F401
                      uint8, uint16, uint32, uint64)

block_type = tensor

# What Triton's ``tl`` has, and nothing else: names the modules above import for their own use (torch, memory,
# runtime, Affine...) would otherwise resolve as ``tl.torch`` and run here while failing on a GPU. A name left
# out reaches __getattr__ below, which says whether Triton has it.
from . import names as _names  # noqa: E402
for _name in [n for n in globals() if not n.startswith("_") and n not in _names.TL | {"core", "math", "extra"}]:
    del globals()[_name]
del _name


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise core.unsupported(name)
