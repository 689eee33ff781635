"""RMSNorm written as systems-course students write their first Triton kernels
(https://github.com/stanford-cs336/assignment2-systems, the Triton RMSNorm part, 2024-2025), with the parameters
of the kernels typed the way many of those solutions type them.

Idioms: `from __future__ import annotations` (every annotation a string), kernel parameters annotated
`tl.pointer_type`, `tl.uint32` and `tl.float32` besides `tl.constexpr` (Triton reads a dtype annotation as the
argument's type and ignores one it does not know); pointers to the row's start (`row_start_ptr = x_ptr + row_idx
* x_row_stride`); one program per row; the backward's partial grad_g one row per program, summed by torch; the
Function keeps the block size on ctx.

Expected: every regular point (90): fused kernels, the M x N partial grad_g, so no extra credit (item 9 names its
size).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def rms_fwd(x_ptr: tl.pointer_type, weight_ptr: tl.pointer_type, output_ptr: tl.pointer_type,
            r_ptr: tl.pointer_type, x_row_stride: tl.uint32, output_row_stride: tl.uint32, H: tl.uint32,
            eps: tl.float32, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0).to(tl.int64)
    row_start_ptr = x_ptr + row_idx * x_row_stride
    offsets = tl.arange(0, BLOCK_SIZE)
    mask = offsets < H
    row = tl.load(row_start_ptr + offsets, mask=mask, other=0).to(tl.float32)
    weight = tl.load(weight_ptr + offsets, mask=mask, other=0).to(tl.float32)
    inv_rms = 1.0 / tl.sqrt(tl.sum(row * row) / H + eps)
    output = row * inv_rms * weight
    tl.store(output_ptr + row_idx * output_row_stride + offsets, output.to(output_ptr.dtype.element_ty), mask=mask)
    tl.store(r_ptr + row_idx, inv_rms)


@triton.jit
def rms_bwd(grad_out_ptr: tl.pointer_type, x_ptr: tl.pointer_type, weight_ptr: tl.pointer_type,
            r_ptr: tl.pointer_type, grad_x_ptr: tl.pointer_type, partial_grad_g_ptr: tl.pointer_type,
            grad_out_row_stride: tl.uint32, x_row_stride: tl.uint32, grad_x_row_stride: tl.uint32, H: tl.uint32,
            BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK_SIZE)
    mask = offsets < H
    grad_out = tl.load(grad_out_ptr + row_idx * grad_out_row_stride + offsets, mask=mask, other=0).to(tl.float32)
    x = tl.load(x_ptr + row_idx * x_row_stride + offsets, mask=mask, other=0).to(tl.float32)
    weight = tl.load(weight_ptr + offsets, mask=mask, other=0).to(tl.float32)
    inv_rms = tl.load(r_ptr + row_idx)
    x_hat = x * inv_rms
    gw = grad_out * weight
    grad_x = inv_rms * (gw - x_hat * tl.sum(gw * x_hat) / H)
    tl.store(grad_x_ptr + row_idx * grad_x_row_stride + offsets, grad_x.to(grad_x_ptr.dtype.element_ty), mask=mask)
    tl.store(partial_grad_g_ptr + row_idx * H + offsets, grad_out * x_hat, mask=mask)


def _as_rows(t: torch.Tensor) -> torch.Tensor:
    if t.stride(-1) != 1:
        t = t.contiguous()
    return t.reshape(-1, t.shape[-1])


def rmsnorm_forward(x: torch.Tensor, g: torch.Tensor, eps: float = 1e-5):
    H = x.shape[-1]
    x_2d = _as_rows(x)
    n_rows = x_2d.shape[0]
    y = torch.empty((n_rows, H), dtype=x.dtype, device=x.device)
    r = torch.empty(n_rows, dtype=torch.float32, device=x.device)
    rms_fwd[(n_rows,)](x_2d, g, y, r, x_2d.stride(0), y.stride(0), H, eps, BLOCK_SIZE=triton.next_power_of_2(H))
    return y.view(x.shape), r


def rmsnorm_backward(dy: torch.Tensor, x: torch.Tensor, g: torch.Tensor, r: torch.Tensor):
    H = x.shape[-1]
    x_2d, dy_2d = _as_rows(x), _as_rows(dy)
    n_rows = x_2d.shape[0]
    grad_x = torch.empty((n_rows, H), dtype=x.dtype, device=x.device)
    partial_grad_g = torch.empty((n_rows, H), dtype=torch.float32, device=x.device)
    rms_bwd[(n_rows,)](dy_2d, x_2d, g, r, grad_x, partial_grad_g, dy_2d.stride(0), x_2d.stride(0), grad_x.stride(0),
                       H, BLOCK_SIZE=triton.next_power_of_2(H))
    return grad_x.view(x.shape), partial_grad_g.sum(dim=0).to(g.dtype)


class TritonRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, g: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
        y, r = rmsnorm_forward(x, g, eps)
        ctx.save_for_backward(x, g, r)
        ctx.block_size = triton.next_power_of_2(x.shape[-1])
        return y

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        x, g, r = ctx.saved_tensors
        grad_x, grad_g = rmsnorm_backward(grad_out, x, g, r)
        return grad_x, grad_g, None


def rmsnorm(x: torch.Tensor, g: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return TritonRMSNorm.apply(x, g, eps)
