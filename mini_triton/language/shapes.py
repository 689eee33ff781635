"""Shapes of blocks: reshape, transpose, broadcast, join and split, interleave, flip.

These move lanes around inside one program's block (on a GPU, between its threads' registers); the
values do not change. Block shapes stay compile-time powers of 2.
"""
import torch

from .. import runtime
from ..blocks import as_block, broadcast_shape, const_int, full_handle, tensor, unwrap
from ..shapes import expand_dims, join, reshape, split, trans
from ..errors import CompilationError
from .reductions import axis_index

__all__ = ["reshape", "view", "ravel", "trans", "permute", "expand_dims", "unsqueeze", "squeeze", "broadcast_to",
           "broadcast", "join", "split", "interleave", "flip"]

view = reshape
permute = trans


def ravel(x):
    return reshape(x, (as_block(x).numel,))


def unsqueeze(x, dim):
    """A new dimension of size 1 at ``dim`` (tl.expand_dims of one axis)."""
    return expand_dims(x, dim)


def squeeze(x, dim):
    """``x`` without its dimension ``dim``, which must have size 1."""
    x = as_block(x)
    ax = axis_index(dim, len(x.shape))
    if x.shape[ax] != 1:
        raise CompilationError(f"{runtime.location()}: tl.squeeze: dimension {ax} of a block of shape "
                               f"{list(x.shape)} has size {x.shape[ax]}, not 1")
    return tensor(x.handle.reshape(x.lead, *x.shape[:ax], *x.shape[ax + 1:]), x.dtype, x.shape[:ax] + x.shape[ax + 1:])


def broadcast_to(input, *shape):
    x = as_block(input)
    if len(shape) == 1 and isinstance(unwrap(shape[0]), (tuple, list)):
        shape = tuple(unwrap(shape[0]))
    shape = tuple(const_int(s, "broadcast_to shape") for s in shape)
    if broadcast_shape(x.shape, shape) != shape:
        raise CompilationError(f"{runtime.location()}: cannot broadcast {list(x.shape)} to {list(shape)}")
    return tensor(full_handle(x, shape), x.dtype, shape, buf=x.buf)


def broadcast(input, other):
    a, b = as_block(input), as_block(other)
    shape = broadcast_shape(a.shape, b.shape)
    return broadcast_to(a, shape), broadcast_to(b, shape)


def interleave(a, b):
    """a[0], b[0], a[1], b[1], ... along the last dimension: tl.join, then the last two dims merged."""
    j = join(a, b)
    if len(j.shape) == 1:                      # two scalars: a block of 2
        return j
    return reshape(j, j.shape[:-2] + (j.shape[-2] * 2,))


def flip(x, dim=None):
    """``x`` reversed along ``dim`` (the last dimension by default)."""
    x = as_block(x)
    ax = axis_index(len(x.shape) - 1 if dim is None else dim, len(x.shape))
    return tensor(torch.flip(x.handle, (ax + 1,)), x.dtype, x.shape)
