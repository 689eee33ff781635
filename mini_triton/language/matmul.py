"""``tl.dot``: the matrix product of two blocks, on a GPU's tensor cores.

Tensor cores multiply tiles of at least 16 x 16 and accumulate in fp32; fp32 inputs are rounded to
tf32 (10 mantissa bits) first unless ``input_precision="ieee"``. The simulator does the same rounding,
then a torch matmul.
"""
import builtins

import torch

from .. import dtypes
from .. import pipeline, runtime
from ..arithmetic import binary
from ..blocks import as_block
from ..errors import CompilationError
from .creation import dtype_arg
from .elementwise import result

__all__ = ["dot"]


def _round_tf32(h: torch.Tensor) -> torch.Tensor:
    """Round fp32 values to tf32 (10 mantissa bits), nearest-even, as tensor cores do."""
    bits = h.contiguous().view(torch.int32).to(torch.int64)
    lsb = (bits >> 13) & 1
    bits = (bits + 0xFFF + lsb) & ~0x1FFF
    bits = torch.where(torch.isfinite(h), bits, h.contiguous().view(torch.int32).to(torch.int64))
    return ((bits + 2**31) % 2**32 - 2**31).to(torch.int32).view(torch.float32)


def dot(input, other, acc=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        out_dtype=dtypes.float32):
    """Matrix product of two blocks (M, K) @ (K, N) on the tensor cores.

    Like Triton, M, N and K must be at least 16, fp32 inputs use tf32 unless
    ``input_precision="ieee"``, and 16-bit inputs accumulate in fp32.
    """
    a, b = as_block(input), as_block(other)
    pipeline.note_dot()                                # the loop's other loads are not pipelined then
    if len(a.shape) not in (2, 3) or len(b.shape) != len(a.shape):
        raise CompilationError(f"{runtime.location()}: tl.dot needs two 2-D (or 3-D) blocks, got "
                               f"{list(a.shape)} and {list(b.shape)}")
    if a.shape[-1] != b.shape[-2]:
        raise CompilationError(f"{runtime.location()}: tl.dot shapes {list(a.shape)} @ {list(b.shape)} "
                               f"do not match")
    M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
    if builtins.min(M, N, K) < 16:
        raise CompilationError(f"{runtime.location()}: tl.dot needs every dimension ≥ 16 (got M={M}, "
                               f"N={N}, K={K}); pad the blocks to 16")
    if a.dtype is not b.dtype:
        raise CompilationError(f"{runtime.location()}: tl.dot operands must have the same dtype, got "
                               f"{a.dtype!r} and {b.dtype!r}")
    out_dtype = dtype_arg(out_dtype)
    if a.dtype.is_int():
        out_dtype = dtypes.int32
        r = torch.matmul(a.handle.to(torch.float64), b.handle.to(torch.float64)).to(torch.int64)
    else:
        prec = input_precision or ("ieee" if allow_tf32 is False else "tf32")
        ha, hb = a.handle.to(torch.float32), b.handle.to(torch.float32)
        if a.dtype is dtypes.float32 and prec == "tf32":
            ha, hb = _round_tf32(ha), _round_tf32(hb)
        if a.dtype is dtypes.float64:
            ha, hb = a.handle, b.handle
        r = torch.matmul(ha, hb)
    shape = a.shape[:-1] + (N,)
    out = result(r.to(dtypes.storage_dtype(out_dtype)), out_dtype, shape)
    if acc is not None:
        out = binary(as_block(acc), out, "add")
    return out
