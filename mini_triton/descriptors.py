"""Tensor descriptors: blocks addressed by their offsets in a tensor of known shape.

``tl.make_tensor_descriptor(base, shape, strides, block_shape)`` describes a tensor in global
memory; ``desc.load([i, j])`` reads the block of ``block_shape`` whose first element is at
``(i, j)``, and ``desc.store([i, j], v)`` writes one. On a Hopper GPU a descriptor load is one TMA
copy of a whole block: what lies outside the descriptor's shape reads as zero, and a store writes
only what lies inside. The simulator builds the block's pointers and mask from the offsets and
hands them to memory.load and memory.store, so bounds checks, race checks and traffic counts apply
as they do to pointer arithmetic.
"""
from __future__ import annotations

import torch

from . import dtypes
from . import runtime
from .blocks import Affine, as_block, check_shape, make_int, tensor, unwrap
from .errors import CompilationError
from .memory import load, store


class TensorDescriptor:
    """``tl.make_tensor_descriptor``: a tensor in global memory (base, shape, strides), read and
    written a block of ``block_shape`` at a time."""

    def __init__(self, base, shape, strides, block_shape, padding_option="zero"):
        self.base = as_block(base)
        if not self.base.dtype.is_ptr() or self.base.shape:
            raise TypeError(f"{runtime.location()}: tl.make_tensor_descriptor needs a tensor argument as its base "
                            f"(a scalar pointer), got a {self.base.dtype!r} block of shape {list(self.base.shape)}")
        self.shape, self.strides = list(shape), list(strides)
        self.block_shape = check_shape(tuple(block_shape), "block_shape")
        if not len(self.shape) == len(self.strides) == len(self.block_shape):
            raise CompilationError(f"{runtime.location()}: tl.make_tensor_descriptor: shape, strides and "
                                   f"block_shape must have one entry per dimension")
        if not isinstance(unwrap(self.strides[-1]), tensor) and unwrap(self.strides[-1]) != 1:
            raise CompilationError(f"{runtime.location()}: a tensor descriptor's last dimension must be contiguous "
                                   f"(stride 1), got stride {unwrap(self.strides[-1])}")
        self._check_alignment()
        if padding_option != "zero":
            raise NotImplementedError(f"{runtime.location()}: tensor descriptors with padding_option="
                                      f"{padding_option!r} are not supported by mini_triton (only 'zero')")

    def _check_alignment(self):
        """The GPU's TMA copies need every stride but the last to be a multiple of 16 bytes."""
        size = max(1, self.base.dtype.element_ty.primitive_bitwidth // 8)
        for d, stride in enumerate(self.strides[:-1]):
            v = unwrap(stride)
            values = v.handle.reshape(-1).tolist() if isinstance(v, tensor) else [v]
            bad = next((int(x) for x in values if int(x) * size % 16), None)
            if bad is not None:
                raise CompilationError(f"{runtime.location()}: stride must be 16-byte aligned: dimension {d} of the "
                                       f"tensor descriptor has stride {bad} ({bad * size} bytes); the GPU's TMA copies "
                                       f"need every stride but the last to be a multiple of 16 bytes")

    def _block(self, offsets):
        """Pointers to the block at ``offsets``, and the mask of its elements inside the descriptor."""
        offsets = list(offsets)
        if len(offsets) != len(self.block_shape):
            raise CompilationError(f"{runtime.location()}: a tensor descriptor of {len(self.block_shape)} "
                                   f"dimensions needs {len(self.block_shape)} offsets, got {len(offsets)}")
        ptr, mask, ndim = self.base, None, len(self.block_shape)
        for d, (off, size) in enumerate(zip(offsets, self.block_shape)):
            lanes = make_int(dtypes.int32, (size,), Affine(torch.zeros(1, dtype=torch.int64), (1,)))
            idx = (lanes + off)[tuple(slice(None) if i == d else None for i in range(ndim))]
            inside = idx < self.shape[d]
            ptr = ptr + idx * self.strides[d]
            mask = inside if mask is None else mask & inside
        return ptr, mask

    def load(self, offsets):
        ptr, mask = self._block(offsets)
        return load(ptr, mask=mask, other=0)

    def store(self, offsets, value):
        ptr, mask = self._block(offsets)
        store(ptr, value, mask=mask)
