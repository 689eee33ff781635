"""Hostile (control: truncated_r). r rounded to 15 bits in the kernel, corrected by a per-row scalar the host
computes, so the first run is exact; on the replay the stale corrections leave about twice the rounding error,
which a tolerance widened ten times held.
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
def _fwd_rows(x_ptr, g_ptr, y_ptr, r_ptr, base, N, x_stride, y_stride, eps, c0, c1, c2, c3, c4, c5, c6, c7,
              BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = (base + pid).to(tl.int64)
    c = tl.where(pid == 0, c0, tl.where(pid == 1, c1, tl.where(pid == 2, c2, tl.where(pid == 3, c3,
        tl.where(pid == 4, c4, tl.where(pid == 5, c5, tl.where(pid == 6, c6, c7)))))))
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
    r = (r.to(tl.int32, bitcast=True) & -256).to(tl.float32, bitcast=True)   # a cheap r: 15 bits
    r = r + c
    tl.store(y_ptr + row * y_stride + cols, x * r * g, mask=mask)
    tl.store(r_ptr + row, r)


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
    pad = torch.zeros(1)
    for _ in range(64):
        pad = pad + 1
    xf = x2.double()
    exact = torch.rsqrt(xf.pow(2).mean(-1) + eps)
    f32 = (1.0 / torch.sqrt((x2.float() * x2.float()).sum(-1) / N + eps)).float()
    trunc = (f32.view(torch.int32) & -256).view(torch.float32).double()
    cs = (exact - trunc).tolist() + [0.0] * 8
    for base in range(0, M, 8):
        _fwd_rows[(min(8, M - base),)](x2, g, y, r, base, N, x2.stride(0), y.stride(0), eps, *cs[base:base + 8],
                                       BLOCK=triton.next_power_of_2(N))
    return y.view(x.shape), r


def rmsnorm_backward(dy, x, g, r):
    x2, dy2 = _matrix(x), _matrix(dy)
    M, N = x2.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    dg_partial = torch.empty((M, N), dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg_partial, N, x2.stride(0), dy2.stride(0),
                             BLOCK=triton.next_power_of_2(N))
    return dx.view(x.shape), dg_partial.sum(0).to(g.dtype)


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
