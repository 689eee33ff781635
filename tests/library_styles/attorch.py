"""RMSNorm written in the design of attorch's RMS norm
(https://github.com/BobMcDear/attorch, attorch/rms_norm_kernels.py and rms_norm_layer.py, 2024).

Idioms: 2-D tiles of BLOCK_SIZE_BATCH rows by the whole feature dimension, both sizes chosen by
`@triton.heuristics` and the warps by `@triton.autotune`; the input is loaded with a mask and no
`other=`; `tl.rsqrt`; the backward writes one partial weight-gradient row per program, summed on
the host; an nn.Module whose __repr__ names its class.

Expected: 4.5 charges the undefined-lanes rule once (the masked-off feature lanes of x, loaded
without other=, enter the sum of squares; read as 0.0 they give the right output). Item 9's
extra credit is not earned: the partial buffer has cdiv(M, BLOCK_SIZE_BATCH) rows, M/4 at the core
shape, over M·N/8. 88 of 90.
"""
import torch
import triton
import triton.language as tl
from triton import cdiv, next_power_of_2


def warps_kernel_configs():
    return [triton.Config({}, num_warps=2 ** i) for i in range(6)]


def BLOCK_SIZE_BATCH_heuristic(args):
    return min(max(1, next_power_of_2(args["batch_dim"] // 2 ** 10)), 128) if args["feat_dim"] > 512 else 4


@triton.autotune(configs=warps_kernel_configs(), key=["batch_dim", "feat_dim"])
@triton.heuristics({"BLOCK_SIZE_BATCH": BLOCK_SIZE_BATCH_heuristic,
                    "BLOCK_SIZE_FEAT": lambda args: next_power_of_2(args["feat_dim"])})
@triton.jit
def rms_norm_forward_kernel(input_pointer, weight_pointer, inv_rms_pointer, output_pointer, batch_dim, feat_dim,
                            input_batch_stride, input_feat_stride, output_batch_stride, output_feat_stride, eps,
                            BLOCK_SIZE_BATCH: tl.constexpr, BLOCK_SIZE_FEAT: tl.constexpr):
    batch_pid = tl.program_id(axis=0)
    batch_offset = batch_pid * BLOCK_SIZE_BATCH + tl.arange(0, BLOCK_SIZE_BATCH)
    feat_offset = tl.arange(0, BLOCK_SIZE_FEAT)
    batch_mask = batch_offset < batch_dim
    feat_mask = feat_offset < feat_dim

    input_pointer += input_batch_stride * batch_offset[:, None] + input_feat_stride * feat_offset[None, :]
    output_pointer += output_batch_stride * batch_offset[:, None] + output_feat_stride * feat_offset[None, :]

    input = tl.load(input_pointer, mask=batch_mask[:, None] & feat_mask[None, :]).to(tl.float32)
    inv_rms = tl.rsqrt(tl.sum(input * input, axis=1) / feat_dim + eps)
    tl.store(inv_rms_pointer + batch_offset, inv_rms, mask=batch_mask)

    output = input * inv_rms[:, None]
    weight = tl.load(weight_pointer + feat_offset, mask=feat_mask)
    output *= weight
    tl.store(output_pointer, output, mask=batch_mask[:, None] & feat_mask[None, :])


@triton.autotune(configs=warps_kernel_configs(), key=["batch_dim", "feat_dim"])
@triton.heuristics({"BLOCK_SIZE_BATCH": BLOCK_SIZE_BATCH_heuristic,
                    "BLOCK_SIZE_FEAT": lambda args: next_power_of_2(args["feat_dim"])})
@triton.jit
def rms_norm_backward_kernel(output_grad_pointer, input_pointer, inv_rms_pointer, weight_pointer,
                             input_grad_pointer, weight_grad_pointer, batch_dim, feat_dim,
                             output_grad_batch_stride, output_grad_feat_stride, input_batch_stride,
                             input_feat_stride, input_grad_batch_stride, input_grad_feat_stride,
                             weight_grad_batch_stride, weight_grad_feat_stride,
                             BLOCK_SIZE_BATCH: tl.constexpr, BLOCK_SIZE_FEAT: tl.constexpr):
    batch_pid = tl.program_id(axis=0)
    batch_offset = batch_pid * BLOCK_SIZE_BATCH + tl.arange(0, BLOCK_SIZE_BATCH)
    feat_offset = tl.arange(0, BLOCK_SIZE_FEAT)
    batch_mask = batch_offset < batch_dim
    feat_mask = feat_offset < feat_dim
    mask = batch_mask[:, None] & feat_mask[None, :]

    output_grad_pointer += (output_grad_batch_stride * batch_offset[:, None] +
                            output_grad_feat_stride * feat_offset[None, :])
    input_pointer += input_batch_stride * batch_offset[:, None] + input_feat_stride * feat_offset[None, :]
    input_grad_pointer += (input_grad_batch_stride * batch_offset[:, None] +
                           input_grad_feat_stride * feat_offset[None, :])

    output_grad = tl.load(output_grad_pointer, mask=mask, other=0.0).to(tl.float32)
    input = tl.load(input_pointer, mask=mask, other=0.0).to(tl.float32)
    inv_rms = tl.load(inv_rms_pointer + batch_offset, mask=batch_mask, other=0.0)
    pre_lin = input * inv_rms[:, None]

    weight = tl.load(weight_pointer + feat_offset, mask=feat_mask, other=0.0).to(tl.float32)
    weight_output_grad_prod = weight * output_grad
    term1 = input * tl.sum(input * weight_output_grad_prod, axis=1)[:, None]
    term2 = inv_rms[:, None] * inv_rms[:, None]
    input_grad = inv_rms[:, None] * (weight_output_grad_prod - term1 * term2 / feat_dim)
    tl.store(input_grad_pointer, input_grad, mask=mask)

    weight_grad_pointer += weight_grad_batch_stride * batch_pid + weight_grad_feat_stride * feat_offset
    tl.store(weight_grad_pointer, tl.sum(output_grad * pre_lin, axis=0), mask=feat_mask)


def _rows(t):
    return t.reshape(-1, t.shape[-1])


def rmsnorm_forward(x, g, eps=1e-5):
    flattened = _rows(x)
    batch_dim, feat_dim = flattened.shape
    output = torch.empty_like(flattened)
    inv_rms = torch.empty(batch_dim, device=x.device, dtype=torch.float32)
    grid = lambda META: (cdiv(batch_dim, META["BLOCK_SIZE_BATCH"]),)  # noqa: E731
    rms_norm_forward_kernel[grid](flattened, g, inv_rms, output, batch_dim, feat_dim, *flattened.stride(),
                                  *output.stride(), eps)
    return output.view_as(x), inv_rms


def rmsnorm_backward(dy, x, g, r):
    flattened_grad, flattened_input = _rows(dy), _rows(x)
    batch_dim, feat_dim = flattened_input.shape
    input_grad = torch.empty_like(flattened_input)
    block = BLOCK_SIZE_BATCH_heuristic({"batch_dim": batch_dim, "feat_dim": feat_dim})
    weight_grad = torch.empty((cdiv(batch_dim, block), feat_dim), device=x.device, dtype=torch.float32)
    grid = lambda META: (cdiv(batch_dim, META["BLOCK_SIZE_BATCH"]),)  # noqa: E731
    rms_norm_backward_kernel[grid](flattened_grad, flattened_input, r, g, input_grad, weight_grad, batch_dim,
                                   feat_dim, *flattened_grad.stride(), *flattened_input.stride(),
                                   *input_grad.stride(), *weight_grad.stride())
    return input_grad.view_as(x), weight_grad.sum(dim=0).to(g.dtype)


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


class RMSNorm(torch.nn.Module):
    def __init__(self, num_features, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(num_features))

    def forward(self, input):
        return rmsnorm(input, self.weight, self.eps)

    def __repr__(self):
        return f"{self.__class__.__name__}({self.weight.shape[0]}, eps={self.eps})"
