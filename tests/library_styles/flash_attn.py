"""RMSNorm written in the design of flash-attention's Triton layer norm
(https://github.com/Dao-AILab/flash-attention, flash_attn/ops/triton/layer_norm.py, 2024; the same
design is in mamba_ssm/ops/triton/layer_norm.py).

Idioms: `@triton.autotune` over num_warps keyed on N, `@triton.heuristics` for optional arguments,
one kernel for LayerNorm and RMSNorm chosen by an `IS_RMS_NORM` constexpr; the wrapper refuses rows
over 64 KB; the backward runs one program per SM, each looping over its rows (`min` of Python in
the kernel for the last one) and keeping its dW row in registers, the (SMs, N) partial summed on
the host; W is loaded without `other=` in both kernels.

Expected: 4.4 fails (the wrapper raises for N = 32768 fp32 and N = 65536 bf16), and 4.5 charges the
undefined-lanes rule once: the backward's `tl.sum(xhat * wdy)` multiplies the zeroed xhat lanes by
W's masked-off lanes, which NVIDIA's backend reads as 0 but Triton leaves undefined (the output is
right with them read as 0.0). Item 9's extra credit is earned (dW fused, ordered, programs x N).
85 + 5.
"""
import math

import torch
import triton
import triton.language as tl


def _warps_configs():
    return [triton.Config({}, num_warps=1), triton.Config({}, num_warps=2), triton.Config({}, num_warps=4),
            triton.Config({}, num_warps=8), triton.Config({}, num_warps=16), triton.Config({}, num_warps=32)]


@triton.autotune(configs=_warps_configs(), key=["N", "HAS_BIAS"])
@triton.heuristics({"HAS_BIAS": lambda args: args["B"] is not None})
@triton.jit
def _layer_norm_fwd_1pass_kernel(X, Y, W, B, Mean, Rstd, stride_x_row, stride_y_row, N, eps,
                                 IS_RMS_NORM: tl.constexpr, BLOCK_N: tl.constexpr, HAS_BIAS: tl.constexpr):
    row = tl.program_id(0)
    X += row * stride_x_row
    Y += row * stride_y_row
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
    if not IS_RMS_NORM:
        mean = tl.sum(x, axis=0) / N
        tl.store(Mean + row, mean)
        xbar = tl.where(cols < N, x - mean, 0.0)
        var = tl.sum(xbar * xbar, axis=0) / N
    else:
        xbar = tl.where(cols < N, x, 0.0)
        var = tl.sum(xbar * xbar, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Rstd + row, rstd)
    mask = cols < N
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    if HAS_BIAS:
        b = tl.load(B + cols, mask=mask).to(tl.float32)
    x_hat = (x - mean) * rstd if not IS_RMS_NORM else x * rstd
    y = x_hat * w + b if HAS_BIAS else x_hat * w
    tl.store(Y + cols, y, mask=mask)


@triton.autotune(configs=_warps_configs(), key=["N", "HAS_BIAS"])
@triton.heuristics({"HAS_BIAS": lambda args: args["B"] is not None})
@triton.jit
def _layer_norm_bwd_kernel(X, W, B, DY, DX, DW, DB, Mean, Rstd, stride_x_row, stride_dy_row, stride_dx_row, M, N,
                           rows_per_program, IS_RMS_NORM: tl.constexpr, BLOCK_N: tl.constexpr,
                           HAS_BIAS: tl.constexpr):
    row_block_id = tl.program_id(0)
    row_start = row_block_id * rows_per_program
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    X += row_start * stride_x_row
    DY += row_start * stride_dy_row
    DX += row_start * stride_dx_row
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)
    if HAS_BIAS:
        db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    row_end = min((row_block_id + 1) * rows_per_program, M)
    for row in range(row_start, row_end):
        x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
        dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
        if not IS_RMS_NORM:
            mean = tl.load(Mean + row)
        rstd = tl.load(Rstd + row)
        xhat = (x - mean) * rstd if not IS_RMS_NORM else x * rstd
        xhat = tl.where(mask, xhat, 0.0)
        wdy = w * dy
        dw += dy * xhat
        if HAS_BIAS:
            db += dy
        if not IS_RMS_NORM:
            c1 = tl.sum(xhat * wdy, axis=0) / N
            c2 = tl.sum(wdy, axis=0) / N
            dx = (wdy - (xhat * c1 + c2)) * rstd
        else:
            c1 = tl.sum(xhat * wdy, axis=0) / N
            dx = (wdy - xhat * c1) * rstd
        tl.store(DX + cols, dx, mask=mask)
        X += stride_x_row
        DY += stride_dy_row
        DX += stride_dx_row
    tl.store(DW + row_block_id * N + cols, dw, mask=mask)
    if HAS_BIAS:
        tl.store(DB + row_block_id * N + cols, db, mask=mask)


def _layer_norm_fwd(x, weight, bias, eps, is_rms_norm=False):
    M, N = x.shape
    assert x.stride(-1) == 1
    y = torch.empty_like(x)
    mean = torch.empty((M,), dtype=torch.float32, device=x.device) if not is_rms_norm else None
    rstd = torch.empty((M,), dtype=torch.float32, device=x.device)
    MAX_FUSED_SIZE = 65536 // x.element_size()
    BLOCK_N = min(MAX_FUSED_SIZE, triton.next_power_of_2(N))
    if N > BLOCK_N:
        raise RuntimeError("This layer norm doesn't support feature dim >= 64KB.")
    _layer_norm_fwd_1pass_kernel[(M,)](x, y, weight, bias, mean, rstd, x.stride(0), y.stride(0), N, eps,
                                       is_rms_norm, BLOCK_N)
    return y, mean, rstd


def _sm_count(device):
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 16


def _layer_norm_bwd(dy, x, weight, bias, eps, mean, rstd, is_rms_norm=False):
    M, N = x.shape
    dx = torch.empty_like(x)
    MAX_FUSED_SIZE = 65536 // x.element_size()
    BLOCK_N = min(MAX_FUSED_SIZE, triton.next_power_of_2(N))
    if N > BLOCK_N:
        raise RuntimeError("This layer norm doesn't support feature dim >= 64KB.")
    sm_count = _sm_count(x.device)
    _dw = torch.empty((sm_count, N), dtype=torch.float32, device=weight.device)
    _db = torch.empty((sm_count, N), dtype=torch.float32, device=weight.device) if bias is not None else None
    rows_per_program = math.ceil(M / sm_count)
    _layer_norm_bwd_kernel[(sm_count,)](x, weight, bias, dy, dx, _dw, _db, mean, rstd, x.stride(0), dy.stride(0),
                                        dx.stride(0), M, N, rows_per_program, is_rms_norm, BLOCK_N)
    dw = _dw.sum(0).to(weight.dtype)
    db = _db.sum(0).to(bias.dtype) if bias is not None else None
    return dx, dw, db


def _rows(t):
    t = t.reshape(-1, t.shape[-1])
    return t if t.stride(-1) == 1 else t.contiguous()


def rmsnorm_forward(x, g, eps=1e-5):
    y, _, rstd = _layer_norm_fwd(_rows(x), g, None, eps, is_rms_norm=True)
    return y.reshape(x.shape), rstd


def rmsnorm_backward(dy, x, g, r):
    dx, dw, _ = _layer_norm_bwd(_rows(dy), _rows(x), g, None, 0.0, None, r, is_rms_norm=True)
    return dx.reshape(x.shape), dw


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
