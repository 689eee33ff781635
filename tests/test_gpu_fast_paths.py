"""On a GPU: the solution's cached launches and its RMSNorm under torch.compile (skipped without CUDA).

The cached launch (solution/rmsnorm.py, ``CachedLaunch``) must give exactly what Triton's own
``kernel[grid](...)`` gives, at every shape and dtype, including the inputs Triton specialises on
(a row count of 1, rows not a multiple of 16, an address not a multiple of 16 bytes, long rows).
Under torch.compile the solution's RMSNorm must be traced whole: no graph breaks, same results.
"""
import sys

import pytest
import torch

from conftest import ROOT

sys.path.insert(0, str(ROOT / "starter"))
from benchmark.measure import Model  # noqa: E402  (make bench's model: the one it times)
from rmsnorm_testkit.compare import load_impl  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with Triton")

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# (x's shape, how x is made): "contiguous", or "offset" (a view one element in: its address is not
# a multiple of 16 bytes, and its rows are strided)
CASES = [((1, 4096), "contiguous"), ((37, 100), "contiguous"), ((256, 1024), "contiguous"),
         ((2048, 4096), "contiguous"), ((3, 33, 512), "contiguous"), ((64, 16384), "contiguous"),
         ((8, 20000), "contiguous"), ((64, 1024), "offset"), ((1, 1), "contiguous")]


@pytest.fixture(scope="module")
def impl():
    impl = load_impl(ROOT / "solution" / "rmsnorm.py")
    if impl.BACKEND != "triton":
        pytest.skip("the solution runs on Triton only where a GPU is")
    return impl


def make(shape, how, dtype):
    gen = torch.Generator(device="cuda").manual_seed(sum(shape))
    n = shape[-1]
    if how == "offset":
        x = torch.randn(*shape[:-1], n + 1, device="cuda", dtype=dtype, generator=gen)[..., 1:]
    else:
        x = torch.randn(*shape, device="cuda", dtype=dtype, generator=gen)
    g = torch.rand(n, device="cuda", dtype=dtype, generator=gen) + 0.5
    return x, g, torch.randn(shape, device="cuda", dtype=dtype, generator=gen)


def outputs(impl, x, g, dy):
    y, r = impl.rmsnorm_forward(x, g)
    dx, dg = impl.rmsnorm_backward(dy, x, g, r)
    return y, r, dx, dg


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,how", CASES)
def test_cached_launch_gives_what_tritons_launch_gives(impl, monkeypatch, shape, how, dtype):
    x, g, dy = make(shape, how, DTYPES[dtype])
    cached = [impl.rmsnorm_fwd_kernel, impl.rmsnorm_bwd_kernel, impl.dg_sum_kernel]
    outputs(impl, x, g, dy)                          # the first call of a key goes through Triton
    fast = outputs(impl, x, g, dy)                   # the second through the cache
    for k in cached:
        assert k.compiled, f"{k.__name__}: nothing cached"
        monkeypatch.setattr(impl, k.__name__, k.kernel)
    plain = outputs(impl, x, g, dy)
    for name, a, b in zip(("y", "r", "dx", "dg"), fast, plain):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), name


def test_cached_launch_keeps_apart_what_triton_specialises_on(impl):
    """An input at an address that is not a multiple of 16 bytes needs another compiled kernel."""
    k = impl.rmsnorm_fwd_kernel
    for how in ("contiguous", "offset"):
        x, g, dy = make((64, 1024), how, torch.float32)
        impl.rmsnorm_forward(x, g)
    keys = [key for key in k.compiled if 1024 in key]
    aligned = {key for key in keys if (torch.float32, True) in key and (torch.float32, False) not in key}
    assert aligned and len(keys) > len(aligned), keys


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_compiled_model_has_no_graph_breaks_and_the_same_results(impl, mode):
    torch.manual_seed(0)
    model = Model(512, impl.rmsnorm).cuda()
    x, dy = torch.randn(256, 512, device="cuda"), torch.randn(256, 512, device="cuda")
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(x)
    assert explained.graph_break_count == 0, explained.break_reasons
    params = list(model.parameters())
    want = (model(x), *torch.autograd.grad(model(x), params, dy))
    torch._dynamo.reset()
    compiled = torch.compile(model, mode=mode, fullgraph=True)
    for _ in range(3):                               # reduce-overhead records its CUDA graph on a later call
        torch.compiler.cudagraph_mark_step_begin()
        y = compiled(x)
        got = (y.detach().clone(), *(t.clone() for t in torch.autograd.grad(y, params, dy)))
    for name, a, b in zip(("y", "d first.weight", "d first.bias", "d last.weight", "d last.bias", "dg"), got, want):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4, msg=lambda m, name=name: f"{name}: {m}")
