"""Hostile: a forward that reads x twice and a backward that reads x and dy twice, each pass through an int64 view
of its input (two fp32 values a word), so that counts in view elements see each element read once. Its control
reads them twice in fp32 (tests/hostile.py, "x_dy_twice")."""
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
def _fwd_words(xa_ptr, xb_ptr, g_ptr, y_ptr, r_ptr, N, eps, HALF: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, HALF)
    m = c < N // 2
    w = tl.load(xa_ptr + row * (N // 2) + c, mask=m, other=0)
    lo = (w & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    hi = (w >> 32).to(tl.int32).to(tl.float32, bitcast=True)
    r = 1.0 / tl.sqrt((tl.sum(lo * lo, axis=0) + tl.sum(hi * hi, axis=0)) / N + eps)
    w = tl.load(xb_ptr + row * (N // 2) + c, mask=m, other=0)
    lo = (w & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    hi = (w >> 32).to(tl.int32).to(tl.float32, bitcast=True)
    ge = tl.load(g_ptr + 2 * c, mask=m, other=0.0)
    go = tl.load(g_ptr + 2 * c + 1, mask=m, other=0.0)
    tl.store(y_ptr + row * N + 2 * c, lo * r * ge, mask=m)
    tl.store(y_ptr + row * N + 2 * c + 1, hi * r * go, mask=m)
    tl.store(r_ptr + row, r)


@triton.jit
def _bwd_words(xa_ptr, xb_ptr, da_ptr, db_ptr, g_ptr, r_ptr, dx_ptr, dg_ptr, N, HALF: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, HALF)
    m = c < N // 2
    ge = tl.load(g_ptr + 2 * c, mask=m, other=0.0)
    go = tl.load(g_ptr + 2 * c + 1, mask=m, other=0.0)
    r = tl.load(r_ptr + row)
    w = tl.load(xa_ptr + row * (N // 2) + c, mask=m, other=0)
    xlo = (w & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    xhi = (w >> 32).to(tl.int32).to(tl.float32, bitcast=True)
    w = tl.load(da_ptr + row * (N // 2) + c, mask=m, other=0)
    dlo = (w & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    dhi = (w >> 32).to(tl.int32).to(tl.float32, bitcast=True)
    dot = tl.sum(dlo * ge * xlo, axis=0) + tl.sum(dhi * go * xhi, axis=0)
    w = tl.load(xb_ptr + row * (N // 2) + c, mask=m, other=0)
    xlo = (w & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    xhi = (w >> 32).to(tl.int32).to(tl.float32, bitcast=True)
    w = tl.load(db_ptr + row * (N // 2) + c, mask=m, other=0)
    dlo = (w & 0xFFFFFFFF).to(tl.int32).to(tl.float32, bitcast=True)
    dhi = (w >> 32).to(tl.int32).to(tl.float32, bitcast=True)
    k = r * r * r * dot / N
    tl.store(dx_ptr + row * N + 2 * c, dlo * ge * r - xlo * k, mask=m)
    tl.store(dx_ptr + row * N + 2 * c + 1, dhi * go * r - xhi * k, mask=m)
    tl.store(dg_ptr + row * N + 2 * c, dlo * xlo * r, mask=m)
    tl.store(dg_ptr + row * N + 2 * c + 1, dhi * xhi * r, mask=m)


def _words(*ts):
    """int64 views of fp32 matrices of even rows, or None where one is not that."""
    ok = all(t.dtype == torch.float32 and t.is_contiguous() and t.shape[-1] % 2 == 0 for t in ts)
    return [t.view(torch.int64) for t in ts] if ok else None


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
    w = _words(x2, g.view(1, -1))
    if w:
        _fwd_words[(M,)](w[0], w[0], g, y, r, N, eps, HALF=triton.next_power_of_2(N // 2))
    else:
        rmsnorm_fwd_kernel[(M,)](x2, g, y, r, N, x2.stride(0), y.stride(0), eps, BLOCK=triton.next_power_of_2(N))
    return y.view(x.shape), r


def rmsnorm_backward(dy, x, g, r):
    x2, dy2 = _matrix(x), _matrix(dy)
    M, N = x2.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    dg_partial = torch.empty((M, N), dtype=torch.float32, device=x.device)
    w = _words(x2, dy2, g.view(1, -1))
    if w:
        _bwd_words[(M,)](w[0], w[0], w[1], w[1], g, r, dx, dg_partial, N, HALF=triton.next_power_of_2(N // 2))
    else:
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
