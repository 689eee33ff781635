"""RMSNorm written as a systems course's students write it (https://github.com/stanford-cs336/assignment2-systems,
the Triton RMSNorm and its torch.compile comparison, 2024-2025): the kernels beside a PyTorch reference compiled
with `torch.compile` at import, which the file's own check compares them with.

Idioms: `@torch.compile` on a module-level reference function (torch then looks for Triton itself, at import);
`torch.compile(..., dynamic=True)` on a second one; a `__main__` check that compares kernels and references; one
program per row, `tl.rsqrt`; an M x N partial dg summed on the host.

Expected: every regular point (90): fused kernels, the lecture's M x N partial dg, so no extra credit (item 9
names its size). The compiled references are never called while the file is graded.
"""
import torch
import triton
import triton.language as tl


@torch.compile
def rmsnorm_reference(x, g, eps=1e-5):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * g


def _reference_grads(x, g, dy, eps=1e-5):
    x, g = x.detach().requires_grad_(True), g.detach().requires_grad_(True)
    rmsnorm_reference(x, g, eps).backward(dy)
    return x.grad, g.grad


reference_grads = torch.compile(_reference_grads, dynamic=True)


@triton.jit
def rmsnorm_fwd_kernel(x_ptr, g_ptr, y_ptr, r_ptr, x_row_stride, y_row_stride, N, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / N + eps)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * y_row_stride + cols, (x * r * g).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(r_ptr + row, r)


@triton.jit
def rmsnorm_bwd_kernel(x_ptr, g_ptr, dy_ptr, r_ptr, dx_ptr, dg_ptr, x_row_stride, dy_row_stride, dx_row_stride, N,
                       BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * dy_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row)
    xhat = x * r
    dx = r * (dy * g - xhat * tl.sum(dy * g * xhat, axis=0) / N)
    tl.store(dx_ptr + row * dx_row_stride + cols, dx.to(dx_ptr.dtype.element_ty), mask=mask)
    tl.store(dg_ptr + row * N + cols, dy * xhat, mask=mask)


def _rows(t):
    t = t if t.stride(-1) == 1 else t.contiguous()
    return t.reshape(-1, t.shape[-1])


def rmsnorm_forward(x, g, eps=1e-5):
    x2 = _rows(x)
    M, N = x2.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    r = torch.empty(M, dtype=torch.float32, device=x.device)
    rmsnorm_fwd_kernel[(M,)](x2, g, y, r, x2.stride(0), y.stride(0), N, eps, BLOCK_N=triton.next_power_of_2(N))
    return y.view(x.shape), r


def rmsnorm_backward(dy, x, g, r):
    x2, dy2 = _rows(x), _rows(dy)
    M, N = x2.shape
    dx = torch.empty((M, N), dtype=x.dtype, device=x.device)
    dg = torch.empty((M, N), dtype=torch.float32, device=x.device)
    rmsnorm_bwd_kernel[(M,)](x2, g, dy2, r, dx, dg, x2.stride(0), dy2.stride(0), dx.stride(0), N,
                             BLOCK_N=triton.next_power_of_2(N))
    return dx.view(x.shape), dg.sum(0).to(g.dtype)


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


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x, g, dy = torch.randn(64, 512, device=device), torch.rand(512, device=device), torch.randn(64, 512, device=device)
    xg, gg = x.clone().requires_grad_(True), g.clone().requires_grad_(True)
    rmsnorm(xg, gg).backward(dy)
    dx, dg = reference_grads(x, g, dy)
    print("y", (rmsnorm(x, g) - rmsnorm_reference(x, g)).abs().max().item(),
          "dx", (xg.grad - dx).abs().max().item(), "dg", (gg.grad - dg).abs().max().item())
