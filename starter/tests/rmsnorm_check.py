"""Shared by the public tests and the autograder: load an implementation, compute the
float64 reference, and compare with messages that say where an error is and how large.
"""
import importlib.util
import os
import sys
from contextlib import contextmanager
from pathlib import Path

import torch

# Tolerances per dtype (atol, rtol) against a float64 reference; fp32 math inside.
TOLERANCES = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 1e-2),
    torch.bfloat16: (1.6e-2, 2e-2),
}
DTYPE_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


@contextmanager
def _env(**values):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update({k: v for k, v in values.items() if v is not None})
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def load_impl(path, backend=None, name="student_rmsnorm"):
    """Import rmsnorm.py from ``path`` as a fresh module.

    backend: None (the file decides: GPU if there is one), "mini_triton" or "interpreter".
    """
    path = Path(path).resolve()
    root = path.parent
    for p in (str(root), str(root.parent)):
        if (Path(p) / "mini_triton").is_dir() and p not in sys.path:
            sys.path.insert(0, p)
    env = {"mini_triton": {"MINI_TRITON": "1"}, "interpreter": {"MINI_TRITON": None, "TRITON_INTERPRET": "1"},
           None: {}}[backend]
    with _env(**env):
        spec = importlib.util.spec_from_file_location(f"{name}_{backend or 'auto'}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    return mod


def reference(x, g, eps=1e-5):
    """RMSNorm in float64: the ground truth for y."""
    x64, g64 = x.double(), g.double()
    return x64 * torch.rsqrt(x64.pow(2).mean(dim=-1, keepdim=True) + eps) * g64


def eager(x, g, eps=1e-5):
    """RMSNorm as a PyTorch user writes it (eager mode): the speed baseline."""
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * g


def reference_grads(x, g, dy, eps=1e-5):
    """(y, dx, dg) in float64 by autograd through the reference."""
    x64 = x.detach().double().requires_grad_(True)
    g64 = g.detach().double().requires_grad_(True)
    y = reference(x64, g64, eps)
    y.backward(dy.double())
    return y.detach(), x64.grad, g64.grad


def describe(x) -> str:
    return f"x of shape {tuple(x.shape)} {DTYPE_NAMES.get(x.dtype, str(x.dtype))}"


def compare(name, got, expected, x, dtype=None, tol=None):
    """None if ``got`` matches ``expected`` within the dtype's tolerance (or ``tol`` = (atol, rtol)), else a message."""
    dtype = dtype or x.dtype
    if not isinstance(got, torch.Tensor):
        return f"{name} should be a torch.Tensor, got {type(got).__name__}"
    if tuple(got.shape) != tuple(expected.shape):
        return f"{name} has shape {tuple(got.shape)}, expected {tuple(expected.shape)} for {describe(x)}"
    atol, rtol = tol or TOLERANCES[dtype]
    g64 = got.detach().double().cpu()
    e64 = expected.detach().double().cpu()
    bad = ~torch.isclose(g64, e64, rtol=rtol, atol=atol, equal_nan=False)
    if not bool(bad.any()):
        return None
    err = (g64 - e64).abs()
    err = torch.where(torch.isnan(err), torch.full_like(err, float("inf")), err)
    idx = tuple(int(i) for i in torch.nonzero(err == err.max())[0])
    where = ", ".join(str(i) for i in idx)
    return (f"{name} differs for {describe(x)}: max abs error {float(err.max()):.3g} at [{where}] "
            f"(expected {float(e64[idx]):.6g}, got {float(g64[idx]):.6g}); "
            f"{int(bad.sum())} of {bad.numel()} elements are off (atol={atol}, rtol={rtol})")


def dg_tolerance(dtype, n_rows, dg_ref):
    """(atol, rtol) for dg, a sum over all M rows: its rounding error grows with M.

    fp32: atol 5e-6·sqrt(M); 16-bit: 2·eps(dtype)·max|dg| (dg is stored in x's dtype).
    """
    atol, rtol = TOLERANCES[dtype]
    if dtype == torch.float32:
        return max(atol, 5e-6 * n_rows ** 0.5), rtol
    return max(atol, 2 * torch.finfo(dtype).eps * float(dg_ref.abs().max())), rtol


def assert_matches(name, got, expected, x, dtype=None):
    msg = compare(name, got, expected, x, dtype)
    if msg:
        raise AssertionError(msg)
