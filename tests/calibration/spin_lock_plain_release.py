"""Calibration: spin_lock.py with its lock given back by a plain store (``tl.store(lock, 0)``) instead of
atomic_xchg, as much lock code does: the same verdict. The store is the lock's protocol, not a race with the
other programs' atomic_cas, and the lock word's few accesses per row are not a partial buffer's data.
"""
import os

import torch

if os.environ.get("MINI_TRITON") == "1" or not torch.cuda.is_available():
    import mini_triton as triton
    tl = triton.language
else:
    import triton
    import triton.language as tl

GROUPS = 32


@triton.jit
def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, n_cols, stride, eps, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    keep = cols < n_cols
    a = tl.load(x_ptr + pid * stride + cols, mask=keep, other=0.0).to(tl.float32)
    w = tl.load(g_ptr + cols, mask=keep, other=0.0).to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.sum(a * a, axis=0) / n_cols + eps)
    tl.store(y_ptr + pid * n_cols + cols, a * inv * w, mask=keep)
    tl.store(r_ptr + pid, inv)


@triton.jit
def rmsnorm_bwd_kernel(x_ptr, g_ptr, dy_ptr, r_ptr, dx_ptr, dw_ptr, lock_ptr, n_cols, x_stride, dy_stride,
                       GROUPS: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    keep = cols < n_cols
    a = tl.load(x_ptr + pid * x_stride + cols, mask=keep, other=0.0).to(tl.float32)
    da = tl.load(dy_ptr + pid * dy_stride + cols, mask=keep, other=0.0).to(tl.float32)
    w = tl.load(g_ptr + cols, mask=keep, other=0.0).to(tl.float32)
    inv = tl.load(r_ptr + pid)
    ahat = a * inv
    wda = da * w
    mean = tl.sum(ahat * wda, axis=0) / n_cols
    tl.store(dx_ptr + pid * n_cols + cols, (wda - ahat * mean) * inv, mask=keep)
    # accumulate this row's dg into its group's partial row, one program at a time
    group = pid % GROUPS
    lock = lock_ptr + group
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    dw = tl.load(dw_ptr + group * n_cols + cols, mask=keep, other=0.0)
    tl.store(dw_ptr + group * n_cols + cols, dw + da * ahat, mask=keep)
    tl.store(lock, 0)                        # released by a plain store: the lock word is no data


def _flat(t):
    if t.stride(-1) != 1:
        t = t.contiguous()
    return t.reshape(-1, t.shape[-1])


def rmsnorm_forward(x, g, eps=1e-5):
    x2 = _flat(x)
    M, N = x2.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    r = torch.empty(M, dtype=torch.float32, device=x.device)
    rmsnorm_fwd_kernel[(M,)](x2, g.contiguous(), y, r, N, x2.stride(0), eps, BLOCK_N=triton.next_power_of_2(N))
    return y.reshape(x.shape), r


def rmsnorm_backward(dy, x, g, r):
    x2, dy2 = _flat(x), _flat(dy)
    M, N = x2.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    groups = min(GROUPS, M)
    dw = torch.zeros((groups, N), dtype=torch.float32, device=x.device)
    locks = torch.zeros(groups, dtype=torch.int32, device=x.device)
    rmsnorm_bwd_kernel[(M,)](x2, g.contiguous(), dy2, r, dx, dw, locks, N, x2.stride(0), dy2.stride(0),
                             GROUPS=groups, BLOCK_N=triton.next_power_of_2(N))
    return dx.reshape(x.shape), dw.sum(0).to(g.dtype)


class TritonRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, g, eps=1e-5):
        y, r = rmsnorm_forward(x, g, eps)
        ctx.save_for_backward(x, g, r)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, g, r = ctx.saved_tensors
        return (*rmsnorm_backward(dy, x, g, r), None)


def rmsnorm(x, g, eps=1e-5):
    return TritonRMSNorm.apply(x, g, eps)
