"""Calibration: programs take their blocks of 8 rows from an int32 ticket counter (tl.atomic_add on one word: the
order they start in), each sums its rows' dg in registers and stores one fp32 partial row; a second kernel adds the
partial rows in a fixed order. Correct, race-free, fused and deterministic, with a partial buffer of M·N/8: every
point and the extra credit. The counter is no partial buffer (an integer only atomics touch, one word).
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
def rmsnorm_bwd_kernel(x_ptr, g_ptr, dy_ptr, r_ptr, dx_ptr, acc_ptr, ticket_ptr, M, N, x_stride, dy_stride, RPP,
                       BLOCK: tl.constexpr, FIXED: tl.constexpr):
    # each program takes the next block of RPP rows from a ticket counter (the order programs start in)
    pid = tl.atomic_add(ticket_ptr, 1).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, RPP):
        row = pid * RPP + i
        ok = row < M
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask & ok, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask & ok, other=0.0).to(tl.float32)
        r = tl.load(r_ptr + row, mask=ok, other=0.0)
        dot = tl.sum(dy * g * x, axis=0)
        dx = dy * g * r - x * (r * r * r) * dot / N
        tl.store(dx_ptr + row * N + cols, dx, mask=mask & ok)
        acc += dy * x * r
    if FIXED:
        # integer sums are exact and associative: atomics in any order give the same bits
        q = (acc.to(tl.float64) * 4294967296.0).to(tl.int64)
        tl.atomic_add(acc_ptr + cols, q, mask=mask)
    else:
        tl.store(acc_ptr + pid * N + cols, acc, mask=mask)


@triton.jit
def _finish(acc_ptr, dg_ptr, N, P, BLOCK: tl.constexpr, FIXED: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < N
    if FIXED:
        q = tl.load(acc_ptr + cols, mask=mask, other=0)
        tl.store(dg_ptr + cols, (q.to(tl.float64) * (1.0 / 4294967296.0)).to(tl.float32), mask=mask)
    else:
        s = tl.zeros([BLOCK], dtype=tl.float32)
        for p in range(0, P):
            s += tl.load(acc_ptr + p * N + cols, mask=mask, other=0.0)
        tl.store(dg_ptr + cols, s, mask=mask)


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
    rpp = 8
    P = triton.cdiv(M, rpp)
    acc = torch.empty((P, N), dtype=torch.float32, device=x.device)
    dg = torch.empty(N, dtype=torch.float32, device=x.device)
    ticket = torch.zeros(1, dtype=torch.int32, device=x.device)
    rmsnorm_bwd_kernel[(P,)](x2, g, dy2, r, dx, acc, ticket, M, N, x2.stride(0), dy2.stride(0), rpp,
                             BLOCK=triton.next_power_of_2(N), FIXED=False)
    _finish[(triton.cdiv(N, 128),)](acc, dg, N, P, BLOCK=128, FIXED=False)
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
