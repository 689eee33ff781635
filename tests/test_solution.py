"""The reference solution against a float64 reference, on mini_triton and on Triton's interpreter; and
the answer of a student who stopped after part (c) (`make partial PARTS=abc`), whose backward is part (b)'s."""
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from backends import triton_available

from rmsnorm_testkit.compare import assert_matches, load_impl, reference  # noqa: E402
from rmsnorm_testkit.timing import captured  # noqa: E402
from conftest import ROOT  # noqa: E402

SOLUTION = ROOT / "solution" / "rmsnorm.py"
BACKENDS = ["mini_triton"] + (["interpreter"] if triton_available() else []) + \
    (["triton"] if torch.cuda.is_available() else [])
_MODULES = {}
sys.path.insert(0, str(ROOT / "starter"))
from generate import make_starter  # noqa: E402


def solution(backend, parts="abcd"):
    """The solution on ``backend``, with only the answers of ``parts`` (the starter's code elsewhere)."""
    if (backend, parts) not in _MODULES:
        path = SOLUTION
        if parts != "abcd":
            path = Path(tempfile.mkdtemp()) / "rmsnorm.py"
            path.write_text(make_starter(SOLUTION.read_text(), parts))
        _MODULES[backend, parts] = load_impl(path, backend=None if backend == "triton" else backend,
                                             name=f"solution_{parts}")
        assert _MODULES[backend, parts].BACKEND == backend
    return _MODULES[backend, parts]


def make(shape, dtype, seed=0, g_dtype=None, device="cpu"):
    torch.manual_seed(seed)
    x = torch.randn(*shape, dtype=torch.float32).to(dtype).to(device)
    g = (torch.rand(shape[-1]) + 0.5).to(g_dtype or dtype).to(device)
    dy = torch.randn(*shape).to(dtype).to(device)
    return x, g, dy


def check_all(S, x, g, dy, eps=1e-5):
    dy_before = dy.clone()
    y, r = S.rmsnorm_forward(x, g, eps)
    dx, dg = S.rmsnorm_backward(dy, x, g, r)
    y_ref, _, dx_ref, dg_ref = reference(x, g, dy, eps)
    assert y.dtype == x.dtype and dx.dtype == x.dtype and dg.dtype == g.dtype and r.dtype == torch.float32
    assert y.shape == x.shape and dx.shape == x.shape and dg.shape == g.shape
    assert r.shape == (x.numel() // x.shape[-1],)
    assert_matches("y", y, y_ref, x)
    assert_matches("dx", dx, dx_ref, x)
    # dg sums over all rows: its error grows with M, so it is compared relative to its size
    assert_matches("dg", dg.float(), dg_ref, x, dtype=g.dtype if g.dtype != torch.float32 else x.dtype)
    assert torch.equal(dy, dy_before), "dy was modified"


SHAPES = [(37, 100), (4, 16, 64), (2, 3, 513), (1, 1), (7, 1), (300, 48), (5, 4096), (3, 8193)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_matches_float64_reference(backend, shape, dtype):
    check_all(solution(backend), *make(shape, dtype, device=solution(backend).DEVICE))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("parts", ["abcd", "abc"], ids=["many-rows", "part-b-backward"])
@pytest.mark.parametrize("shape", [(64, 100), (130, 257), (33, 9000), (5, 20000)], ids=str)
def test_both_dg_reductions(backend, parts, shape):
    """Part (d)'s backward (a few programs, many rows each) and part (b)'s (one program per row)."""
    impl = solution(backend, parts)
    check_all(impl, *make(shape, torch.float32, device=impl.DEVICE))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("eps", [0.0 + 1e-12, 1e-6, 1e-2, 1.0])
def test_any_eps(backend, eps):
    check_all(solution(backend), *make((9, 77), torch.float32, device=solution(backend).DEVICE), eps=eps)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rows_of_zeros(backend):
    x, g, dy = make((6, 40), torch.float32, device=solution(backend).DEVICE)
    x[2] = 0
    check_all(solution(backend), x, g, dy)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layout", ["row_slice", "every_other_row", "transposed", "3d_strided"])
def test_non_contiguous_inputs(backend, layout):
    S = solution(backend)
    base_x, g, base_dy = make((40, 96), torch.float32, seed=3, device=S.DEVICE)
    views = {
        "row_slice": lambda t: t[:, 16:80],
        "every_other_row": lambda t: t[::2],
        "transposed": lambda t: t.t()[:, :40].t().t(),
        "3d_strided": lambda t: t.view(4, 10, 96)[:, ::3, 8:72],
    }
    x, dy = views[layout](base_x), views[layout](base_dy)
    g = g[: x.shape[-1]].contiguous()
    check_all(S, x, g, dy)


@pytest.mark.parametrize("backend", BACKENDS)
def test_g_may_differ_in_dtype_from_x(backend):
    check_all(solution(backend), *make((11, 130), torch.bfloat16, g_dtype=torch.float32,
                                       device=solution(backend).DEVICE))


@pytest.mark.parametrize("backend", BACKENDS)
def test_strided_g_is_read_by_its_stride(backend):
    S = solution(backend)
    x, g2, dy = make((6, 2 * 48), torch.float32, device=S.DEVICE)
    x, dy = x[:, :48], dy[:, :48]
    check_all(S, x, g2[::2], dy)                     # g = every other element of a longer vector


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape,dtype", [((2, 32768), torch.float32), ((2, 65536), torch.bfloat16)], ids=str)
def test_large_n(backend, shape, dtype):
    check_all(solution(backend), *make(shape, dtype, device=solution(backend).DEVICE))


def test_autograd_function_and_wrapper():
    S = solution("mini_triton")
    x, g, dy = make((3, 5, 40), torch.float32)
    x.requires_grad_(True)
    g.requires_grad_(True)
    y = S.rmsnorm(x, g, 1e-5)
    y.backward(dy)
    _, _, dx_ref, dg_ref = reference(x, g, dy)
    assert_matches("dx", x.grad, dx_ref, x)
    assert_matches("dg", g.grad, dg_ref, x)
    assert isinstance(y.grad_fn, S.TritonRMSNorm._backward_cls)


def test_saves_only_x_g_and_r():
    S = solution("mini_triton")
    x, g, _ = make((6, 40), torch.float32)
    x.requires_grad_(True)
    y = S.TritonRMSNorm.apply(x, g, 1e-5)
    saved = y.grad_fn.saved_tensors
    assert len(saved) == 3 and saved[0].data_ptr() == x.data_ptr() and saved[2].shape == (6,)


def test_empty_batch():
    S = solution("mini_triton")
    x, g = torch.empty(0, 16), torch.ones(16)
    y, r = S.rmsnorm_forward(x, g)
    dx, dg = S.rmsnorm_backward(torch.empty(0, 16), x, g, r)
    assert y.shape == (0, 16) and r.shape == (0,) and torch.equal(dg, torch.zeros(16))


@pytest.mark.parametrize("args,error,match", [
    ((torch.randn(4, 8), torch.randn(7)), ValueError, r"g must have shape \(N,\) = \(8,\)"),
    ((torch.randn(4, 8), torch.randn(8, 1)), ValueError, "g must have shape"),
    ((torch.randint(0, 5, (4, 8)), torch.randn(8)), TypeError, "x must be float32, float16 or bfloat16"),
    ((torch.randn(4, 0), torch.randn(0)), ValueError, "non-empty last dimension"),
    ((torch.randn(4, 8), [1.0] * 8), TypeError, "g must be a torch.Tensor"),
    ((torch.randn(4, 8).double(), torch.randn(8)), TypeError, "torch.float64"),
    ((torch.randn(4, 8), torch.randn(8, device="meta")), ValueError, "same device"),
    ((torch.randn(4, 8, device="meta"), torch.randn(8, device="meta")), ValueError, "runs on cpu tensors"),
])
def test_bad_input_gets_a_clear_error(args, error, match):
    with pytest.raises(error, match=match):
        solution("mini_triton").rmsnorm_forward(*args)


def test_improved_reduction_uses_a_small_partial_buffer():
    import mini_triton as triton
    S = solution("mini_triton")
    M, N = 256, 128
    x, g, dy = make((M, N), torch.float32)
    y, r = S.rmsnorm_forward(x, g)
    for parts, most in (("abcd", M * N // 8), ("abc", M * N)):
        with triton.record() as rec:
            solution("mini_triton", parts).rmsnorm_backward(dy, x, g, r)
        launch, final_sum = rec.launches
        assert (launch.kernel, final_sum.kernel) == ("rmsnorm_bwd_kernel", "dg_sum_kernel")
        partial = launch.args["dg_partial_ptr"]
        assert partial.numel <= most and partial.stored == partial.numel
        assert launch.args["x_ptr"].loaded == M * N and launch.args["dy_ptr"].loaded == M * N
        assert launch.args["dx_ptr"].stored == M * N
        # the partial rows are read once more, by the final sum, which writes dg once
        assert final_sum.args["dg_partial_ptr"].loaded == partial.numel and final_sum.args["dg_ptr"].stored == N


def test_forward_is_fused():
    import mini_triton as triton
    S = solution("mini_triton")
    M, N = 100, 1000
    x, g, _ = make((M, N), torch.float32)
    with triton.record(host_ops=True) as rec:
        S.rmsnorm_forward(x, g)
    (launch,) = rec.launches
    a = launch.args
    assert a["x_ptr"].loaded == M * N and a["y_ptr"].stored == M * N and a["r_ptr"].stored == M
    assert a["g_ptr"].loaded <= launch.programs * N
    assert all(op.reads < M * N for op in rec.host_ops), rec.host_ops


# -- on a GPU: the step is capture-safe and compile-safe (what item 10 and a real model rely on) ----------
cuda_only = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA and Triton")


@cuda_only
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_step_is_captured_in_a_cuda_graph_and_replays_on_new_inputs(dtype):
    """No host synchronisation in the wrappers: forward+backward through autograd captures, and a
    replay after new values are copied into the inputs gives those inputs' results."""
    S = solution("triton")
    x, g, dy = make((1024, 4096), dtype, seed=1, device="cuda")
    x.requires_grad_(True)
    g.requires_grad_(True)

    def step():
        return torch.autograd.grad(S.rmsnorm(x, g), (x, g), dy)
    replay, (dx, dg) = captured(step)                       # as item 10 captures it (rmsnorm_testkit.timing)
    x2, g2, dy2 = make((1024, 4096), dtype, seed=2, device="cuda")
    with torch.no_grad():
        x.copy_(x2)
        g.copy_(g2)
        dy.copy_(dy2)
    replay()
    torch.cuda.synchronize()
    _, _, dx_ref, dg_ref = reference(x2, g2, dy2)
    assert_matches("dx", dx, dx_ref, x2)
    assert_matches("dg", dg.float(), dg_ref, x2, dtype=dtype)


@cuda_only
# The launch-configuration helpers are lru_cache'd pure functions of their arguments: Dynamo traces
# through the cache (and warns that it does), which picks the same configuration.
@pytest.mark.filterwarnings("ignore:Dynamo detected a call to a `functools.lru_cache`")
def test_torch_compile_fullgraph_gives_the_same_results():
    """A module using rmsnorm compiles without graph breaks (fullgraph=True) and computes the same."""
    S = solution("triton")

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.g = torch.nn.Parameter(torch.rand(2048, device="cuda") + 0.5)

        def forward(self, x):
            return S.rmsnorm(x * 2.0, self.g) + 1.0

    torch._dynamo.reset()
    block = Block()
    compiled = torch.compile(block, fullgraph=True)
    x, _, dy = make((256, 2048), torch.float32, seed=3, device="cuda")
    xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
    ya, yb = block(xa), compiled(xb)
    ya.backward(dy)
    ga = block.g.grad.clone()
    block.g.grad = None
    yb.backward(dy)
    torch.testing.assert_close(yb, ya, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(xb.grad, xa.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(block.g.grad, ga, rtol=1e-5, atol=1e-4)
