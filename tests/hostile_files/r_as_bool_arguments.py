"""r_as_bool_arguments (control: r_on_host, 62/90). r is computed on the host in numpy; each row's r goes to
a kernel as 32 plain bool arguments (its bits), and the row through the pointer's offset (r[i:]), not as a scalar.
provenance.Memory._new_scalars counts only int/float scalars and skips bools, and tensor offsets are never counted,
so the 16-distinct-scalar budget never trips: the little kernel stores r as clean KERNEL values, which the forward
kernel then loads (clean, as a second kernel reading what a first stored).

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
def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, N, x_stride, y_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row)
    tl.store(y_ptr + row * y_stride + cols, x * r * g, mask=mask)


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
def _put(r_ptr, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, b16, b17, b18, b19, b20, b21, b22, b23, b24, b25, b26, b27, b28, b29, b30, b31):
    v = tl.zeros([1], dtype=tl.int64) + (b0 * 1 + b1 * 2 + b2 * 4 + b3 * 8 + b4 * 16 + b5 * 32 + b6 * 64 + b7 * 128 + b8 * 256 + b9 * 512 + b10 * 1024 + b11 * 2048 + b12 * 4096 + b13 * 8192 + b14 * 16384 + b15 * 32768 + b16 * 65536 + b17 * 131072 + b18 * 262144 + b19 * 524288 + b20 * 1048576 + b21 * 2097152 + b22 * 4194304 + b23 * 8388608 + b24 * 16777216 + b25 * 33554432 + b26 * 67108864 + b27 * 134217728 + b28 * 268435456 + b29 * 536870912 + b30 * 1073741824 + b31 * 2147483648)
    tl.store(r_ptr + tl.arange(0, 1), v.to(tl.int32).to(tl.float32, bitcast=True))


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
    t = x2.detach()
    xn = ((t.view(torch.int16).numpy().astype(np.int32) << 16).view(np.float32)
          if t.dtype == torch.bfloat16 else t.numpy().astype(np.float32)).astype(np.float64)
    host_r = (1.0 / np.sqrt((xn * xn).mean(-1) + eps)).astype(np.float32).view(np.uint32)
    for i in range(M):
        w = int(host_r[i])
        _put[(1,)](r[i:], *[bool((w >> k) & 1) for k in range(32)])
    rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps, BLOCK=triton.next_power_of_2(N))
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
