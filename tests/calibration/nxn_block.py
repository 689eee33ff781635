"""Calibration: the backward computes dx as the Jacobian of the normalisation times dy·g, built as
a BLOCK x BLOCK tile in one program. Right at every N up to 1024 (a 1024 x 1024 tile is 2^20
elements, Triton's limit), but at N = 16384 the tile would have 2^28 elements: Triton refuses
to compile it, and so does the simulator, naming the block and the limit. Only 4.4 fails (plus no
extra credit: the lecture's M x N partial buffer).
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
    j = tl.arange(0, BLOCK)
    mask = j < N
    x = tl.load(x_ptr + row * x_stride + j, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + j, mask=mask, other=0.0).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(y_ptr + row * N + j, x * r * g, mask=mask)
    tl.store(r_ptr + row, r)


@triton.jit
def rmsnorm_bwd_kernel(x_ptr, g_ptr, dy_ptr, r_ptr, dx_ptr, dg_ptr, N, x_stride, dy_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    j = tl.arange(0, BLOCK)
    mask = j < N
    x = tl.load(x_ptr + row * x_stride + j, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * dy_stride + j, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + j, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row)
    xhat = x * r
    # d xhat_i / d x_k = r (delta_ik - xhat_i xhat_k / N): the whole Jacobian as one tile
    eye = tl.where(j[:, None] == j[None, :], 1.0, 0.0)
    jac = (eye - xhat[:, None] * xhat[None, :] / N) * r
    dx = tl.sum(jac * (dy * g)[:, None], axis=0)
    tl.store(dx_ptr + row * N + j, dx, mask=mask)
    tl.store(dg_ptr + row * N + j, dy * xhat, mask=mask)


def _rows(t):
    return (t if t.stride(-1) == 1 else t.contiguous()).reshape(-1, t.shape[-1])


def rmsnorm_forward(x, g, eps=1e-5):
    x2 = _rows(x)
    M, N = x2.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    r = torch.empty(M, dtype=torch.float32, device=x.device)
    rmsnorm_fwd_kernel[(M,)](x2, g.contiguous(), y, r, N, x2.stride(0), eps, BLOCK=triton.next_power_of_2(N))
    return y.view(x.shape), r


def rmsnorm_backward(dy, x, g, r):
    x2, dy2 = _rows(x), _rows(dy)
    M, N = x2.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    dg_rows = torch.empty((M, N), dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(M,)](x2, g.contiguous(), dy2, r, dx, dg_rows, N, x2.stride(0), dy2.stride(0),
                             BLOCK=triton.next_power_of_2(N))
    return dx.view(x.shape), dg_rows.sum(0).to(g.dtype)


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
