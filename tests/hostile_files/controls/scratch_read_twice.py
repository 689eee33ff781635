"""Control: a persistent backward (16 rows a program, partial rows summed on the host) that copies g to an fp32
scratch buffer gs and loads it twice per row (items 6 and 9 lost); ATOMIC_FLAG makes the second read a no-op
atomic_max that races with other programs (hostile race_on_purpose_buys_a_second_read)."""
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
def _g32_kernel(g_ptr, gs_ptr, N, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    tl.store(gs_ptr + cols, tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32), mask=mask)


@triton.jit
def rmsnorm_bwd_kernel(x_ptr, g_ptr, dy_ptr, r_ptr, dx_ptr, dg_ptr, N, x_stride, dy_stride, dx_stride,
                       n_rows, rows_per_program, gs_ptr, BLOCK: tl.constexpr, ATOMIC: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    start = pid * rows_per_program
    for i in range(0, rows_per_program):
        row_i = start + i
        if row_i < n_rows:
            row = row_i.to(tl.int64)
            x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(dy_ptr + row * dy_stride + cols, mask=mask, other=0.0).to(tl.float32)
            r = tl.load(r_ptr + row)
            g1 = tl.load(gs_ptr + cols, mask=mask, other=0.0)
            dot = tl.sum(dy * g1 * x, axis=0)
            g2 = tl.zeros([BLOCK], dtype=tl.float32)
            if ATOMIC and i > 0:
                g2 = tl.where(mask, tl.atomic_max(gs_ptr + cols, float("-inf"), mask=mask), 0.0)
            else:
                g2 = tl.load(gs_ptr + cols, mask=mask, other=0.0)
            dx = dy * g2 * r - x * (r * r * r) * dot / N
            tl.store(dx_ptr + row * dx_stride + cols, dx, mask=mask)
            acc += dy * x * r
    tl.store(dg_ptr + pid * N + cols, acc, mask=mask)


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
    R = 16 if M >= 32 else max(1, (M + 1) // 2)
    P = (M + R - 1) // R
    BLOCK = triton.next_power_of_2(N)
    gs = torch.empty(N, dtype=torch.float32, device=x.device)
    _g32_kernel[(1,)](g, gs, N, BLOCK=BLOCK)
    dg_partial = torch.empty((P, N), dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(P,)](x2, g, dy2, r, dx, dg_partial, N, x2.stride(0), dy2.stride(0), dx.stride(0),
                             M, R, gs, BLOCK=BLOCK, ATOMIC=ATOMIC_FLAG)
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


ATOMIC_FLAG = False
