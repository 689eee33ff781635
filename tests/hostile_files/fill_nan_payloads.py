"""fill_nan_payloads (control: r_on_host, 62/90). r computed in numpy on the host; for each row, the host writes
one float64 NaN whose payload holds r's bits into a buffer of zeros, then makes an empty launch so the judge looks.
Each write was one element of a fill value (any NaN counted), one run: CONST. Identical launches were never
counted, so the forward kernel unpacked r as clean. Today only torch's own NaN is a fill, and the judge runs the
same writes and launches again on fresh inputs (job/judge/replay.py), where that r is stale.

Original: A plain, correct submission in the lecture's style: one program per row, and an M x N
partial dg buffer summed on the host. The grading corpus expects it to earn every regular
point and no extra credit; its mutations (test_autograder_corpus.py) are the buggy cases.
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
def touch_kernel(c_ptr):
    pass


@triton.jit
def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, c_ptr, N, x_stride, y_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    r = (tl.load(c_ptr + row) & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
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
    xn = x2.detach()
    if xn.dtype == torch.bfloat16:
        xn = torch.from_numpy((xn.view(torch.int16).numpy().astype(np.int32) << 16).view(np.float32))
    xn = xn.numpy().astype(np.float64)
    rn = (1.0 / np.sqrt((xn * xn).mean(-1) + eps)).astype(np.float32)
    chan = torch.zeros(M, dtype=torch.float64)
    touch_kernel[(1,)](chan)                     # seen as a fill of zeros
    cv = chan.numpy().view(np.uint64)
    bits = rn.view(np.uint32).astype(np.uint64)
    for j in range(M):                           # one NaN (payload: r's bits) per refresh: a "fill" run of one
        cv[j] = np.uint64(0x7FF8000000000000) | bits[j]
        touch_kernel[(1,)](chan)
    rmsnorm_fwd_kernel[(M,)](x2, g, y, r, chan.view(torch.int64), N, x2.stride(0), y.stride(0), eps, BLOCK=triton.next_power_of_2(N))
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
