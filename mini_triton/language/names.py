"""The names Triton itself has (3.6 and 3.9, the course's versions): ``tl``, ``tl.math``, libdevice, ``tl.extra``.

When a kernel asks the simulator for a name it lacks, these lists tell the two cases apart: a
name Triton has but mini_triton does not simulate, and a name Triton has no more than the simulator
(an old Triton 2 name, a typo), which would not compile on a GPU either.
"""

# triton.language.__all__
TL = frozenset({
    "PropagateNan", "TRITON_MAX_TENSOR_NUMEL", "abs", "add", "advance", "arange", "argmax", "argmin",
    "associative_scan", "assume", "atomic_add", "atomic_and", "atomic_cas", "atomic_load", "atomic_max",
    "atomic_min", "atomic_or", "atomic_poll", "atomic_store", "atomic_xchg", "atomic_xor", "bfloat16",
    "bitonic_merge", "block_type", "broadcast", "broadcast_to", "cast", "cat", "cdiv", "ceil", "clamp",
    "condition", "const", "constexpr", "constexpr_type", "cos", "cumprod", "cumsum", "debug_barrier",
    "device_assert", "device_print", "div_rn", "dot", "dot_scaled", "dtype", "erf", "exp", "exp2",
    "expand_dims", "expect_zero", "extra", "fdiv", "flip", "float16", "float32", "float64", "float8e4b15",
    "float8e4b8", "float8e4nv", "float8e5", "float8e5b16", "floor", "fma", "full", "gather", "histogram",
    "inline_asm_elementwise", "int1", "int16", "int32", "int64", "int8", "interleave", "join", "load",
    "load_tensor_descriptor", "log", "log2", "make_block_ptr", "make_tensor_descriptor", "map_elementwise",
    "math", "max", "max_constancy", "max_contiguous", "maximum", "min", "minimum", "mul", "multiple_of",
    "num_programs", "pair_uniform_to_normal", "permute", "philox", "philox_impl", "pi32_t", "pointer_type",
    "program_id", "rand", "rand4x", "randint", "randint4x", "randn", "randn4x", "range", "ravel", "reduce",
    "reduce_or", "reshape", "rsqrt", "sigmoid", "sin", "slice", "softmax", "sort", "split", "sqrt",
    "sqrt_rn", "squeeze", "static_assert", "static_print", "static_range", "store",
    "store_tensor_descriptor", "sub", "sum", "swizzle2d", "target_info", "tensor", "tensor_descriptor",
    "to_tensor", "topk", "trans", "tuple", "uint16", "uint32", "uint64", "uint8", "uint_to_uniform_float",
    "umulhi", "unsqueeze", "view", "void", "where", "xor_sum", "zeros", "zeros_like"
})

# triton.language.math's functions
MATH = frozenset({
    "abs", "ceil", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log", "log2", "rsqrt",
    "sin", "sqrt", "sqrt_rn", "umulhi"
})

# triton.language.extra.libdevice's functions
LIBDEVICE = frozenset({
    "abs", "acos", "acosh", "add_rd", "add_rn", "add_ru", "add_rz", "asin", "asinh", "atan", "atan2",
    "atanh", "brev", "byte_perm", "cbrt", "ceil", "clz", "copysign", "cos", "cosh", "cospi",
    "cyl_bessel_i0", "cyl_bessel_i1", "div_rd", "div_rn", "div_ru", "div_rz", "double2float_rd",
    "double2float_rn", "double2float_ru", "double2float_rz", "double2hiint", "double2int_rd",
    "double2int_rn", "double2int_ru", "double2int_rz", "double2ll_rd", "double2ll_rn", "double2ll_ru",
    "double2ll_rz", "double2loint", "double2uint_rd", "double2uint_rn", "double2uint_ru", "double2uint_rz",
    "double2ull_rd", "double2ull_rn", "double2ull_ru", "double2ull_rz", "double_as_longlong", "erf", "erfc",
    "erfcinv", "erfcx", "erfinv", "exp", "exp10", "exp2", "expm1", "fast_cosf", "fast_dividef",
    "fast_exp10f", "fast_expf", "fast_log10f", "fast_log2f", "fast_logf", "fast_powf", "fast_sinf",
    "fast_tanf", "fdim", "ffs", "finitef", "float2int_rd", "float2int_rn", "float2int_ru", "float2int_rz",
    "float2ll_rd", "float2ll_rn", "float2ll_ru", "float2ll_rz", "float2uint_rd", "float2uint_rn",
    "float2uint_ru", "float2uint_rz", "float2ull_rd", "float2ull_rn", "float2ull_ru", "float2ull_rz",
    "float_as_int", "float_as_uint", "floor", "fma", "fma_rd", "fma_rn", "fma_ru", "fma_rz", "fmod", "hadd",
    "hiloint2double", "hypot", "ilogb", "int2double_rn", "int2float_rd", "int2float_rn", "int2float_ru",
    "int2float_rz", "int_as_float", "isfinited", "isinf", "isnan", "j0", "j1", "jn", "ldexp", "lgamma",
    "ll2double_rd", "ll2double_rn", "ll2double_ru", "ll2double_rz", "ll2float_rd", "ll2float_rn",
    "ll2float_ru", "ll2float_rz", "llrint", "llround", "log", "log10", "log1p", "log2", "logb",
    "longlong_as_double", "mul24", "mul_rd", "mul_rn", "mul_ru", "mul_rz", "mulhi", "nearbyint",
    "nextafter", "norm3d", "norm4d", "normcdf", "normcdfinv", "popc", "pow", "rcbrt", "rcp64h", "rcp_rd",
    "rcp_rn", "rcp_ru", "rcp_rz", "remainder", "rhadd", "rhypot", "rint", "rnorm3d", "rnorm4d", "round",
    "rsqrt", "rsqrt_rn", "sad", "saturatef", "scalbn", "signbit", "sin", "sinh", "sinpi", "sqrt", "sqrt_rd",
    "sqrt_rn", "sqrt_ru", "sqrt_rz", "sub_rd", "sub_rn", "sub_ru", "sub_rz", "tan", "tanh", "tgamma",
    "trunc", "uint2double_rn", "uint2float_rd", "uint2float_rn", "uint2float_ru", "uint2float_rz",
    "uint_as_float", "ull2double_rd", "ull2double_rn", "ull2double_ru", "ull2double_rz", "ull2float_rd",
    "ull2float_rn", "ull2float_ru", "ull2float_rz", "y0", "y1", "yn"
})

# triton.language.extra's libraries, and triton.language.extra.cuda's names
EXTRA = frozenset({"cuda", "hip", "libdevice"})
CUDA = frozenset({
    "convert_custom_float8_sm70", "convert_custom_float8_sm80", "gdc", "gdc_launch_dependents", "gdc_wait",
    "globaltimer",
    "libdevice", "num_threads", "num_warps", "smid", "utils"
})

# Names from other math libraries that kernels reach for, and what Triton calls them.
SYNONYMS = {"fmax": "tl.maximum", "fmin": "tl.minimum", "fabs": "tl.abs", "powf": "libdevice.pow(x, y)",
            "rcp": "1.0 / x",
            "fast_rcp": "1.0 / x", "mean": "tl.sum(x, axis) / n", "square": "x * x", "relu": "tl.maximum(x, 0.0)"}
