"""Calibration: one program per row, and dg accumulated with tl.atomic_add into N fp32 values.
Correct, race-free, and fused. But float additions that arrive in the order programs run give a
dg whose last bits change from run to run on a GPU: 4.7 fails (the simulator shuffles the order
too), and the extra credit, a deterministic reduction, is refused with the reason.
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
def rmsnorm_fwd_kernel(X, G, Y, R, N, stride_x, eps, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64)
    j = tl.arange(0, BLOCK)
    m = j < N
    x = tl.load(X + i * stride_x + j, mask=m, other=0.0).to(tl.float32)
    g = tl.load(G + j, mask=m, other=0.0).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(Y + i * N + j, x * r * g, mask=m)
    tl.store(R + i, r)


@triton.jit
def rmsnorm_bwd_kernel(X, G, DY, R, DX, DG, N, stride_x, stride_dy, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64)
    j = tl.arange(0, BLOCK)
    m = j < N
    x = tl.load(X + i * stride_x + j, mask=m, other=0.0).to(tl.float32)
    dy = tl.load(DY + i * stride_dy + j, mask=m, other=0.0).to(tl.float32)
    g = tl.load(G + j, mask=m, other=0.0).to(tl.float32)
    r = tl.load(R + i)
    xh = x * r
    t = dy * g
    tl.store(DX + i * N + j, r * (t - xh * (tl.sum(t * xh, axis=0) / N)), mask=m)
    tl.atomic_add(DG + j, dy * xh, mask=m)


def rows(t):
    return (t if t.stride(-1) == 1 else t.contiguous()).reshape(-1, t.shape[-1])


def rmsnorm_forward(x, g, eps=1e-5):
    x2 = rows(x)
    M, N = x2.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    r = torch.empty(M, dtype=torch.float32, device=x.device)
    rmsnorm_fwd_kernel[(M,)](x2, g.contiguous(), y, r, N, x2.stride(0), eps, BLOCK=triton.next_power_of_2(N))
    return y.view(x.shape), r


def rmsnorm_backward(dy, x, g, r):
    x2, dy2 = rows(x), rows(dy)
    M, N = x2.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    dg = torch.zeros(N, dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(M,)](x2, g.contiguous(), dy2, r, dx, dg, N, x2.stride(0), dy2.stride(0),
                             BLOCK=triton.next_power_of_2(N))
    return dx.view(x.shape), dg.to(g.dtype)


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
