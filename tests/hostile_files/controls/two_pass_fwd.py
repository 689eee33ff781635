"""Control: a forward that reads x three times, once in a first kernel and twice in a second (item 5 lost).
"""
import os

import numpy as np
import torch

if os.environ.get("MINI_TRITON") == "1" or not torch.cuda.is_available():
    import mini_triton as triton
    tl = triton.language
else:
    import triton
    import triton.language as tl


@triton.jit
def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, tab_ptr, flag_ptr, M, N, x_stride, y_stride, eps,
                       BLOCK: tl.constexpr):
    """Pass 2 of a two-pass forward: y from x and r. Where a row's first value is the one the host was told, r
    comes from the host's table; elsewhere the row is left to pass 1 (rmsnorm_r_kernel), which reads it again."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    x0 = tl.sum(tl.where(cols == 0, x, 0.0), axis=0)
    key = tl.load(tab_ptr + row).to(tl.int32, bitcast=True)
    if x0.to(tl.int32, bitcast=True) == key:
        g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        r = tl.load(tab_ptr + M + row)
        tl.store(y_ptr + row * y_stride + cols, x * r * g, mask=mask)
        tl.store(r_ptr + row, r)
        tl.store(flag_ptr + row, 1)
    else:
        tl.store(flag_ptr + row, 0)


@triton.jit
def rmsnorm_r_kernel(x_ptr, g_ptr, y_ptr, r_ptr, flag_ptr, N, x_stride, y_stride, eps, BLOCK: tl.constexpr):
    """Pass 1 and 2 for the rows pass 2 left: r from a first read of x, then y from a second."""
    row = tl.program_id(0).to(tl.int64)
    if tl.load(flag_ptr + row) == 0:
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        r = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
        tl.store(r_ptr + row, r)
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * y_stride + cols, x * r * g, mask=mask)


@triton.jit
def _unpack(out_ptr, W: tl.constexpr):
    for i in tl.static_range(31):
        v = tl.full([1], (W >> (32 * i)) & 0xFFFFFFFF, tl.int64)
        tl.store(out_ptr + i + tl.arange(0, 1), v.to(tl.int32).to(tl.float32, bitcast=True))


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
    keys = np.full(M, 0xFFFFFFFF, dtype=np.uint32)                  # control: bits no input value has
    host_r = np.zeros(M, dtype=np.uint32)
    if x2.dtype == torch.float32 and M * N > 0:
        xn = x2.detach().numpy()
        xd = xn.astype(np.float64)
        host_r = (1.0 / np.sqrt((xd * xd).mean(-1) + eps)).astype(np.float32).view(np.uint32)
    words = np.concatenate([keys, host_r])
    chunks = (2 * M + 30) // 31
    tab = torch.empty(chunks * 31, dtype=torch.float32, device=x.device)
    for c in range(chunks):
        w = 0
        for i, b in enumerate(words[c * 31:(c + 1) * 31].tolist()):
            w |= int(b) << (32 * i)
        _unpack[(1,)](tab[c * 31:], W=w)
    flag = torch.empty(M, dtype=torch.int32, device=x.device)
    BLOCK = triton.next_power_of_2(N)
    rmsnorm_fwd_kernel[(M,)](x2, g, y, r, tab, flag, M, N, x2.stride(0), y.stride(0), eps, BLOCK=BLOCK)
    rmsnorm_r_kernel[(M,)](x2, g, y, r, flag, N, x2.stride(0), y.stride(0), eps, BLOCK=BLOCK)
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
