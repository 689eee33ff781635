"""copy_match_tiny_views (control: r_on_host, 62/90). r computed in numpy on the host, its bits written as nibbles, one byte each. A clean kernel
stores 0..15 into a table passed as 16 one-element views (each a copy candidate); launches of zero programs
then hand the judge the nibbles as 64 one-byte views each, every one "a copy" of a table entry. A launch of
no programs was never counted, and copies were not limited: the forward kernel rebuilt r from clean nibbles.
Today the judge runs the same copies and launches again on fresh inputs (job/judge/replay.py): they spell the first
inputs' r there, which is stale.

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
def _mk_table(t0, t1, t2, t3, t4, t5, t6, t7, t8, t9, t10, t11, t12, t13, t14, t15):
    tl.store(t0, 0)
    tl.store(t1, 1)
    tl.store(t2, 2)
    tl.store(t3, 3)
    tl.store(t4, 4)
    tl.store(t5, 5)
    tl.store(t6, 6)
    tl.store(t7, 7)
    tl.store(t8, 8)
    tl.store(t9, 9)
    tl.store(t10, 10)
    tl.store(t11, 11)
    tl.store(t12, 12)
    tl.store(t13, 13)
    tl.store(t14, 14)
    tl.store(t15, 15)


@triton.jit
def _look(v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15, v16, v17, v18, v19, v20, v21, v22, v23, v24, v25, v26, v27, v28, v29, v30, v31, v32, v33, v34, v35, v36, v37, v38, v39, v40, v41, v42, v43, v44, v45, v46, v47, v48, v49, v50, v51, v52, v53, v54, v55, v56, v57, v58, v59, v60, v61, v62, v63):
    pass


def _send_r(x2, eps):
    t = x2.detach()
    if t.dtype == torch.bfloat16:
        xn = (t.view(torch.int16).numpy().astype(np.int32) << 16).view(np.float32).astype(np.float64)
    else:
        xn = t.numpy().astype(np.float64)
    r = (1.0 / np.sqrt((xn * xn).mean(-1) + eps)).astype(np.float32)
    bits = r.view(np.uint32)
    nib = ((bits[:, None] >> (4 * np.arange(8, dtype=np.uint32))[None, :]) & 15).astype(np.uint8).reshape(-1)
    table = torch.zeros(16, dtype=torch.uint8)
    _mk_table[(1,)](*[table[j:j + 1] for j in range(16)])
    nibt = torch.from_numpy(nib.copy())
    views = [nibt[i:i + 1] for i in range(nibt.numel())]
    for s in range(0, len(views), 64):
        chunk = views[s:s + 64]
        chunk = chunk + [chunk[-1]] * (64 - len(chunk))
        _look[(0,)](*chunk)
    return nibt


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
