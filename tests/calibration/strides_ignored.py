"""Calibration: the kernels index rows as row * N, whatever the tensor's strides, and the
wrapper hands them views as they are. Every contiguous input is right; the strided inputs of
4.3 (rows 160 elements apart, every other column) are not. One defect, one part (plus no extra
credit: the lecture's M x N partial buffer).
"""
import os

import torch

if os.environ.get("MINI_TRITON") == "1" or not torch.cuda.is_available():
    import mini_triton as triton
    tl = triton.language
else:
    import triton
    import triton.language as tl


@triton.jit
def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(y_ptr + row * N + cols, x * r * g, mask=mask)
    tl.store(r_ptr + row, r)


@triton.jit
def rmsnorm_bwd_kernel(x_ptr, g_ptr, dy_ptr, r_ptr, dx_ptr, dg_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * N + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row)
    dot = tl.sum(dy * g * x, axis=0)
    tl.store(dx_ptr + row * N + cols, dy * g * r - x * (r * r * r) * dot / N, mask=mask)
    tl.store(dg_ptr + row * N + cols, dy * x * r, mask=mask)


def rmsnorm_forward(x, g, eps=1e-5):
    N = x.shape[-1]
    M = x.numel() // N
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    r = torch.empty(M, dtype=torch.float32, device=x.device)
    rmsnorm_fwd_kernel[(M,)](x, g, y, r, N, eps, BLOCK=triton.next_power_of_2(N))
    return y, r


def rmsnorm_backward(dy, x, g, r):
    N = x.shape[-1]
    M = x.numel() // N
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    dg_partial = torch.empty((M, N), dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(M,)](x, g, dy, r, dx, dg_partial, N, BLOCK=triton.next_power_of_2(N))
    return dx, dg_partial.sum(0).to(g.dtype)


class TritonRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, g, eps=1e-5):
        y, r = rmsnorm_forward(x, g, eps)
        ctx.save_for_backward(x, g, r)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, g, r = ctx.saved_tensors
        dx, dg = rmsnorm_backward(dy, x, g, r)
        return dx, dg, None


def rmsnorm(x, g, eps=1e-5):
    return TritonRMSNorm.apply(x, g, eps)
