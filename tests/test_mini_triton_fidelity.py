"""mini_triton and Triton's own interpreter run the same kernels and must agree."""
import pytest
import torch

from backends import kernels, triton_available
from mini_triton import cdiv, next_power_of_2

pytestmark = pytest.mark.skipif(not triton_available(), reason="triton (with numpy) is not installed")
BACKENDS = ["mini", "interpret"]


def run_both(fn):
    """Run fn(kernels_module) on both backends with the same inputs; return both outputs."""
    out = {}
    for b in BACKENDS:
        torch.manual_seed(0)
        out[b] = fn(kernels(b))
    return out["mini"], out["interpret"]


def assert_same(a, b, **tol):
    if isinstance(a, (tuple, list)):
        for x, y in zip(a, b):
            assert_same(x, y, **tol)
        return
    torch.testing.assert_close(a, b, **(tol or {"rtol": 0, "atol": 0}))


@pytest.mark.parametrize("n", [1, 127, 1000, 4096])
def test_vector_add_agrees(n):
    def f(K):
        x, y = torch.randn(n), torch.randn(n)
        out = torch.empty(n)
        K.add_kernel[(cdiv(n, 128),)](x, y, out, n, BLOCK=128)
        return out
    a, b = run_both(f)
    assert_same(a, b)


@pytest.mark.parametrize("M,N", [(1, 1), (37, 100), (4, 513), (16, 1024)])
def test_rmsnorm_forward_agrees(M, N):
    def f(K):
        x, g = torch.randn(M, N), torch.randn(N)
        y, r = torch.empty(M, N), torch.empty(M)
        K.row_rmsnorm_fwd[(M,)](x, g, y, r, N, x.stride(0), 1e-5, BLOCK=next_power_of_2(N))
        return y, r
    a, b = run_both(f)
    assert_same(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("M,N", [(37, 100), (8, 256)])
def test_rmsnorm_backward_agrees(M, N):
    def f(K):
        x, g, dy = torch.randn(M, N), torch.randn(N), torch.randn(M, N)
        r = torch.rsqrt(x.pow(2).mean(-1) + 1e-5)
        dx, dgp = torch.empty(M, N), torch.empty(M, N)
        K.row_rmsnorm_bwd[(M,)](x, g, dy, r, dx, dgp, N, x.stride(0), BLOCK=next_power_of_2(N))
        return dx, dgp
    a, b = run_both(f)
    assert_same(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("M,N", [(5, 7), (64, 300)])
def test_softmax_agrees(M, N):
    def f(K):
        x = torch.randn(M, N)
        out = torch.empty(M, N)
        K.softmax_kernel[(M,)](out, x, x.stride(0), out.stride(0), N, BLOCK=next_power_of_2(N))
        return out, x
    (a, x), (b, _) = run_both(f)
    assert_same(a, b, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(a, torch.softmax(x, dim=1))


@pytest.mark.parametrize("M,N,K_", [(32, 32, 32), (70, 50, 40)])
def test_matmul_with_dot_agrees(M, N, K_):
    def f(K):
        a = torch.randn(M, K_, dtype=torch.float16)
        b = torch.randn(K_, N, dtype=torch.float16)
        c = torch.empty(M, N)
        K.matmul_kernel[(cdiv(M, 16), cdiv(N, 32))](
            a, b, c, M, N, K_, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
            BM=16, BN=32, BK=16)
        return c, a, b
    (c1, a, b), (c2, _, _) = run_both(f)
    torch.testing.assert_close(c1, c2, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(c1, a.float() @ b.float(), rtol=1e-5, atol=1e-4)


def test_atomic_reduction_agrees():
    def f(K):
        x = torch.randint(-100, 100, (1000,), dtype=torch.int32)
        out = torch.zeros(1, dtype=torch.int32)
        K.atomic_sum_kernel[(8,)](x, out, 1000, BLOCK=128)
        return out, x
    (o1, x), (o2, _) = run_both(f)
    assert_same(o1, o2)
    assert int(o1) == int(x.sum())


def test_2d_grid_agrees():
    def f(K):
        x = torch.randn(50, 70)
        out = torch.empty(50, 70)
        K.grid2d_kernel[(cdiv(50, 16), cdiv(70, 32))](x, out, 50, 70, BR=16, BC=32)
        return out
    a, b = run_both(f)
    assert_same(a, b)


def test_bf16_store_rounds_to_nearest_even_unlike_the_interpreter():
    """mini_triton converts like a GPU (and torch): round to nearest, ties to even."""
    def f(K):
        x = torch.randn(4096)
        out = torch.empty(4096, dtype=torch.bfloat16)
        K.cast_store_kernel[(4,)](x, out, 4096, BLOCK=1024)
        return out, x
    (mini, x), (interp, _) = run_both(f)
    assert torch.equal(mini, x.to(torch.bfloat16))
    # the interpreter truncates instead: it differs by at most one bf16 step
    step = (x.abs() * 2.0 ** -7)
    assert bool(((interp.float() - x).abs() <= step).all())


@pytest.mark.parametrize("dtype", [torch.float16, torch.int32])
def test_other_store_conversions_agree(dtype):
    def f(K):
        x = torch.randn(1000) * 100
        out = torch.empty(1000, dtype=dtype)
        K.cast_store_kernel[(1,)](x, out, 1000, BLOCK=1024)
        return out
    a, b = run_both(f)
    assert_same(a, b)


def test_program_dependent_loops_agree():
    def f(K):
        x = torch.randn(37, 100)
        out = torch.empty(37)
        K.persistent_rows_kernel[(5,)](x, out, 37, 100, BLOCK=128)
        return out
    a, b = run_both(f)
    assert_same(a, b, rtol=1e-6, atol=1e-6)


def test_branch_on_program_id_agrees():
    def f(K):
        x = torch.randn(1000)
        out = torch.zeros(1001)
        K.first_program_kernel[(8,)](x, out, 1000, BLOCK=128)
        return out
    a, b = run_both(f)
    assert_same(a, b)
    assert float(a[-1]) == 42.0


def test_cumsum_and_argmax_agree():
    def f(K):
        x = torch.randn(6, 100)
        cs, am = torch.empty(6, 100), torch.empty(6, dtype=torch.int32)
        K.cumsum_argmax_kernel[(6,)](x, cs, am, 100, BLOCK=128)
        return cs, am
    a, b = run_both(f)
    assert_same(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
@pytest.mark.parametrize("groups", [1, 3, 8])
def test_lock_protected_partial_sums_agree_and_raise_no_race(groups):
    """Rows of a group add into one partial row under a spin lock (two or more rows per lock)."""
    M, N = 37, 100

    def f(K):
        x = torch.randn(M, N)
        partial = torch.zeros(groups, N)
        locks = torch.zeros(groups, dtype=torch.int32)
        K.locked_partial_sum_kernel[(M,)](x, partial, locks, N, GROUPS=groups, BLOCK=128)
        return partial, locks, x
    (a, la, x), (b, lb, _) = run_both(f)
    expected = torch.stack([x[g::groups].sum(0) for g in range(groups)])
    torch.testing.assert_close(a, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(b, expected, rtol=1e-5, atol=1e-5)
    assert la.eq(0).all() and lb.eq(0).all()                  # every lock was given back


def test_split_and_join_agree():
    def f(K):
        x = torch.randn(64)
        pairs, sums = torch.empty(32, 2), torch.empty(32)
        K.split_join_kernel[(1,)](x, pairs, sums, BLOCK=32)
        return pairs, sums, x
    (p1, s1, x), (p2, s2, _) = run_both(f)
    assert_same((p1, s1), (p2, s2))
    assert torch.equal(p1[:, 1], 2 * x[32:]) and torch.equal(s1, x[:32] - 2 * x[32:])


def test_libdevice_and_tensor_cast_agree():
    def f(K):
        x = torch.rand(1000) * 4 + 0.1
        out = torch.empty(1000)
        K.libdevice_kernel[(8,)](x, out, 1000, BLOCK=128)
        return out
    a, b = run_both(f)
    assert_same(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("M,N", [(37, 52), (64, 64), (5, 200)])      # rows of 16-byte multiples (TMA)
def test_tensor_descriptor_load_and_store_agree(M, N):
    def f(K):
        x = torch.randn(M, N)
        K.descriptor_abs_kernel[(cdiv(M, 16), cdiv(N, 32))](x, M, N, BM=16, BN=32)
        return x
    a, b = run_both(f)
    assert_same(a, b)
    assert bool((a >= 0).all())


def test_persistent_grid_stride_softmax_agrees():
    def f(K):
        x = torch.randn(100, 70)
        y = torch.empty_like(x)
        K.persistent_softmax_kernel[(8,)](x, y, 100, 70, BLOCK=128)
        return y, x
    (a, x), (b, _) = run_both(f)
    assert_same(a, b, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(a, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)


def test_the_simulators_list_of_tritons_names_holds_the_installed_tritons():
    """mini_triton/language/names.py lists what Triton has, so that a name Triton lacks is not blamed on the
    simulator: the installed Triton's tl, tl.math and libdevice names must all be in it."""
    import ast
    from pathlib import Path

    import triton.language as tl
    from triton.language.extra.cuda import libdevice

    from mini_triton.language import names
    from mini_triton.language.extra import libdevice as mini_libdevice

    def functions(module):
        tree = ast.parse(Path(module.__file__).read_text())
        return {f.name for f in tree.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("_")}
    assert set(tl.__all__) <= names.TL
    assert functions(tl.math) <= names.MATH
    assert functions(libdevice) <= names.LIBDEVICE
    mini = {n for n in dir(mini_libdevice) if not n.startswith("_")}
    assert mini == set(mini_libdevice.__all__) and mini <= names.LIBDEVICE, mini - names.LIBDEVICE


# --- features of library kernels: dtype predicates, dtypes passed to helpers, interleave, and/or ------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64])
def test_a_dtype_generic_reduction_picks_its_accumulator_from_the_dtype(dtype):
    def f(K):
        x = (torch.randn(1000) * 10).to(dtype)
        out, info = torch.empty(8, dtype=dtype), torch.zeros(3, dtype=torch.int32)
        K.dtype_generic_sum_kernel[(8,)](x, out, info, 1000, BLOCK=128)
        return out, info
    (a, info), (b, info_b) = run_both(f)
    # the interpreter truncates fp32 -> bf16 where the simulator rounds (see the bf16 store test above)
    tol = {"rtol": 1e-2, "atol": 0} if dtype is torch.bfloat16 else {"rtol": 1e-6, "atol": 1e-5}
    assert_same((a, info), (b, info_b), **(tol if dtype.is_floating_point else {}))
    bits = torch.finfo(dtype).bits if dtype.is_floating_point else torch.iinfo(dtype).bits
    assert info[0] == bits


def test_int4_codes_unpacked_with_interleave_agree():
    def f(K):
        packed = torch.randint(0, 256, (300,), dtype=torch.uint8)
        lut, scale = torch.randn(16), torch.rand(10) + 0.5
        out = torch.empty(600)
        K.int4_unpack_kernel[(cdiv(300, 128),)](packed, lut, scale, out, 300, GROUP=64, BLOCK=128)
        return out, packed, lut, scale
    (a, packed, lut, scale), (b, _, _, _) = run_both(f)
    assert_same(a, b)
    codes = torch.stack([packed.long() >> 4, packed.long() & 0xF], dim=1).reshape(-1)
    assert torch.equal(a, lut[codes] * scale[torch.arange(600) // 64])


@pytest.mark.parametrize("mode", [0, 1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])     # the interpreter's bf16 .to() is wrong here
def test_a_casting_mode_rmsnorm_agrees(mode, dtype):
    def f(K):
        x, w = torch.randn(6, 100).to(dtype), torch.randn(100).to(dtype)
        y = torch.empty_like(x)
        K.casting_rmsnorm_kernel[(6,)](y, x, w, 100, 1e-6, 0.0, casting_mode=mode, BLOCK=128)
        return y
    a, b = run_both(f)
    assert_same(a, b, rtol=1e-3 if dtype is torch.float16 else 1e-6, atol=1e-3 if dtype is torch.float16 else 1e-6)


@pytest.mark.parametrize("long_indexing", [False, True])
def test_geglu_with_constexpr_int64_offsets_agrees(long_indexing):
    def f(K):
        e, g = torch.randn(1000), torch.randn(1000)
        h = torch.empty(1000)
        K.geglu_kernel[(cdiv(1000, 256),)](e, g, h, 1000, BLOCK=256, LONG_INDEXING=long_indexing)
        return h
    a, b = run_both(f)
    assert_same(a, b, rtol=1e-6, atol=1e-6)


def test_and_between_scalars_and_a_short_circuiting_constexpr_agree():
    def f(K):
        x = torch.randn(500)
        out = torch.empty(500)
        K.scalar_and_kernel[(4,)](x, out, 500, BLOCK=128, DEBUG=False)
        return out, x
    (a, x), (b, _) = run_both(f)
    assert_same(a, b)
    assert torch.equal(a[128:384], x[128:384] + 100) and torch.equal(a[:128], x[:128])


def test_and_or_between_blocks_are_element_wise_as_in_compiled_triton():
    """Compiled Triton turns `and`/`or` between blocks into & and | (with a warning); Triton's interpreter
    asks Python for bool() of the first block and returns one operand, so the simulator follows the compiler
    and is checked against torch here."""
    from backends import kernels as load
    x = torch.randn(1000) * 2
    out = torch.empty(1000)
    with pytest.warns(UserWarning, match="'and' and 'or' are deprecated for non-scalar tensors"):
        load("mini").block_logic_kernel[(8,)](x, out, 1000, BLOCK=128)
    expected = ((x > -1) & (x < 1)).float() + ((x < -2) | (x > 2)).float() * 2
    assert torch.equal(out, expected)
