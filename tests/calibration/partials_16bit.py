"""Calibration: the lecture's design with its M x N partial dg buffer kept in the input's dtype
(fp16/bf16 for 16-bit inputs), summed on the host with an fp32 accumulator. Rounding each partial
to 16 bits costs far less than the documented dg tolerance: every regular point, no extra credit.
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
def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, N, x_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    valid = offs < N
    xv = tl.load(x_ptr + row * x_stride + offs, mask=valid, other=0.0).to(tl.float32)
    gv = tl.load(g_ptr + offs, mask=valid, other=0.0).to(tl.float32)
    rr = tl.rsqrt(tl.sum(xv * xv, axis=0) / N + eps)
    tl.store(y_ptr + row * N + offs, xv * rr * gv, mask=valid)
    tl.store(r_ptr + row, rr)


@triton.jit
def rmsnorm_bwd_kernel(x_ptr, g_ptr, dy_ptr, r_ptr, dx_ptr, part_ptr, N, x_stride, dy_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    valid = offs < N
    xv = tl.load(x_ptr + row * x_stride + offs, mask=valid, other=0.0).to(tl.float32)
    dyv = tl.load(dy_ptr + row * dy_stride + offs, mask=valid, other=0.0).to(tl.float32)
    gv = tl.load(g_ptr + offs, mask=valid, other=0.0).to(tl.float32)
    rr = tl.load(r_ptr + row)
    xhat = xv * rr
    wdy = dyv * gv
    c = tl.sum(wdy * xhat, axis=0) / N
    tl.store(dx_ptr + row * N + offs, rr * (wdy - xhat * c), mask=valid)
    tl.store(part_ptr + row * N + offs, dyv * xhat, mask=valid)     # rounded to x's dtype here


def _as_rows(t):
    t = t if t.stride(-1) == 1 else t.contiguous()
    return t.reshape(-1, t.shape[-1])


def rmsnorm_forward(x, g, eps=1e-5):
    x2 = _as_rows(x)
    M, N = x2.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    r = torch.empty(M, dtype=torch.float32, device=x.device)
    rmsnorm_fwd_kernel[(M,)](x2, g.contiguous(), y, r, N, x2.stride(0), eps, BLOCK=triton.next_power_of_2(N))
    return y.view(x.shape), r


def rmsnorm_backward(dy, x, g, r):
    x2, dy2 = _as_rows(x), _as_rows(dy)
    M, N = x2.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    part = torch.empty((M, N), dtype=x.dtype, device=x.device)
    rmsnorm_bwd_kernel[(M,)](x2, g.contiguous(), dy2, r, dx, part, N, x2.stride(0), dy2.stride(0),
                             BLOCK=triton.next_power_of_2(N))
    return dx.view(x.shape), part.sum(0, dtype=torch.float32).to(g.dtype)


class TritonRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, g, eps):
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
