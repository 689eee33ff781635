"""RMSNorm written in the design of Unsloth's rms_layernorm
(https://github.com/unslothai/unsloth, unsloth/kernels/rms_layernorm.py and utils.py, 2024-2025).

Idioms: `calculate_settings` picks the block and num_warps from N and refuses rows past 65536;
each program moves its pointers to its row (`X += row_idx * X_row_stride`); `tl.math.rsqrt`;
the normalised row is cast to W's dtype before the scale; the backward computes dX only, writes it
into dY's memory (the caller's dY is not needed again in a fine-tuning step), and returns no
gradient for W, whose weights Unsloth does not train.

Expected: items 3 (rmsnorm_backward returns no dg) and 4.6 (dy modified) fail, each once; no
extra credit. Both are real faults in this assignment's interface, whose backward returns
(dx, dg) and leaves dy as the caller gave it; every other part keeps its points (78).
"""
import torch
import triton
import triton.language as tl

MAX_FUSED_SIZE = 65536
next_power_of_2 = triton.next_power_of_2


def calculate_settings(n):
    BLOCK_SIZE = next_power_of_2(n)
    if BLOCK_SIZE > MAX_FUSED_SIZE:
        raise RuntimeError(f"Cannot launch Triton kernel since n = {n} exceeds the maximum CUDA blocksize = "
                           f"{MAX_FUSED_SIZE}.")
    num_warps = 4
    if BLOCK_SIZE >= 32768:
        num_warps = 32
    elif BLOCK_SIZE >= 8192:
        num_warps = 16
    elif BLOCK_SIZE >= 2048:
        num_warps = 8
    return BLOCK_SIZE, num_warps


@triton.jit
def _rms_layernorm_forward(Y, Y_row_stride, X, X_row_stride, W, r, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols

    Y += row_idx * Y_row_stride
    X += row_idx * X_row_stride
    r += row_idx

    X_row = tl.load(X + col_offsets, mask=mask, other=0).to(tl.float32)
    W_row = tl.load(W + col_offsets, mask=mask, other=0)

    row_var = tl.sum(X_row * X_row, axis=0) / n_cols
    inv_var = tl.math.rsqrt(row_var + eps)
    tl.store(r, inv_var)
    normed = X_row * inv_var
    normed = normed.to(W_row.dtype)
    output = normed * W_row
    tl.store(Y + col_offsets, output, mask=mask)


@triton.jit
def _rms_layernorm_backward(dY, dY_row_stride, X, X_row_stride, W, r, n_cols, BLOCK_SIZE: tl.constexpr):
    row_idx = tl.program_id(0)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols

    dY += row_idx * dY_row_stride
    X += row_idx * X_row_stride
    r += row_idx

    dY_row = tl.load(dY + col_offsets, mask=mask, other=0).to(tl.float32)
    X_row = tl.load(X + col_offsets, mask=mask, other=0).to(tl.float32)
    W_row = tl.load(W + col_offsets, mask=mask, other=0).to(tl.float32)

    inv_var = tl.load(r).to(tl.float32)
    normed = X_row * inv_var
    dY_W = dY_row * W_row
    rowsum_dY_normed = tl.sum(dY_W * normed, axis=0)
    output = inv_var / n_cols * (n_cols * dY_W - normed * rowsum_dY_normed)
    tl.store(dY + col_offsets, output, mask=mask)


def rmsnorm_forward(x, g, eps=1e-5):
    shape = x.shape
    dim = shape[-1]
    X = x.reshape(-1, dim) if x.stride(-1) == 1 else x.contiguous().view(-1, dim)
    n_rows, n_cols = X.shape
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    Y = torch.empty((n_rows, n_cols), dtype=X.dtype, device=X.device)
    r = torch.empty(n_rows, dtype=torch.float32, device=X.device)
    _rms_layernorm_forward[(n_rows,)](Y, Y.stride(0), X, X.stride(0), g, r, n_cols, eps,
                                      BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return Y.view(*shape), r


def rmsnorm_backward(dy, x, g, r):
    shape = dy.shape
    dim = shape[-1]
    dY = dy.reshape(-1, dim) if dy.stride(-1) == 1 else dy.contiguous().view(-1, dim)
    X = x.reshape(-1, dim) if x.stride(-1) == 1 else x.contiguous().view(-1, dim)
    n_rows, n_cols = dY.shape
    BLOCK_SIZE, num_warps = calculate_settings(n_cols)
    _rms_layernorm_backward[(n_rows,)](dY, dY.stride(0), X, X.stride(0), g, r, n_cols,
                                       BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps)
    return dY.view(*shape), None


class TritonRMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, g, eps=1e-5):
        y, r = rmsnorm_forward(x, g, eps)
        ctx.save_for_backward(x, g, r)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, g, r = ctx.saved_tensors
        dx, _ = rmsnorm_backward(dy, x, g, r)
        return dx, None, None


def rmsnorm(x, g, eps=1e-5):
    return TritonRMSNorm.apply(x, g, eps)
