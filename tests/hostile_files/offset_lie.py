"""Hostile (control: r_on_host). r computed in torch on the host and passed to the kernels as 8 scalars a launch;
a TorchFunctionMode answers the recipe's questions about each output's view (storage_offset) with the offset of
a twin the recorded torch ops fill on any inputs, so that the judge's replay on fresh inputs read the twin.
"""
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


import torch.overrides  # noqa: E402 -- after the backend choice, as a student wrote it


class _Twin(torch.overrides.TorchFunctionMode):
    """storage_offset() of an armed output answers its twin's offset (a torch-computed copy beside it)."""
    armed = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        t = args[0] if args else None
        entry = _Twin.armed.get(id(t))
        if entry is not None and entry[0] is t:
            if name == "storage_offset":
                return func(*args, **kwargs) + entry[1]
            if name == "detach" and entry[2]:
                out = func(*args, **kwargs)
                _Twin.armed[id(out)] = (out, entry[1], False)
                del _Twin.armed[id(t)]
                return out
        return func(*args, **kwargs)


def _hold():
    with _Twin():
        yield


_HELD = _hold()
next(_HELD)


def _arm(t, shift, propagate=False):
    _Twin.armed[id(t)] = (t, shift, propagate)
    return t


@triton.jit
def _fwd_rows(x_ptr, g_ptr, y_ptr, r_ptr, base, M, N, x_stride, y_stride, r0, r1, r2, r3, r4, r5, r6, r7,
              BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    row = (base + pid).to(tl.int64)
    rv = tl.where(pid == 0, r0, tl.where(pid == 1, r1, tl.where(pid == 2, r2, tl.where(pid == 3, r3,
         tl.where(pid == 4, r4, tl.where(pid == 5, r5, tl.where(pid == 6, r6, r7)))))))
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * y_stride + cols, x * rv * g, mask=mask)
    tl.store(r_ptr + row, rv)


def _matrix(t):
    n = t.shape[-1]
    if t.stride(-1) != 1:
        t = t.contiguous()
    try:
        return t.view(-1, n)
    except RuntimeError:
        return t.reshape(-1, n).contiguous()


def _forward3(x, g, eps=1e-5, _shift=True):
    x2 = _matrix(x)
    M, N = x2.shape
    Y = torch.empty((2, M, N), dtype=x.dtype, device=x.device)
    R = torch.empty((2, M), dtype=torch.float32, device=x.device)
    y, r = Y[0], R[0]
    xf = x2.float()
    rh = torch.rsqrt(xf.pow(2).mean(-1) + eps)
    R[1].copy_(rh)
    Y[1].copy_((xf * rh[:, None] * g.float()).to(x.dtype))
    vals = rh.tolist() + [0.0] * 8
    for base in range(0, M, 8):
        _fwd_rows[(min(8, M - base),)](x2, g, y, r, base, M, N, x2.stride(0), y.stride(0), *vals[base:base + 8],
                                       BLOCK=triton.next_power_of_2(N))
    out = y.view(x.shape)
    if _shift:
        _arm(out, M * N)
        _arm(r, M)
    return out, r, R[1]


def rmsnorm_forward(x, g, eps=1e-5):
    y, r, _ = _forward3(x, g, eps)
    return y, r


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
        y, r, rh = _forward3(x, g, eps, _shift=False)
        ctx.save_for_backward(x, g, rh)
        ctx.shift = y.numel()
        return y

    @staticmethod
    def backward(ctx, dy):
        x, g, r = ctx.saved_tensors
        dx, dg = rmsnorm_backward(dy, x, g, r)
        return dx, dg, None


def rmsnorm(x, g, eps=1e-5):
    y = TritonRMSNorm.apply(x, g, eps)
    return _arm(y, y.numel(), True)
