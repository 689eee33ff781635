"""Reductions and scans along an axis of a block: ``tl.sum``, ``tl.max``, ``tl.argmax``, ``tl.cumsum``...

A reduction combines the lanes of one program (its threads cooperate through registers and shared
memory); it never crosses programs. The result keeps the input's type, as in Triton: fp16/bf16 sums
add in 16 bits, modelled on a GPU's reduction tree (see _sum_16bit).
"""
import builtins

import torch

from .. import dtypes
from .. import runtime
from ..blocks import as_block, const_int, make_int
from ..errors import CompilationError
from .creation import dtype_arg
from .elementwise import exp, fdiv, result

__all__ = ["sum", "max", "min", "argmax", "argmin", "cumsum", "cumprod", "softmax"]


def axis_index(axis, ndim):
    """``axis`` (a constexpr int, negative counting from the end) as an index into a block's dims."""
    axis = const_int(axis, "axis")
    if not -ndim <= axis < ndim:
        raise CompilationError(f"{runtime.location()}: axis {axis} is out of range for a {ndim}-D block")
    return axis % ndim


def _reduce_setup(x, axis):
    x = as_block(x)
    if runtime.CURRENT is not None and x.shape and x.numel > 1:
        runtime.CURRENT.note_wait()
    if not x.shape:
        raise CompilationError(f"{runtime.location()}: cannot reduce a scalar")
    if axis is None:
        h = x.handle.reshape(x.lead, -1)
        return x, h, 1, ()
    ax = axis_index(axis, len(x.shape))
    return x, x.handle, ax + 1, x.shape[:ax] + x.shape[ax + 1:]


def _keep(shape_in, axis, out_shape, keep_dims):
    if not keep_dims:
        return out_shape
    if axis is None:
        return (1,) * len(shape_in)
    ax = axis_index(axis, len(shape_in))
    return shape_in[:ax] + (1,) + shape_in[ax + 1:]


def _sum_type(d):
    if d.is_bool() or (d.kind in ("int", "uint") and d.primitive_bitwidth < 32):
        return dtypes.int32 if d.kind != "uint" else dtypes.uint32
    return d


def sum(input, axis=None, keep_dims=False, dtype=None):
    """Sum along ``axis``, in the input's type as Triton does (small ints in int32): fp32 blocks add
    in fp32, and fp16/bf16 blocks in fp16/bf16, as a GPU does it (see _sum_16bit). Convert to fp32
    first (``x.to(tl.float32)``) to sum 16-bit values accurately."""
    x, h, dim, shape = _reduce_setup(input, axis)
    out_ty = dtype_arg(dtype) if dtype is not None else _sum_type(x.dtype)
    if out_ty.is_floating() and out_ty.primitive_bitwidth < 32:
        r = _sum_16bit(h.to(out_ty.torch), dim, out_ty, runtime.current().launch.num_warps)
    elif out_ty.is_floating():
        acc = torch.float64 if out_ty is dtypes.float64 else torch.float32
        r = h.to(acc).sum(dim).to(out_ty.torch)
    else:
        r = h.to(torch.int64).sum(dim)
    shape = _keep(x.shape, axis, shape, keep_dims)
    return result(r.reshape(r.shape[0], *shape), out_ty, shape)


def _sum_16bit(h, dim, ty, num_warps):
    """A sum in fp16/bf16 as a GPU computes it: the 32 * num_warps threads of a program each add up
    their share of the elements one after another, rounding to 16 bits after every addition, then
    the threads' partial sums are added pairwise. A long row loses most of its small terms to the
    rounding of a large running sum: that is why kernels convert to fp32 before tl.sum."""
    v = h.movedim(dim, -1).to(torch.float32)
    n = v.shape[-1]
    threads = builtins.min(n, 32 * num_warps)
    v = v.reshape(*v.shape[:-1], n // threads, threads)        # thread t holds elements t, t + threads, ...
    acc = v[..., 0, :]
    for i in builtins.range(1, n // threads):
        acc = (acc + v[..., i, :]).to(ty.torch).to(torch.float32)
    while acc.shape[-1] > 1:
        half = acc.shape[-1] // 2
        acc = (acc[..., :half] + acc[..., half:]).to(ty.torch).to(torch.float32)
    return acc[..., 0].to(ty.torch)


def _minmax(input, axis, keep_dims, return_indices, which):
    x, h, dim, shape = _reduce_setup(input, axis)
    if x.dtype.is_floating() and x.dtype.primitive_bitwidth < 32:
        hv = h.float()
    else:
        hv = h
    vals, idx = (torch.max if which == "max" else torch.min)(hv, dim)
    shape_k = _keep(x.shape, axis, shape, keep_dims)
    v = result(vals.to(h.dtype).reshape(vals.shape[0], *shape_k), x.dtype, shape_k)
    if return_indices:
        return v, make_int(dtypes.int32, shape_k, handle=idx.reshape(idx.shape[0], *shape_k))
    return v


def max(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    """Maximum along ``axis`` (and its index with return_indices=True)."""
    return _minmax(input, axis, keep_dims, return_indices, "max")


def min(input, axis=None, return_indices=False, return_indices_tie_break_left=True, keep_dims=False):
    return _minmax(input, axis, keep_dims, return_indices, "min")


def argmax(input, axis, tie_break_left=True, keep_dims=False):
    """Index of the maximum along ``axis`` (the first one on ties)."""
    return _minmax(input, axis, keep_dims, True, "max")[1]


def argmin(input, axis, tie_break_left=True, keep_dims=False):
    return _minmax(input, axis, keep_dims, True, "min")[1]


def _scan(input, axis, reverse, fn):
    """A prefix scan in the input's type; fp16/bf16 scans round to 16 bits at every step, as on a GPU."""
    x = as_block(input)
    ax = axis_index(axis, len(x.shape)) + 1
    h = x.handle
    out_ty = _sum_type(x.dtype)
    if out_ty.is_floating():
        h = h.to(torch.float64 if out_ty is dtypes.float64 else torch.float32)
    else:
        h = h.to(torch.int64)
    if reverse:
        h = h.flip(ax)
    if out_ty.is_floating() and out_ty.primitive_bitwidth < 32:
        r = _scan_16bit(h, ax, out_ty, torch.add if fn is torch.cumsum else torch.mul)
    else:
        r = fn(h, ax)
    if reverse:
        r = r.flip(ax)
    return result(r.to(out_ty.torch) if out_ty.is_floating() else r, out_ty, x.shape)


def _scan_16bit(h, ax, ty, op):
    out = h.clone()
    for i in builtins.range(1, h.shape[ax]):
        step = op(out.select(ax, i - 1), h.select(ax, i)).to(ty.torch).to(torch.float32)
        out.select(ax, i).copy_(step)
    return out


def cumsum(input, axis=0, reverse=False, dtype=None):
    """Inclusive prefix sum along ``axis``."""
    return _scan(input, axis, reverse, torch.cumsum)


def cumprod(input, axis=0, reverse=False):
    return _scan(input, axis, reverse, torch.cumprod)


def softmax(x, dim=None, keep_dims=None, ieee_rounding=False):
    """exp(x - max) / sum along ``dim`` (0 by default, unlike torch.softmax), as Triton's tl.softmax."""
    dim = 0 if dim is None else dim
    num = exp(x - max(x, dim, keep_dims=True))
    return fdiv(num, sum(num, dim, keep_dims=True), ieee_rounding)
