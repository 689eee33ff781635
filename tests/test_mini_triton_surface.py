"""tl is Triton's public surface: tl, tl.math, libdevice, tl.extra and tl.dtype have the names the installed
Triton has, up to a listed and tested set of differences; a name Triton lacks is told as such; the README's
recipe for a new op makes it tl.X and tl.math.X."""

import pytest
import torch

import mini_triton as triton

tl = triton.language


def test_tl_has_only_tritons_names_so_a_kernel_that_runs_here_compiles_on_a_gpu():
    """The simulator's own imports (torch, its memory model...) are not reachable as tl.<name>: a kernel
    that called tl.torch.exp would run on the simulator and fail on a GPU."""
    from mini_triton.language import names
    public = {n for n in dir(tl) if not n.startswith("_")}
    assert public <= names.TL | {"core", "math", "extra"}, sorted(public - names.TL)
    for name in ("torch", "memory", "runtime", "Affine", "builtins"):
        with pytest.raises(Exception, match=f"Triton has no tl.{name} either"):
            getattr(tl, name)
    assert "unsupported" not in dir(tl.math)


# --- tl is Triton's public surface: the names the installed Triton has, and a listed set of differences ------

_NOT_SIMULATED = "not simulated: says 'not supported by mini_triton' (Triton has it)"
# (namespace, name): why mini_triton differs from the installed Triton there. A listed name that no longer
# differs fails the test, so that the list cannot go stale.
DIFFERENCES = {
    **{("tl", n): _NOT_SIMULATED + ", with what to write instead" for n in (
        "associative_scan", "reduce", "gather", "histogram", "sort", "topk", "inline_asm_elementwise", "rand",
        "randn", "randint")},
    **{("tl", n): "random numbers: " + _NOT_SIMULATED for n in (
        "rand4x", "randint4x", "randn4x", "philox", "philox_impl", "pair_uniform_to_normal", "uint_to_uniform_float")},
    ("tl", "make_block_ptr"): "removed from Triton 3.9 (its interpreter refuses it): says so",
    **{("tl", n): "fp8 types: torch has no CPU arithmetic for them; " + _NOT_SIMULATED for n in (
        "float8e4b15", "float8e4b8", "float8e4nv", "float8e5", "float8e5b16", "dot_scaled")},
    **{("tl", n): "memory-model operations of Triton 3.9: " + _NOT_SIMULATED for n in (
        "atomic_load", "atomic_store", "atomic_poll", "expect_zero")},
    **{("tl", n): "compiler internals a kernel does not call: " + _NOT_SIMULATED for n in (
        "condition", "const", "constexpr_type", "pi32_t", "target_info", "tensor_descriptor", "to_tensor", "tuple",
        "void", "map_elementwise", "bitonic_merge", "slice")},
    ("tl", "cat"): "Triton may reorder the elements (can_reorder=True): " + _NOT_SIMULATED,
    ("tl", "reduce_or"): "an integer bit reduction: " + _NOT_SIMULATED,
    ("tl", "xor_sum"): "an integer bit reduction: " + _NOT_SIMULATED,
    ("tl", "umulhi"): "integer high product: " + _NOT_SIMULATED + "; the recipe test below adds it",
    ("tl.math", "umulhi"): "integer high product: " + _NOT_SIMULATED + "; the recipe test below adds it",
    ("tl.extra", "hip"): "AMD's device library: " + _NOT_SIMULATED,
    **{("tl.extra.cuda", n): "hardware clocks, fp8 conversions, grid dependency control: " + _NOT_SIMULATED
       for n in ("convert_custom_float8_sm70", "convert_custom_float8_sm80", "gdc", "gdc_launch_dependents", "gdc_wait",
                 "globaltimer", "smid", "utils")},
    **{("dtype", n): "compiler internals (IR types, name mangling)" for n in (
        "cache_key_part", "codegen_name", "mangle", "to_ir", "with_element_ty")},
    ("dtype", "torch"): "the simulator's own: the torch dtype it stores the values in",
    ("pointer_type", "torch"): "the simulator's own: a pointer is held as an int64 offset",
    ("pointer_type", "itemsize"): "the simulator's pointer type is a dtype of 64 bits",
    ("pointer_type", "primitive_bitwidth"): "the simulator's pointer type is a dtype of 64 bits",
    **{("pointer_type", n): "compiler internals (IR types, name mangling)" for n in (
        "cache_key_part", "codegen_name", "mangle", "to_ir", "with_element_ty")},
}
# libdevice: the simulator has the math functions kernels call; these it leaves out, all saying so
LIBDEVICE_LEFT_OUT = {
    "directed rounding (torch rounds to nearest)": r"^(?!sqrt_rz$).*_(rd|ru|rz)$|^(add|sub|mul)_rn$",
    "conversions and bit reinterpretations (write .to(dtype) or .to(dtype, bitcast=True))":
        r"^(double|float|int|ll|uint|ull)2|_as_|^hiloint2double$",
    "integer bit tricks": r"^(brev|byte_perm|clz|ffs|popc|mul24|mulhi|sad|hadd|rhadd|rcp64h)$",
    "special functions and fast approximations not simulated": r"^(cospi|sinpi|cyl_bessel_i[01]|erfcinv|erfcx|"
        r"fast_(cos|sin|tan|tanh|log2|log10|exp10)f|fdim|ilogb|[jy][01n]|ldexp|scalbn|llrint|llround|logb|"
        r"r?norm[34]d|normcdf(inv)?|rcbrt|rhypot|tgamma)$",
}


def _public(obj):
    return {n for n in dir(obj) if not n.startswith("_")}


def _defined(module):
    """The functions and submodules a Triton module defines (not what it imports for its own use)."""
    import inspect
    import types
    out = set()
    for n in _public(module):
        v = getattr(module, n)
        home = v.__name__ if isinstance(v, types.ModuleType) else getattr(v, "__module__", None) or ""
        if home.startswith(module.__name__) and (callable(v) or isinstance(v, types.ModuleType)) \
                and not isinstance(v, type(inspect.Parameter.empty)) and n not in ("T", "module"):
            out.add(n)
    return out


def _namespaces():
    """{namespace: (the installed Triton's names, mini_triton's names)}."""
    triton_lang = pytest.importorskip("triton.language")
    from triton.language.extra import cuda as triton_cuda
    from triton.language.extra import libdevice as triton_libdevice

    from mini_triton.language.extra import cuda as mini_cuda
    from mini_triton.language.extra import libdevice as mini_libdevice
    return {
        "tl": (set(triton_lang.__all__), _public(tl)),
        "tl.math": (_defined(triton_lang.math), _public(tl.math)),
        "libdevice": (_defined(triton_libdevice), _public(mini_libdevice)),
        "tl.extra": (_defined(triton_lang.extra), _public(tl.extra)),
        "tl.extra.cuda": (_defined(triton_cuda), _public(mini_cuda)),
        "dtype": (_public(triton_lang.float32) | _public(triton_lang.int32), _public(tl.float32) | _public(tl.int32)),
        "pointer_type": (_public(triton_lang.pointer_type(triton_lang.float32)),
                         _public(tl.pointer_type(tl.float32))),
    }


def _left_out_of_libdevice(name):
    import re
    return next((why for why, pattern in LIBDEVICE_LEFT_OUT.items() if re.search(pattern, name)), None)


@pytest.mark.parametrize("space", ["tl", "tl.math", "libdevice", "tl.extra", "tl.extra.cuda", "dtype",
                                   "pointer_type"])
def test_the_namespace_has_the_installed_tritons_names_but_the_listed_differences(space):
    theirs, ours = _namespaces()[space]
    differ = theirs ^ ours
    listed = {n for s, n in DIFFERENCES if s == space}
    unlisted = {n for n in differ - listed if not (space == "libdevice" and _left_out_of_libdevice(n))}
    assert not unlisted, f"{space}: names that differ from Triton's without a reason in DIFFERENCES: {sorted(unlisted)}"
    stale = listed - differ
    assert not stale, f"{space}: listed as different but the same as Triton's now: {sorted(stale)}"
    if space == "libdevice":
        matched = {n for n in theirs | ours if _left_out_of_libdevice(n)}
        assert matched <= differ, f"left out of libdevice, yet here: {sorted(matched - differ)}"
        assert ours <= theirs


@pytest.mark.parametrize("space,name", sorted((s, n) for s, n in DIFFERENCES if s.startswith("tl")))
def test_a_name_triton_has_and_the_simulator_not_says_it_is_not_supported(space, name):
    module = {"tl": tl, "tl.math": tl.math, "tl.extra": tl.extra, "tl.extra.cuda": tl.extra.cuda}[space]
    with pytest.raises(NotImplementedError, match=rf"{space}.{name}(: block pointers were removed| is not supported)"):
        getattr(module, name)


@pytest.mark.parametrize("space", ["tl", "tl.math", "libdevice"])
@pytest.mark.parametrize("name", ["torch", "exp_", "sqrtf", "builtins", "np", "Tensor", "names", "ops"])
def test_a_name_only_python_or_torch_has_does_not_exist_in_triton(space, name):
    from mini_triton.language.extra import libdevice
    module = {"tl": tl, "tl.math": tl.math, "libdevice": libdevice}[space]
    with pytest.raises(NotImplementedError, match=rf"Triton has no {space}.{name} either: this line would not "
                                                  r"compile on a GPU"):
        getattr(module, name)


def test_tl_math_is_tritons_math_only():
    """Triton's tl.math has no max, min, sigmoid, tanh or cdiv: they are tl.maximum, tl.sigmoid, libdevice.tanh..."""
    for name in ("max", "min", "sigmoid", "tanh", "cdiv"):
        with pytest.raises(NotImplementedError, match=f"Triton has no tl.math.{name} either"):
            getattr(tl.math, name)
    assert tl.math.exp is tl.exp and tl.math.rsqrt is tl.rsqrt and tl.math.fdiv is tl.fdiv


def test_an_op_added_by_the_readme_recipe_is_tl_x_and_tl_math_x(monkeypatch):
    """mini_triton/README.md, "How to add a tl op": a function in its module and in that module's __all__ becomes
    tl.<name>, and tl.math.<name> where Triton's tl.math has it. Added here for the test's duration, then undone."""
    import importlib

    import mini_triton.language.math as tl_math
    from mini_triton.language import elementwise, ops

    def umulhi(x, y):
        """The high 32 bits of the 64-bit product of two int32 blocks."""
        return (x.to(tl.int64) * y) >> 32

    def rebuild():
        for module in (ops, tl_math, tl):
            importlib.reload(module)
    try:
        monkeypatch.setattr(elementwise, "umulhi", umulhi, raising=False)
        monkeypatch.setattr(elementwise, "__all__", [*elementwise.__all__, "umulhi"])
        rebuild()
        assert tl.umulhi is umulhi and tl.math.umulhi is umulhi and "umulhi" in tl.__all__

        @triton.jit
        def k(x_ptr, out_ptr, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            x = tl.load(x_ptr + offs)
            tl.store(out_ptr + offs, tl.math.umulhi(x, x) + tl.umulhi(x, 1 << 16))
        x, out = torch.tensor([3, 1 << 20, -(1 << 24), 1 << 30], dtype=torch.int32), torch.empty(4, dtype=torch.int64)
        k[(1,)](x, out, BLOCK=4)
        assert out.tolist() == [((v * v) >> 32) + ((v << 16) >> 32) for v in x.tolist()]
    finally:
        monkeypatch.undo()
        tl_math.__dict__.pop("umulhi", None)
        rebuild()
    with pytest.raises(NotImplementedError, match="tl.umulhi is not supported by mini_triton"):
        tl.umulhi


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64", "int1", "int8", "int16", "int32",
                                  "int64", "uint8", "uint16", "uint32", "uint64"])
def test_dtype_predicates_and_attributes_are_tritons(name):
    triton_lang = pytest.importorskip("triton.language")
    theirs, ours = getattr(triton_lang, name), getattr(tl, name)
    for attr in ("primitive_bitwidth", "itemsize", "int_bitwidth", "fp_mantissa_width", "exponent_bias", "name"):
        assert getattr(ours, attr, None) == getattr(theirs, attr, None), attr
    predicates = sorted(n for n in _public(theirs) if n.startswith("is_") and n not in ("is_void", "is_dtype"))
    assert len(predicates) >= 25
    for p in predicates:
        assert getattr(ours, p)() == getattr(theirs, p)(), p
    if ours.is_int():
        assert (ours.get_int_min_value(), ours.get_int_max_value()) == \
            (theirs.get_int_min_value(), theirs.get_int_max_value())
        assert ours.int_signedness.name == theirs.int_signedness.name
    assert ours.scalar is ours and ours == getattr(tl, name) and ours != (tl.int8 if ours is not tl.int8 else tl.int16)


def test_interleave_flip_squeeze_softmax_and_friends():
    @triton.jit
    def k(x_ptr, out_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + o)
        tl.store(out_ptr + tl.arange(0, 2 * BLOCK), tl.interleave(x, x * 10))
        tl.store(out_ptr + 2 * BLOCK + o, tl.flip(x))
        tl.store(out_ptr + 3 * BLOCK + o, tl.squeeze(tl.unsqueeze(x, 0), 0) + tl.add(x, 1) - tl.mul(x, 2))
        tl.store(out_ptr + 4 * BLOCK + o, tl.softmax(x))
        tl.store(out_ptr + 5 * BLOCK + o, tl.maximum(x, float("nan"), propagate_nan=tl.PropagateNan.ALL))
        tl.store(out_ptr + 6 * BLOCK + o, tl.zeros_like(x) + tl.extra.cuda.num_threads())
    x, out = torch.randn(8), torch.empty(56)
    k[(1,)](x, out, BLOCK=8, num_warps=2)
    assert torch.equal(out[:16], torch.stack([x, x * 10], 1).reshape(-1)) and torch.equal(out[16:24], x.flip(0))
    torch.testing.assert_close(out[24:32], torch.ones(8))
    torch.testing.assert_close(out[32:40], torch.softmax(x, 0))
    assert out[40:48].isnan().all() and (out[48:] == 64).all()
    assert tl.TRITON_MAX_TENSOR_NUMEL == 1 << 20
