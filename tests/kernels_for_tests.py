"""Teaching kernels run under both mini_triton and Triton's interpreter.

The module is imported twice (tests/backends.py): with BACKEND = "mini" it
uses mini_triton, with BACKEND = "interpret" real Triton with
TRITON_INTERPRET=1. The kernels are identical, so any difference in their
results is a difference between the two simulators.
"""
BACKEND = globals().get("BACKEND", "mini")
if BACKEND == "mini":
    import mini_triton as triton
    from mini_triton.language.extra import libdevice
    tl = triton.language
else:
    import triton
    import triton.language as tl

    class libdevice:
        """Triton's interpreter runs tl.math but not libdevice: the same functions under those names."""
        rsqrt, erf, exp, log, sqrt = (staticmethod(lambda x, f=f: getattr(tl.math, f)(x))
                                      for f in ("rsqrt", "erf", "exp", "log", "sqrt"))


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


@triton.jit
def row_rmsnorm_fwd(x_ptr, g_ptr, y_ptr, r_ptr, n_cols, row_stride, eps, BLOCK: tl.constexpr):
    """One program per row: r = 1/sqrt(mean(x^2) + eps), y = x * r * g."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * row_stride + cols, x * r * g, mask=mask)
    tl.store(r_ptr + row, r)


@triton.jit
def row_rmsnorm_bwd(x_ptr, g_ptr, dy_ptr, r_ptr, dx_ptr, dg_partial_ptr, n_cols, row_stride,
                    BLOCK: tl.constexpr):
    """One program per row; each row writes its own row of partial dg."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(r_ptr + row)
    dyg = dy * g
    c = tl.sum(dyg * x, axis=0) * r * r * r / n_cols
    tl.store(dx_ptr + row * row_stride + cols, dyg * r - x * c, mask=mask)
    tl.store(dg_partial_ptr + row * n_cols + cols, dy * x * r, mask=mask)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * out_stride + cols, num / tl.sum(num, axis=0), mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """C = A @ B on a 2-D grid of (BM, BN) tiles, accumulating in fp32."""
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak,
                    mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn,
                    mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def atomic_sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Every program adds its block's sum into out[0]."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


@triton.jit
def grid2d_kernel(x_ptr, out_ptr, n_rows, n_cols, BR: tl.constexpr, BC: tl.constexpr):
    """out = 2 * x + the program's (row, col) tile coordinates, on a 2-D grid."""
    pr = tl.program_id(0)
    pc = tl.program_id(1)
    r = pr * BR + tl.arange(0, BR)
    c = pc * BC + tl.arange(0, BC)
    mask = (r[:, None] < n_rows) & (c[None, :] < n_cols)
    offs = r[:, None] * n_cols + c[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, 2 * x + pr * 1000 + pc, mask=mask)


@triton.jit
def cast_store_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Store fp32 values into a tensor of another dtype (the store converts)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def persistent_rows_kernel(x_ptr, out_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    """Each program strides over rows (a loop whose trip count differs between programs)."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    for row in range(pid, n_rows, tl.num_programs(0)):
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row, tl.sum(x, axis=0) + pid * 0.0)


@triton.jit
def first_program_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Program 0 also writes a flag: a branch on the program id."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)
    if pid == 0:
        tl.store(out_ptr + n, 42.0)


@triton.jit
def cumsum_argmax_kernel(x_ptr, cs_ptr, am_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + cols, mask=cols < n, other=0.0)
    tl.store(cs_ptr + row * n + cols, tl.cumsum(x, axis=0), mask=cols < n)
    xm = tl.where(cols < n, x, -float("inf"))
    tl.store(am_ptr + row, tl.argmax(xm, axis=0))


@triton.jit
def locked_partial_sum_kernel(x_ptr, partial_ptr, lock_ptr, N, GROUPS: tl.constexpr, BLOCK: tl.constexpr):
    """Each row adds itself into partial[row % GROUPS] under that row's lock: rows of one group take
    turns (the pattern of Triton's layer-norm backward tutorial, written here)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    group = row % GROUPS
    lock = lock_ptr + group
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    acc = tl.load(partial_ptr + group * N + cols, mask=mask, other=0.0)
    tl.store(partial_ptr + group * N + cols, acc + x, mask=mask)
    tl.atomic_xchg(lock, 0)


@triton.jit
def unlocked_partial_sum_kernel(x_ptr, partial_ptr, lock_ptr, N, GROUPS: tl.constexpr, BLOCK: tl.constexpr):
    """locked_partial_sum_kernel without its lock: rows of one group race on their partial row."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    group = row % GROUPS
    acc = tl.load(partial_ptr + group * N + cols, mask=mask, other=0.0)
    tl.store(partial_ptr + group * N + cols, acc + x, mask=mask)


@triton.jit
def split_join_kernel(x_ptr, pairs_ptr, sums_ptr, BLOCK: tl.constexpr):
    """tl.join two blocks into (BLOCK, 2), store it, and tl.split it back."""
    offs = tl.arange(0, BLOCK)
    a = tl.load(x_ptr + offs)
    b = tl.load(x_ptr + BLOCK + offs)
    pairs = tl.join(a, b * 2.0)
    tl.store(pairs_ptr + offs[:, None] * 2 + tl.arange(0, 2)[None, :], pairs)
    u, v = tl.split(pairs)
    tl.store(sums_ptr + offs, u - v)


@triton.jit
def libdevice_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Math functions kernels call through libdevice."""
    offs = tl.program_id(0).cast(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    y = libdevice.rsqrt(x) + libdevice.erf(x) + libdevice.exp(x) + libdevice.log(x) + libdevice.sqrt(x)
    tl.store(out_ptr + offs, y, mask=mask)


@triton.jit
def descriptor_abs_kernel(p, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """In-place |x| through a tensor descriptor: blocks at the edges stick out of the (M, N) shape."""
    desc = tl.make_tensor_descriptor(p, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    m0, n0 = tl.program_id(0) * BM, tl.program_id(1) * BN
    desc.store([m0, n0], tl.abs(desc.load([m0, n0])))


@triton.jit
def persistent_softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    """A persistent (grid-stride) softmax: each program loops over rows pid, pid + programs, ..."""
    start = tl.program_id(0)
    step = tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    for row in tl.range(start, n_rows, step):
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * n_cols + cols, e / tl.sum(e, axis=0), mask=mask)


# --- features of library kernels (Liger, FlagGems, unsloth, bitsandbytes), written here in their style ------

@triton.jit
def _accumulator_type(dtype):
    """fp32 for 16-bit floats, the type itself otherwise: a dtype passed to a helper is a constant there."""
    if dtype.is_fp16() or dtype.is_bf16():
        return tl.float32
    return dtype


@triton.jit
def dtype_generic_sum_kernel(x_ptr, out_ptr, info_ptr, n, BLOCK: tl.constexpr):
    """One partial sum per program, accumulated in a type chosen from the input's (FlagGems' reductions);
    info_ptr gets what the dtype says of itself."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if tl.constexpr(x_ptr.dtype.element_ty == tl.float16) or tl.constexpr(x_ptr.dtype.element_ty == tl.bfloat16):
        cdtype = tl.float32
    else:
        cdtype = x_ptr.dtype.element_ty
    acc_dtype = _accumulator_type(x_ptr.dtype.element_ty)
    tl.static_assert(acc_dtype == cdtype)
    acc = tl.zeros((BLOCK,), dtype=acc_dtype)
    acc += tl.load(x_ptr + offs, mask=offs < n, other=0).to(cdtype)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0).to(out_ptr.dtype.element_ty))
    ty = x_ptr.dtype.element_ty
    if pid == 0:
        tl.store(info_ptr + 0, ty.primitive_bitwidth)
        tl.store(info_ptr + 1, ty.is_floating() + 2 * ty.is_int_signed() + 4 * ty.is_int64() + 8 * ty.is_fp32())
        if ty.is_int():
            tl.store(info_ptr + 2, ty.int_bitwidth)


@triton.jit
def int4_unpack_kernel(packed_ptr, lut_ptr, scale_ptr, out_ptr, n_packed, GROUP: tl.constexpr, BLOCK: tl.constexpr):
    """bitsandbytes-style 4-bit dequantisation: each byte holds two codes (high nibble first); each code
    indexes a table of 16 values, scaled per group; tl.interleave puts the two halves back in order."""
    offs = tl.program_id(axis=0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_packed
    a = tl.load(packed_ptr + offs, mask, other=0, eviction_policy="evict_first")
    high = tl.load(lut_ptr + (a >> 4), eviction_policy="evict_last")
    low = tl.load(lut_ptr + (a & 0xF))
    scale = tl.load(scale_ptr + offs // (GROUP // 2), mask=mask, other=1.0)
    out = tl.interleave(high * scale, low * scale)
    out_offs = tl.program_id(0) * BLOCK * 2 + tl.arange(0, 2 * BLOCK)
    tl.store(out_ptr + out_offs, out, out_offs < 2 * n_packed)


CASTING_LLAMA = tl.constexpr(0)
CASTING_GEMMA = tl.constexpr(1)


@triton.jit
def casting_rmsnorm_kernel(y_ptr, x_ptr, w_ptr, n_cols, eps, offset, casting_mode: tl.constexpr,
                           BLOCK: tl.constexpr):
    """Liger's RMSNorm: a constexpr casting mode picks where fp32 is used; the row's dtype is kept in a
    variable and used by .to(). (Liger writes eps.to(tl.float32), which compiled Triton and mini_triton
    accept; Triton's interpreter passes a float argument as a Python float, without .to(): tl.full here.)"""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0)
    x_dtype = x.dtype
    w = tl.load(w_ptr + cols, mask=mask, other=0)
    if casting_mode == CASTING_LLAMA or casting_mode == CASTING_GEMMA:
        x = x.to(tl.float32)
    if casting_mode == CASTING_GEMMA:
        w = w.to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + tl.full((), eps, tl.float32))
    x = x * rstd
    if casting_mode == CASTING_LLAMA:
        x = x.to(x_dtype)
    y = x * (offset + w)
    tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=mask, cache_modifier=".cg")


@triton.jit
def geglu_kernel(e_ptr, g_ptr, h_ptr, n, BLOCK: tl.constexpr, LONG_INDEXING: tl.constexpr):
    """unsloth's exact GEGLU forward: erf of a scaled input, a constexpr switch to int64 offsets."""
    pid = tl.program_id(0)
    if LONG_INDEXING:
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
        n = tl.cast(n, tl.int64)
    else:
        offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    e = tl.load(e_ptr + offs, mask=mask, other=0).to(tl.float32)
    g = tl.load(g_ptr + offs, mask=mask, other=0)
    f = 0.5 * e * (tl.math.erf(tl.math.rsqrt(2.0) * e) + 1.0)
    tl.store(h_ptr + offs, f.to(g.dtype) * g, mask=mask)


@triton.jit
def scalar_and_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, DEBUG: tl.constexpr):
    """`and` between scalars in an `if` (the same under the interpreter and compiled Triton), and a
    constexpr that short-circuits: with DEBUG false the out-of-bounds load is never made."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    if DEBUG and tl.load(x_ptr + n + 1000000) > 0:
        x = x * 0.0
    if pid > 0 and pid < tl.num_programs(0) - 1:
        x = x + 100.0
    tl.store(out_ptr + offs, x, mask=offs < n)


@triton.jit
def block_logic_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """`and`/`or` between blocks: element-wise in compiled Triton (Triton's interpreter asks bool() of the
    first block instead, so this one is checked against torch)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    inside = (offs < n) and (x > -1.0) and (x < 1.0)
    tail = (x < -2.0) or (x > 2.0)
    tl.store(out_ptr + offs, tl.where(inside, 1.0, 0.0) + tl.where(tail, 2.0, 0.0), mask=offs < n)
