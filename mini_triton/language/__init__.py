"""``triton.language`` for the simulator: ``tl = mini_triton.language``.

``tl`` holds Triton's names and nothing else (``__all__``): every operation of the table in ops.py,
the types, ``tl.math`` and ``tl.extra``. A name left out reaches ``__getattr__``, which says whether
Triton has it (names.py): a kernel that runs here must not use a name that fails on a GPU.
"""
from . import extra, math
from . import ops as _ops
from .unsupported import missing_name as _missing_name
from ..blocks import MAX_NUMEL as _MAX_NUMEL
from ..blocks import constexpr, tensor
from ..dtypes import (bfloat16, dtype, float16, float32, float64, int1, int8, int16, int32, int64, pointer_type,
                      uint8, uint16, uint32, uint64)

globals().update(_ops.TL)
block_type = tensor
TRITON_MAX_TENSOR_NUMEL = constexpr(_MAX_NUMEL)

__all__ = ["extra", "math", "constexpr", "tensor", "block_type", "dtype", "pointer_type", "TRITON_MAX_TENSOR_NUMEL",
           "int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16",
           "float32", "float64"]
__all__ += list(_ops.TL)

# The language's own modules (creation, ops, names...) are attributes of the package once imported:
# they are not Triton's names.
for _name in [n for n in globals() if not n.startswith("_") and n not in __all__]:
    del globals()[_name]

__getattr__ = _missing_name("tl")
