"""RMSNorm written in the design of Triton's layer-norm tutorial
(https://github.com/triton-lang/triton, python/tutorials/05-layer-norm.py, Triton 3), without the
mean and the bias.

Idioms: the forward walks each row in chunks twice, once for the sum of squares and once for y
(x is read twice); the wrapper refuses rows over 64 KB (`MAX_FUSED_SIZE = 65536 // element_size`);
the backward adds each row's dW into one of GROUP_SIZE_M partial rows under a spin lock
(`tl.atomic_cas` / `tl.atomic_xchg`, with a counter for the first visit), and a second kernel sums
those rows in 2-D tiles.

Expected: each charged once, 4.4 (the wrapper raises for N = 32768 fp32 and N = 65536 bf16), 4.7
(the lock's order decides the order of dW's sums, so two runs differ in the last bits), 5 (the
forward loads x twice); item 9's extra credit is not earned (a lock). 76 of 90.
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_fwd(X, Y, W, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    _sum = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _sum += a * a
    var = tl.sum(_sum, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        y = x * rstd * w
        tl.store(Y + cols, y, mask=mask)


@triton.jit
def _rms_norm_bwd_dx_fused(DX, DY, DW, X, W, Rstd, Lock, stride, N, GROUP_SIZE_M: tl.constexpr,
                           BLOCK_SIZE_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP_SIZE_M
    Lock += lock_id
    Count = Lock + GROUP_SIZE_M
    DW = DW + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    rstd = tl.load(Rstd + row)
    xhat = x * rstd
    wdy = w * dy
    xhat = tl.where(mask, xhat, 0.)
    wdy = tl.where(mask, wdy, 0.)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    dx = (wdy - xhat * c1) * rstd
    tl.store(DX + cols, dx, mask=mask)
    partial_dw = dy * xhat
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


@triton.jit
def _rms_norm_bwd_dw(DW, FINAL_DW, M, N, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    dw = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_SIZE_M):
        rows = i + tl.arange(0, BLOCK_SIZE_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(DW + offs, mask=mask, other=0.)
    sum_dw = tl.sum(dw, axis=0)
    tl.store(FINAL_DW + cols, sum_dw, mask=cols < N)


def _rows(t):
    t = t if t.is_contiguous() else t.contiguous()
    return t.reshape(-1, t.shape[-1])


def rmsnorm_forward(x, g, eps=1e-5):
    x_arg = _rows(x)
    M, N = x_arg.shape
    y = torch.empty_like(x_arg)
    rstd = torch.empty((M,), dtype=torch.float32, device=x.device)
    MAX_FUSED_SIZE = 65536 // x.element_size()
    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(N))
    if N > BLOCK_SIZE:
        raise RuntimeError("This layer norm doesn't support feature dim >= 64KB.")
    num_warps = min(max(BLOCK_SIZE // 256, 1), 8)
    _rms_norm_fwd[(M,)](x_arg, y, g, rstd, x_arg.stride(0), N, eps, BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return y.view(x.shape), rstd


def rmsnorm_backward(dy, x, g, r):
    x_arg, dy_arg = _rows(x), _rows(dy)
    M, N = x_arg.shape
    MAX_FUSED_SIZE = 65536 // x.element_size()
    BLOCK_SIZE_N = min(MAX_FUSED_SIZE, triton.next_power_of_2(N))
    if N > BLOCK_SIZE_N:
        raise RuntimeError("This layer norm doesn't support feature dim >= 64KB.")
    GROUP_SIZE_M = 64
    if N <= 8192:
        GROUP_SIZE_M = 96
    if N <= 4096:
        GROUP_SIZE_M = 128
    if N <= 1024:
        GROUP_SIZE_M = 256
    locks = torch.zeros(2 * GROUP_SIZE_M, dtype=torch.int32, device=x.device)
    _dw = torch.zeros((GROUP_SIZE_M, N), dtype=torch.float32, device=x.device)
    dw = torch.empty((N,), dtype=g.dtype, device=g.device)
    dx = torch.empty_like(dy_arg)
    _rms_norm_bwd_dx_fused[(M,)](dx, dy_arg, _dw, x_arg, g, r, locks, x_arg.stride(0), N,
                                 BLOCK_SIZE_N=BLOCK_SIZE_N, GROUP_SIZE_M=GROUP_SIZE_M)
    grid = (triton.cdiv(N, 128),)
    _rms_norm_bwd_dw[grid](_dw, dw, min(GROUP_SIZE_M, M), N, BLOCK_SIZE_M=32, BLOCK_SIZE_N=128)
    return dx.view(x.shape), dw


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
