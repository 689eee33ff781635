"""Shape operations: blocks that hold the same lanes in another arrangement.

``x[:, None]`` inserts a dimension of size 1 (broadcasting then repeats it), ``tl.reshape``
regroups the lanes, ``tl.trans``/``tl.permute`` reorder the dimensions, ``tl.join`` and
``tl.split`` pair two blocks along a new last dimension and take them apart. The shapes they
produce are compile-time facts: powers of 2, set by constexprs (blocks.check_shape). Inserting
a dimension keeps an affine block affine (a stride of 0), so ``offs[:, None]`` in a 2-D tile's
pointers costs nothing.

This module gives blocks (blocks.tensor) the shape methods Triton's tensors have (``x[...]``,
``.reshape()``, ``.trans()``, ``.T``...) when it is imported; the package imports it with the
rest of the simulator.
"""
from __future__ import annotations

import math

import torch

from . import runtime
from .blocks import Affine, as_block, broadcast_shape, check_numel, check_shape, const_int, full_handle, tensor, unwrap
from .errors import CompilationError


# ---------------------------------------------------------------------------
# indexing: x[:, None]
# ---------------------------------------------------------------------------
def subscript(blk: tensor, idx) -> tensor:
    if not isinstance(idx, tuple):
        idx = (idx,)
    new_shape, src_dim, view = [], 0, [slice(None)]
    for item in idx:
        if item is None:
            new_shape.append(1)
            view.append(None)
        elif isinstance(item, slice) and item == slice(None):
            if src_dim >= len(blk.shape):
                scalar = (" (a scalar: tl.sum, tl.max and tl.min without axis= reduce the whole block to one "
                          "value; give axis=1 for one value per row)") if not blk.shape else ""
                raise CompilationError(f"{runtime.location()}: too many indices for a block of shape "
                                       f"{list(blk.shape)}{scalar}")
            new_shape.append(blk.shape[src_dim])
            view.append(slice(None))
            src_dim += 1
        elif item is Ellipsis:
            rest = len(blk.shape) - src_dim - sum(1 for i in idx if i is not None and i is not Ellipsis
                                                  and i != slice(None))
            for _ in range(rest):
                new_shape.append(blk.shape[src_dim])
                view.append(slice(None))
                src_dim += 1
        else:
            raise NotImplementedError(f"{runtime.location()}: block indexing supports only ':' and None (got "
                                      f"{item!r}); Triton blocks cannot be sliced or indexed by position: load the "
                                      f"part you need with its own offsets, or use tl.split/tl.where")
    while src_dim < len(blk.shape):
        new_shape.append(blk.shape[src_dim])
        view.append(slice(None))
        src_dim += 1
    return expand_to(blk, tuple(new_shape), tuple(view))


def expand_to(blk: tensor, new_shape, view) -> tensor:
    """Insert singleton dimensions (``view`` is the torch index over the handle)."""
    aff = blk.affine() if (blk.dtype.is_int() or blk.dtype.is_ptr()) else None
    handle = None if blk.symbolic or not blk.shape else blk.handle[view]
    if aff is not None:                          # affine still, whether or not its values were made
        strides, it = [], iter(aff.strides)
        for v in view[1:]:
            strides.append(0 if v is None else next(it))
        return tensor(handle, blk.dtype, new_shape, aff=Affine(aff.base, tuple(strides)), buf=blk.buf)
    return tensor(handle, blk.dtype, new_shape, buf=blk.buf)



def reshape(input, *shape, can_reorder=False):
    x = as_block(input)
    if len(shape) == 1 and isinstance(unwrap(shape[0]), (tuple, list)):
        shape = tuple(unwrap(shape[0]))
    shape = check_shape(shape, "reshape shape")
    if math.prod(shape) != x.numel:
        raise CompilationError(f"{runtime.location()}: cannot reshape a block of shape {list(x.shape)} "
                               f"to {list(shape)}")
    return tensor(x.handle.reshape(x.lead, *shape), x.dtype, shape)


def trans(input, *dims):
    """Transpose a 2-D block (or permute with ``dims``)."""
    x = as_block(input)
    if len(dims) == 1 and isinstance(unwrap(dims[0]), (tuple, list)):
        dims = tuple(unwrap(dims[0]))
    if not dims:
        if len(x.shape) != 2:
            raise CompilationError(f"{runtime.location()}: tl.trans without dims needs a 2-D block, got "
                                   f"shape {list(x.shape)}")
        dims = (1, 0)
    dims = tuple(const_int(d, "trans dim") for d in dims)
    if sorted(dims) != list(range(len(x.shape))):
        raise CompilationError(f"{runtime.location()}: {dims} is not a permutation of the block's dims")
    return tensor(x.handle.permute(0, *(d + 1 for d in dims)), x.dtype, tuple(x.shape[d] for d in dims))


def expand_dims(input, axis):
    """A new dimension of size 1 at ``axis`` (or at each axis of a list)."""
    x = as_block(input)
    axes = unwrap(axis)
    axes = [axes] if not isinstance(axes, (tuple, list)) else list(axes)
    n = len(x.shape) + len(axes)
    axes = sorted(const_int(a, "expand_dims axis") % n for a in axes)
    return x[tuple(None if d in axes else slice(None) for d in range(n))]


def join(a, b):
    """A block with a new last dimension of size 2 holding ``a`` and ``b`` (tl.join; tl.split undoes it).
    The two are broadcast to one shape; their dtypes must match."""
    a, b = as_block(a), as_block(b)
    if a.dtype is not b.dtype:
        raise CompilationError(f"{runtime.location()}: tl.join needs two blocks of one dtype, got "
                               f"{a.dtype!r} and {b.dtype!r}")
    shape = broadcast_shape(a.shape, b.shape)
    check_numel(shape + (2,))
    ha, hb = torch.broadcast_tensors(full_handle(a, shape), full_handle(b, shape))
    return tensor(torch.stack((ha, hb), dim=-1), a.dtype, shape + (2,))


def split(a):
    """(a[..., 0], a[..., 1]) of a block whose last dimension has 2 elements (tl.split)."""
    x = as_block(a)
    if not x.shape or x.shape[-1] != 2:
        raise CompilationError(f"{runtime.location()}: tl.split needs a block whose last dimension has 2 "
                               f"elements (as tl.join makes), got shape {list(x.shape)}")
    h = x.handle
    return tensor(h[..., 0], x.dtype, x.shape[:-1]), tensor(h[..., 1], x.dtype, x.shape[:-1])


# ---------------------------------------------------------------------------
# the shape methods of a block (Triton's tensor has them too)
# ---------------------------------------------------------------------------
def _view(x, *shape):
    return reshape(x, *shape)


tensor.__getitem__ = subscript
tensor.reshape, tensor.view = reshape, _view
tensor.trans = tensor.permute = trans
tensor.T = property(trans)
tensor.expand_dims, tensor.split = expand_dims, split
