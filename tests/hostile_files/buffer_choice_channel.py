"""buffer_choice_channel (control: r_on_host, 62/90). r computed in numpy on the host, sent as which of 16 one-byte buffers
holding the constants 0..15 (stored by one clean launch) the host passes for each of 62 tensor parameters of a
kernel that copies them out behind a cursor it keeps in memory. The launch signature had no buffer identity,
so every such launch was the same one. Today the judge runs the same launches again on fresh inputs
(job/judge/replay.py): the same choices of buffer spell the first inputs' r there, which is stale.

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
def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, nib_ptr, N, x_stride, y_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    k = tl.arange(0, 8)
    nb = tl.load(nib_ptr + row * 8 + k).to(tl.int32)
    r = tl.sum(nb << (k * 4), axis=0).to(tl.float32, bitcast=True)
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


@triton.jit
def _consts(c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15):
    tl.store(c0, 0)
    tl.store(c1, 1)
    tl.store(c2, 2)
    tl.store(c3, 3)
    tl.store(c4, 4)
    tl.store(c5, 5)
    tl.store(c6, 6)
    tl.store(c7, 7)
    tl.store(c8, 8)
    tl.store(c9, 9)
    tl.store(c10, 10)
    tl.store(c11, 11)
    tl.store(c12, 12)
    tl.store(c13, 13)
    tl.store(c14, 14)
    tl.store(c15, 15)


@triton.jit
def _emit(cur_ptr, out_ptr, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15, b16, b17, b18, b19, b20, b21, b22, b23, b24, b25, b26, b27, b28, b29, b30, b31, b32, b33, b34, b35, b36, b37, b38, b39, b40, b41, b42, b43, b44, b45, b46, b47, b48, b49, b50, b51, b52, b53, b54, b55, b56, b57, b58, b59, b60, b61):
    c = tl.load(cur_ptr)
    tl.store(out_ptr + c + 0, tl.load(b0))
    tl.store(out_ptr + c + 1, tl.load(b1))
    tl.store(out_ptr + c + 2, tl.load(b2))
    tl.store(out_ptr + c + 3, tl.load(b3))
    tl.store(out_ptr + c + 4, tl.load(b4))
    tl.store(out_ptr + c + 5, tl.load(b5))
    tl.store(out_ptr + c + 6, tl.load(b6))
    tl.store(out_ptr + c + 7, tl.load(b7))
    tl.store(out_ptr + c + 8, tl.load(b8))
    tl.store(out_ptr + c + 9, tl.load(b9))
    tl.store(out_ptr + c + 10, tl.load(b10))
    tl.store(out_ptr + c + 11, tl.load(b11))
    tl.store(out_ptr + c + 12, tl.load(b12))
    tl.store(out_ptr + c + 13, tl.load(b13))
    tl.store(out_ptr + c + 14, tl.load(b14))
    tl.store(out_ptr + c + 15, tl.load(b15))
    tl.store(out_ptr + c + 16, tl.load(b16))
    tl.store(out_ptr + c + 17, tl.load(b17))
    tl.store(out_ptr + c + 18, tl.load(b18))
    tl.store(out_ptr + c + 19, tl.load(b19))
    tl.store(out_ptr + c + 20, tl.load(b20))
    tl.store(out_ptr + c + 21, tl.load(b21))
    tl.store(out_ptr + c + 22, tl.load(b22))
    tl.store(out_ptr + c + 23, tl.load(b23))
    tl.store(out_ptr + c + 24, tl.load(b24))
    tl.store(out_ptr + c + 25, tl.load(b25))
    tl.store(out_ptr + c + 26, tl.load(b26))
    tl.store(out_ptr + c + 27, tl.load(b27))
    tl.store(out_ptr + c + 28, tl.load(b28))
    tl.store(out_ptr + c + 29, tl.load(b29))
    tl.store(out_ptr + c + 30, tl.load(b30))
    tl.store(out_ptr + c + 31, tl.load(b31))
    tl.store(out_ptr + c + 32, tl.load(b32))
    tl.store(out_ptr + c + 33, tl.load(b33))
    tl.store(out_ptr + c + 34, tl.load(b34))
    tl.store(out_ptr + c + 35, tl.load(b35))
    tl.store(out_ptr + c + 36, tl.load(b36))
    tl.store(out_ptr + c + 37, tl.load(b37))
    tl.store(out_ptr + c + 38, tl.load(b38))
    tl.store(out_ptr + c + 39, tl.load(b39))
    tl.store(out_ptr + c + 40, tl.load(b40))
    tl.store(out_ptr + c + 41, tl.load(b41))
    tl.store(out_ptr + c + 42, tl.load(b42))
    tl.store(out_ptr + c + 43, tl.load(b43))
    tl.store(out_ptr + c + 44, tl.load(b44))
    tl.store(out_ptr + c + 45, tl.load(b45))
    tl.store(out_ptr + c + 46, tl.load(b46))
    tl.store(out_ptr + c + 47, tl.load(b47))
    tl.store(out_ptr + c + 48, tl.load(b48))
    tl.store(out_ptr + c + 49, tl.load(b49))
    tl.store(out_ptr + c + 50, tl.load(b50))
    tl.store(out_ptr + c + 51, tl.load(b51))
    tl.store(out_ptr + c + 52, tl.load(b52))
    tl.store(out_ptr + c + 53, tl.load(b53))
    tl.store(out_ptr + c + 54, tl.load(b54))
    tl.store(out_ptr + c + 55, tl.load(b55))
    tl.store(out_ptr + c + 56, tl.load(b56))
    tl.store(out_ptr + c + 57, tl.load(b57))
    tl.store(out_ptr + c + 58, tl.load(b58))
    tl.store(out_ptr + c + 59, tl.load(b59))
    tl.store(out_ptr + c + 60, tl.load(b60))
    tl.store(out_ptr + c + 61, tl.load(b61))
    tl.store(cur_ptr, c + 62)


def _send_r(x2, eps):
    t = x2.detach()
    if t.dtype == torch.bfloat16:
        xn = (t.view(torch.int16).numpy().astype(np.int32) << 16).view(np.float32).astype(np.float64)
    else:
        xn = t.numpy().astype(np.float64)
    r = (1.0 / np.sqrt((xn * xn).mean(-1) + eps)).astype(np.float32)
    bits = r.view(np.uint32)
    nib = ((bits[:, None] >> (4 * np.arange(8, dtype=np.uint32))[None, :]) & 15).astype(np.uint8).reshape(-1)
    consts = [torch.zeros(1, dtype=torch.uint8) for _ in range(16)]
    _consts[(1,)](*consts)
    n = nib.shape[0]
    out = torch.zeros(n + 62, dtype=torch.uint8)
    cur = torch.zeros(1, dtype=torch.int32)
    for s in range(0, n, 62):
        chunk = [consts[int(v)] for v in nib[s:s + 62]]
        chunk = chunk + [consts[0]] * (62 - len(chunk))
        _emit[(1,)](cur, out, *chunk)
    return out


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
    nib = _send_r(x2, eps)
    rmsnorm_fwd_kernel[(M,)](x2, g, y, r, nib, N, x2.stride(0), y.stride(0), eps, BLOCK=triton.next_power_of_2(N))
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
