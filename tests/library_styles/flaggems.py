"""RMSNorm written in the design of FlagGems' rms_norm
(https://github.com/FlagOpen/FlagGems, src/flag_gems/ops/rms_norm.py, 2024-2025).

Idioms: `@triton.jit(do_not_specialize=["eps"])`; row and column strides for every tensor; the
output cast to `Y.dtype.element_ty` before the scale; the backward as two kernels: dx one row per
program, and a separate dW kernel over 2-D tiles of rows by columns that reads x and dy again and
writes one partial row per row block, summed on the host.

Expected: item 6 fails (the backward loads x and dy twice each: the dW kernel reads them again);
item 9's extra credit is not earned (its backward is not fused). 80 of 90.
"""
import torch
import triton
import triton.language as tl


@triton.jit(do_not_specialize=["eps"])
def rms_norm_kernel(Y, INV_RMS, X, W, y_stride_r, y_stride_c, x_stride_r, x_stride_c, N, eps,
                    BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    Y += pid * y_stride_r
    X += pid * x_stride_r
    mask = tl.arange(0, BLOCK_SIZE) < N
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(X + cols * x_stride_c, mask, other=0.0).to(tl.float32)
    var = tl.sum(x * x / N, axis=0)
    rrms = 1 / tl.sqrt(var + eps)
    w = tl.load(W + tl.arange(0, BLOCK_SIZE), mask=mask, other=0.0)
    y = (x * rrms).to(Y.dtype.element_ty) * w
    tl.store(Y + cols * y_stride_c, y, mask=mask)
    tl.store(INV_RMS + pid, rrms)


@triton.jit
def rms_norm_grad_dx_kernel(X, DY, INV_RMS, DX, W, x_stride_r, x_stride_c, dy_stride_r, dy_stride_c,
                            dx_stride_r, dx_stride_c, N, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    DX += pid * dx_stride_r
    X += pid * x_stride_r
    DY += pid * dy_stride_r
    INV_RMS += pid
    mask = tl.arange(0, BLOCK_SIZE) < N
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(X + cols * x_stride_c, mask, other=0.0).to(tl.float32)
    inv_rms = tl.load(INV_RMS).to(tl.float32)
    dy = tl.load(DY + cols * dy_stride_c, mask, other=0.0).to(tl.float32)
    w = tl.load(W + tl.arange(0, BLOCK_SIZE), mask=mask, other=0.0).to(tl.float32)
    dy = dy * w
    normalized_buf = x * inv_rms
    row_sum_stats = tl.sum(normalized_buf * dy, axis=0)
    norm_val = normalized_buf / N
    dx = (dy - norm_val * row_sum_stats) * inv_rms
    tl.store(DX + cols * dx_stride_c, dx, mask=mask)


@triton.jit
def rms_norm_grad_dw_kernel(X, DY, INV_RMS, DW, dx_stride_r, dx_stride_c, dy_stride_r, dy_stride_c, M, N,
                            ROW_BLOCK_SIZE: tl.constexpr, COL_BLOCK_SIZE: tl.constexpr):
    row_pid = tl.program_id(0)
    col_pid = tl.program_id(1)
    row_start = row_pid * ROW_BLOCK_SIZE
    col_start = col_pid * COL_BLOCK_SIZE
    offset = row_start * dx_stride_r + col_start * dx_stride_c
    X += offset
    DY += row_start * dy_stride_r + col_start * dy_stride_c
    INV_RMS += row_start
    rows = tl.arange(0, ROW_BLOCK_SIZE)
    cols = tl.arange(0, COL_BLOCK_SIZE)
    row_mask = (row_start + rows) < M
    col_mask = (col_start + cols) < N
    x = tl.load(X + rows[:, None] * dx_stride_r + cols[None, :] * dx_stride_c,
                row_mask[:, None] & col_mask[None, :], other=0.0).to(tl.float32)
    inv_rms = tl.load(INV_RMS + rows, row_mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + rows[:, None] * dy_stride_r + cols[None, :] * dy_stride_c,
                 row_mask[:, None] & col_mask[None, :], other=0.0).to(tl.float32)
    d_weight = x * dy * inv_rms[:, None]
    partial_dweight_sum = tl.sum(d_weight, axis=0)
    tl.store(DW + row_pid * N + col_start + cols, partial_dweight_sum, mask=col_mask)


def rmsnorm_forward(x, g, eps=1e-5):
    dim = x.ndim - 1
    N = x.shape[dim]
    M = x.numel() // N
    x = x.contiguous()
    y = torch.empty_like(x)
    inv_rms = torch.empty((M,), device=x.device, dtype=torch.float32)
    BLOCK_SIZE = triton.next_power_of_2(N)
    rms_norm_kernel[(M,)](y, inv_rms, x, g, N, 1, N, 1, N, eps, BLOCK_SIZE)
    return y, inv_rms


def rmsnorm_backward(dy, x, g, r):
    dim = x.ndim - 1
    N = x.shape[dim]
    M = x.numel() // N
    BLOCK_SIZE = triton.next_power_of_2(N)
    x = x.contiguous()
    dy = dy.contiguous()
    dx = torch.empty_like(x)
    rms_norm_grad_dx_kernel[(M,)](x, dy, r, dx, g, N, 1, N, 1, N, 1, N, BLOCK_SIZE)
    ROW_BLOCK_SIZE = 16
    COL_BLOCK_SIZE = 256
    row_block_num = triton.cdiv(M, ROW_BLOCK_SIZE)
    col_block_num = triton.cdiv(N, COL_BLOCK_SIZE)
    partial_buffer = torch.empty((row_block_num, N), dtype=torch.float32, device=x.device)
    rms_norm_grad_dw_kernel[(row_block_num, col_block_num)](x, dy, r, partial_buffer, N, 1, N, 1, M, N,
                                                            ROW_BLOCK_SIZE, COL_BLOCK_SIZE)
    dw = torch.sum(partial_buffer, dim=0, dtype=x.dtype).reshape(-1)
    return dx, dw


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
