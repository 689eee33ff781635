"""Calibration: the autograd wrapper drops eps (TritonRMSNorm.apply(x, g) runs with the default).
Everything called with eps = 1e-5 is right, and that includes items 1-3; only the eps cases of 4.5
are wrong. One defect, one part (plus no extra credit: the lecture's M x N partial buffer).
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
def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, rstd_ptr, n, row_stride, eps, BLOCK_SIZE: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK_SIZE)
    ok = c < n
    v = tl.load(x_ptr + r * row_stride + c, mask=ok, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(v * v, axis=0) / n + eps)
    w = tl.load(g_ptr + c, mask=ok, other=0.0).to(tl.float32)
    tl.store(y_ptr + r * n + c, v * rstd * w, mask=ok)
    tl.store(rstd_ptr + r, rstd)


@triton.jit
def rmsnorm_bwd_kernel(x_ptr, g_ptr, dy_ptr, rstd_ptr, dx_ptr, dgp_ptr, n, x_row_stride, dy_row_stride,
                       BLOCK_SIZE: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK_SIZE)
    ok = c < n
    v = tl.load(x_ptr + r * x_row_stride + c, mask=ok, other=0.0).to(tl.float32)
    dv = tl.load(dy_ptr + r * dy_row_stride + c, mask=ok, other=0.0).to(tl.float32)
    w = tl.load(g_ptr + c, mask=ok, other=0.0).to(tl.float32)
    rstd = tl.load(rstd_ptr + r)
    vhat = v * rstd
    proj = tl.sum(dv * w * vhat, axis=0) / n
    tl.store(dx_ptr + r * n + c, rstd * (dv * w - vhat * proj), mask=ok)
    tl.store(dgp_ptr + r * n + c, dv * vhat, mask=ok)


def _2d(t):
    if t.stride(-1) != 1:
        t = t.contiguous()
    return t.reshape(-1, t.shape[-1])


def rmsnorm_forward(x, g, eps=1e-5):
    x2 = _2d(x)
    m, n = x2.shape
    y = torch.empty((m, n), dtype=x.dtype, device=x.device)
    rstd = torch.empty(m, dtype=torch.float32, device=x.device)
    rmsnorm_fwd_kernel[(m,)](x2, g.contiguous(), y, rstd, n, x2.stride(0), eps,
                             BLOCK_SIZE=triton.next_power_of_2(n))
    return y.view(x.shape), rstd


def rmsnorm_backward(dy, x, g, rstd):
    x2, dy2 = _2d(x), _2d(dy)
    m, n = x2.shape
    dx = torch.empty((m, n), dtype=x.dtype, device=x.device)
    dgp = torch.empty((m, n), dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(m,)](x2, g.contiguous(), dy2, rstd, dx, dgp, n, x2.stride(0), dy2.stride(0),
                             BLOCK_SIZE=triton.next_power_of_2(n))
    return dx.view(x.shape), dgp.sum(0).to(g.dtype)


class TritonRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, g, eps=1e-5):
        y, rstd = rmsnorm_forward(x, g, eps)
        ctx.save_for_backward(x, g, rstd)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, g, rstd = ctx.saved_tensors
        dx, dg = rmsnorm_backward(dy, x, g, rstd)
        return dx, dg, None


def rmsnorm(x, g, eps=1e-5):
    return TritonRMSNorm.apply(x, g)            # the defect: eps is not passed on
