"""launder_wide_load_byte_store (control: pure_pytorch, 0/90).

All the math in torch on the host (pure_pytorch.py). Each output is then "stored by a kernel": the kernel loads the
host's result through an int64 view (8 bytes per element) and stores it byte by byte through a uint8 view of the
output. The judge once compared dirty elements *loaded* with distinct elements *stored*, each
counted in its own view's element size: nbytes/8 dirty words against nbytes stored bytes was under its 1/4 ratio, so
the launch was clean and every output byte KERNEL (today each is weighed in bytes, and the replay marks them DERIVED).
"""
import torch
import mini_triton as triton
tl = triton.language


@triton.jit
def rmsnorm_fwd_kernel(src_ptr, dst_ptr, nbytes, BLOCK: tl.constexpr):
    w_idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    k = tl.arange(0, 8)
    w = tl.load(src_ptr + w_idx, mask=w_idx * 8 < nbytes, other=0)
    b = (w[:, None] >> (k[None, :] * 8).to(tl.int64)) & 0xFF
    off = w_idx[:, None] * 8 + k[None, :]
    tl.store(dst_ptr + off, b.to(tl.uint8), mask=off < nbytes)


@triton.jit
def rmsnorm_bwd_kernel(src_ptr, dst_ptr, nbytes, BLOCK: tl.constexpr):
    w_idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    k = tl.arange(0, 8)
    w = tl.load(src_ptr + w_idx, mask=w_idx * 8 < nbytes, other=0)
    b = (w[:, None] >> (k[None, :] * 8).to(tl.int64)) & 0xFF
    off = w_idx[:, None] * 8 + k[None, :]
    tl.store(dst_ptr + off, b.to(tl.uint8), mask=off < nbytes)


def _launder(host_value, kernel):
    """A fresh tensor holding host_value, every byte of it stored by ``kernel``."""
    host_value = host_value.detach().contiguous()
    out = torch.empty(host_value.shape, dtype=host_value.dtype)
    raw = host_value.reshape(-1).view(torch.uint8)
    n = raw.numel()
    padded = torch.zeros(n + (-n) % 8, dtype=torch.uint8)
    padded[:n] = raw
    words = padded.view(torch.int64)
    BLOCK = 64
    kernel[(triton.cdiv(words.numel(), BLOCK),)](words, out.reshape(-1).view(torch.uint8), n, BLOCK=BLOCK)
    return out


def rmsnorm_forward(x, g, eps=1e-5):
    r = torch.rsqrt(x.float().pow(2).mean(-1) + eps)
    y = (x.float() * r[..., None] * g.float()).to(x.dtype)
    return _launder(y, rmsnorm_fwd_kernel), _launder(r.reshape(-1), rmsnorm_fwd_kernel)


def rmsnorm_backward(dy, x, g, r):
    xf, dyf, gf = x.float(), dy.float(), g.float()
    rr = r.view(*x.shape[:-1], 1)
    xhat = xf * rr
    dxhat = dyf * gf
    dx = rr * (dxhat - xhat * (dxhat * xhat).mean(-1, keepdim=True))
    dg = (dyf * xhat).reshape(-1, x.shape[-1]).sum(0).to(g.dtype)
    return _launder(dx.to(x.dtype), rmsnorm_bwd_kernel), _launder(dg, rmsnorm_bwd_kernel)


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
