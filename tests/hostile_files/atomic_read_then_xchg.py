"""Hostile (control: serial_plain_rmw). The same read-modify-write through atomics: atomic_max(-inf) as the read,
atomic_xchg of the sum as the write. On a GPU a lost update, as the plain one; programs that exchange different
values into one element depend on the order they run (4.7, and item 9's determinism).
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
def rmsnorm_bwd_kernel(x_ptr, g_ptr, dy_ptr, r_ptr, dx_ptr, dg_ptr, M, N, x_stride, dy_stride, RPP, NP,
                       BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
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
    for i in range(0, NP):
      if i == pid:
        old = tl.atomic_max(dg_ptr + cols, tl.full([BLOCK], float("-inf"), tl.float32), mask=mask)
        tl.atomic_xchg(dg_ptr + cols, old + acc, mask=mask)


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
    dg = torch.zeros(N, dtype=torch.float32, device=x.device)
    P = min(M, 32)
    rpp = triton.cdiv(M, P)
    rmsnorm_bwd_kernel[(triton.cdiv(M, rpp),)](x2, g, dy2, r, dx, dg, M, N, x2.stride(0), dy2.stride(0), rpp, triton.cdiv(M, rpp),
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
