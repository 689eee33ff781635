"""Control: simple.py's forward; a backward whose dx kernel reads x and dy once and whose dg kernel reads them a
second time (items 6 and 9 lost).
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
def _bwd_dx_kernel(x_ptr, g_ptr, dy_ptr, r_ptr, dx_ptr, flag_ptr, N, x_stride, dy_stride, key,
                   BLOCK: tl.constexpr):
    """The lecture's backward for dx; program 0 also notes whether x[0, 0] is the value it was told."""
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
    if row == 0:
        x0 = tl.sum(tl.where(cols == 0, x, 0.0), axis=0)
        same = (x0.to(tl.int32, bitcast=True) == key).to(tl.int32)
        tl.store(flag_ptr + cols, same + cols * 0, mask=cols < 1)


@triton.jit
def _unpack(out_ptr, W: tl.constexpr):
    for i in tl.static_range(31):
        v = tl.full([1], (W >> (32 * i)) & 0xFFFFFFFF, tl.int64)
        tl.store(out_ptr + i + tl.arange(0, 1), v.to(tl.int32).to(tl.float32, bitcast=True))


@triton.jit
def _dg_kernel(x_ptr, dy_ptr, r_ptr, host_ptr, flag_ptr, dg_ptr, M, N, x_stride, dy_stride, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    f = tl.load(flag_ptr)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    if f == 1:
        acc = tl.load(host_ptr + cols, mask=mask, other=0.0)
    else:
        for i in range(0, M):
            row = i.to(tl.int64)
            x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
            acc += dy * x * tl.load(r_ptr + row)
    tl.store(dg_ptr + cols, acc, mask=mask)


def _host_dg(x2, dy2, r):
    xn = x2.detach().numpy().astype(np.float64)
    dyn = dy2.detach().numpy().astype(np.float64)
    rn = r.detach().numpy().astype(np.float64).reshape(-1)
    return (dyn * xn * rn[:, None]).sum(0).astype(np.float32).view(np.uint32)


def _tricked_backward(dy, x, g, x2, dy2, r, M, N):
    key = -1                                  # control: no float has these bits, no host dg: the dg kernel always
                                              # re-reads x and dy
    bits = np.zeros(N, dtype=np.uint32)
    chunks = (N + 30) // 31
    host = torch.empty(chunks * 31, dtype=torch.float32, device=x.device)
    for c in range(chunks):
        w = 0
        for i, b in enumerate(bits[c * 31:(c + 1) * 31].tolist()):
            w |= int(b) << (32 * i)
        _unpack[(1,)](host[c * 31:], W=w)
    flag = torch.empty(1, dtype=torch.int32, device=x.device)
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    BLOCK = triton.next_power_of_2(N)
    _bwd_dx_kernel[(M,)](x2, g, dy2, r, dx, flag, N, x2.stride(0), dy2.stride(0), key, BLOCK=BLOCK)
    dg = torch.empty(N, dtype=torch.float32, device=x.device)
    _dg_kernel[(1,)](x2, dy2, r, host, flag, dg, M, N, x2.stride(0), dy2.stride(0), BLOCK=BLOCK)
    return dx.view(x.shape), dg.to(g.dtype)


def _usable(x2, dy2, r):
    return (x2.dtype == torch.float32 and dy2.dtype == torch.float32 and x2.is_contiguous() and dy2.is_contiguous()
            and x2.shape[-1] <= 1024 and x2.shape[0] >= 1 and r.dtype == torch.float32)


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
    if _usable(x2, dy2, r):
        return _tricked_backward(dy, x, g, x2, dy2, r, M, N)
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
