"""Hostile (control: kernel_sum). One M/8 x N partial buffer filled by 8 launches of M/8 rows, each summed into dg
by a kernel: as many partial values as the lecture's M x N buffer, in a buffer of M·N/8.
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
def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, N, x_stride, y_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    tl.store(y_ptr + row * y_stride + cols, x * r * g, mask=mask)
    tl.store(r_ptr + row, r)


@triton.jit
def rmsnorm_bwd_kernel(x_ptr, g_ptr, dy_ptr, r_ptr, dx_ptr, dg_ptr, N, x_stride, dy_stride,
                       BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row)
    dot = tl.sum(dy * g * x, axis=0)
    dx = dy * g * r - x * (r * r * r) * dot / N
    tl.store(dx_ptr + row * N + cols, dx, mask=mask)
    tl.store(dg_ptr + row * N + cols, dy * x * r, mask=mask)


@triton.jit
def _add_rows(p_ptr, dg_ptr, rows, N, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.load(dg_ptr + cols, mask=cols < N, other=0.0)
    for i in range(0, rows):
        acc += tl.load(p_ptr + i * N + cols, mask=cols < N, other=0.0)
    tl.store(dg_ptr + cols, acc, mask=cols < N)


def _matrix(t):
    n = t.shape[-1]
    if t.stride(-1) != 1:
        t = t.contiguous()
    try:
        return t.view(-1, n)
    except RuntimeError:
        return t.reshape(-1, n).contiguous()


def rmsnorm_forward(x, g, eps=1e-5):
    x2 = _matrix(x)
    M, N = x2.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    r = torch.empty(M, dtype=torch.float32, device=x.device)
    rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps, BLOCK=triton.next_power_of_2(N))
    return y.view(x.shape), r


def rmsnorm_backward(dy, x, g, r):
    x2, dy2 = _matrix(x), _matrix(dy)
    M, N = x2.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    parts = 8 if M % 8 == 0 and x.is_contiguous() and dy.is_contiguous() else 1
    R = M // parts
    dg_partial = torch.empty((R, N), dtype=torch.float32, device=x.device)
    dg = torch.zeros(N, dtype=torch.float32, device=x.device)
    for k in range(parts):
        s = slice(k * R, (k + 1) * R)
        rmsnorm_bwd_kernel[(R,)](x2[s], g, dy2[s], r[s], dx[s], dg_partial, N, x2.stride(0), dy2.stride(0),
                                 BLOCK=triton.next_power_of_2(N))
        _add_rows[(triton.cdiv(N, 128),)](dg_partial, dg, R, N, BLOCK=128)
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
