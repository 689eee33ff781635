"""Kernels written the way public Triton libraries write them, for `make bench-sim` and the fidelity tests.

Each kernel below is this project's own code. It follows the structure of one published kernel (its grid,
its loops, what it loads, what decides its control flow), because that structure is what makes a simulator
fast or slow: programs whose loops run a number of times read from memory, scalar loops, small blocks,
gathers through indices, stores into the input. ``SOURCES`` records the kernel each one follows.

Like tests/kernels_for_tests.py, this module is imported once per backend (tests/backends.py): with BACKEND =
"mini" under mini_triton, with BACKEND = "interpret" under Triton's interpreter (TRITON_INTERPRET=1).

It is long (about 650 lines) because it is a collection: eighteen kernels, each a short section of its own
(marked ``# -- library: kernel``), then the cases that launch them. It is imported once per backend as a
whole, which is why it is one module and not one per kernel.
"""
BACKEND = globals().get("BACKEND", "mini")
if BACKEND == "mini":
    import mini_triton as triton
    tl = triton.language
else:
    import triton
    import triton.language as tl

# name -> (library, file in its repository, the kernel followed)
SOURCES = {
    "decode attention": ("sglang", "python/sglang/srt/layers/attention/triton_ops/decode_attention.py",
                         "_fwd_kernel_stage1 and _fwd_kernel_stage2 (split-KV flash decoding over a paged KV cache)"),
    "rotary embedding": ("Liger-Kernel", "src/liger_kernel/ops/rope.py", "_triton_rope (in place, all heads of a "
                         "token in one program)"),
    "cross-entropy": ("Liger-Kernel", "src/liger_kernel/ops/cross_entropy.py", "liger_cross_entropy_kernel "
                      "(online softmax over the vocabulary, the gradient written into the logits)"),
    "embedding": ("Liger-Kernel", "src/liger_kernel/ops/embedding.py", "embedding_forward_kernel (a 2-D grid, "
                  "rows gathered through the indices)"),
    "MoE alignment": ("vLLM", "vllm/model_executor/layers/fused_moe/moe_align_block_size.py",
                      "moe_align_block_size_stage1 to stage4 (scalar loops over tokens and experts)"),
    "rejection sampler": ("vLLM", "vllm/v1/sample/rejection_sampler.py", "rejection_greedy_sample_kernel (a "
                          "scalar loop over each request's draft tokens, its length read from memory)"),
    "AWQ GEMM": ("vLLM", "vllm/model_executor/layers/quantization/awq_triton.py", "awq_gemm_kernel (int4 weights "
                 "unpacked with tl.interleave and shifts, tl.dot, split-K)"),
    "KV-cache store": ("vLLM", "vllm/attention/ops/triton_reshape_and_cache_flash.py",
                       "reshape_and_cache_kernel_flash (one token per program, its slot read from memory)"),
    "layer norm forward": ("Triton tutorials", "python/tutorials/05-layer-norm.py", "_layer_norm_fwd_fused "
                           "(loops over a row's columns)"),
    "SwiGLU": ("Liger-Kernel", "src/liger_kernel/ops/swiglu.py", "_swiglu_forward_kernel"),
    # written in tests/kernels_for_tests.py, where the fidelity tests use them too
    "fused softmax": ("Triton tutorials", "python/tutorials/02-fused-softmax.py", "softmax_kernel (a row per "
                      "program)"),
    "persistent softmax": ("Triton tutorials", "python/tutorials/02-fused-softmax.py", "softmax_kernel in its "
                           "persistent form (each program strides over rows)"),
    "matmul": ("Triton tutorials", "python/tutorials/03-matrix-multiplication.py", "matmul_kernel (tiles, "
               "a loop over K, tl.dot)"),
    "layer norm dW (locks)": ("Triton tutorials", "python/tutorials/05-layer-norm.py", "_layer_norm_bwd_dx_fused's "
                              "partial sums of dW and dB, each group of rows under a spin lock"),
    "Liger RMSNorm": ("Liger-Kernel", "src/liger_kernel/ops/rms_norm.py", "_rms_norm_forward_kernel (casting "
                      "modes, bf16)"),
    "GEGLU": ("unsloth", "unsloth/kernels/geglu.py", "_exact_forward_kernel (erf, a constexpr switch to int64 "
              "offsets)"),
    "4-bit dequantisation": ("bitsandbytes", "bitsandbytes/backends/triton/kernels_4bit.py", "the NF4/FP4 "
                             "dequantisation kernels (two codes per byte, a lookup table, a scale per block)"),
    "sum (dtype-generic)": ("FlagGems", "src/flag_gems/ops/sum.py", "sum_kernel_1 (partial sums in a type chosen "
                            "from the input's)"),
}


# -- sglang: split-KV decode attention ---------------------------------------------------------------
@triton.jit
def decode_attention_stage1(q_ptr, k_ptr, v_ptr, kv_indptr_ptr, kv_indices_ptr, mid_ptr, lse_ptr, sm_scale,
                            n_heads, SPLITS: tl.constexpr, D: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program per (request, head, split): a split's share of the request's KV positions, whose slots in
    the paged cache are read from kv_indices; an online softmax over blocks of BLOCK_N positions."""
    req, head, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    kv_start = tl.load(kv_indptr_ptr + req)
    seq_len = tl.load(kv_indptr_ptr + req + 1) - kv_start
    per_split = tl.cdiv(seq_len, SPLITS)
    lo = split * per_split
    hi = tl.minimum(lo + per_split, seq_len)
    d = tl.arange(0, D)
    q = tl.load(q_ptr + (req * n_heads + head) * D + d)
    e_max, e_sum = -float("inf"), 0.0
    acc = tl.zeros([D], dtype=tl.float32)
    for start in range(lo, hi, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        valid = n < hi
        slot = tl.load(kv_indices_ptr + kv_start + n, mask=valid, other=0)
        kv = (slot[:, None] * n_heads + head) * D + d[None, :]
        k = tl.load(k_ptr + kv, mask=valid[:, None], other=0.0)
        qk = tl.where(valid, tl.sum(q[None, :] * k, 1) * sm_scale, -float("inf"))
        new_max = tl.maximum(tl.max(qk, 0), e_max)
        rescale = tl.exp(e_max - new_max)
        p = tl.exp(qk - new_max)
        v = tl.load(v_ptr + kv, mask=valid[:, None], other=0.0)
        acc = acc * rescale + tl.sum(p[:, None] * v, 0)
        e_sum = e_sum * rescale + tl.sum(p, 0)
        e_max = new_max
    out = (req * n_heads + head) * SPLITS + split
    if hi > lo:
        tl.store(mid_ptr + out * D + d, acc / e_sum)
        tl.store(lse_ptr + out, e_max + tl.log(e_sum))


@triton.jit
def decode_attention_stage2(kv_indptr_ptr, mid_ptr, lse_ptr, o_ptr, n_heads, SPLITS: tl.constexpr,
                            D: tl.constexpr):
    """One program per (request, head): the splits' partial outputs merged by their log-sum-exps."""
    req, head = tl.program_id(0), tl.program_id(1)
    seq_len = tl.load(kv_indptr_ptr + req + 1) - tl.load(kv_indptr_ptr + req)
    per_split = tl.cdiv(seq_len, SPLITS)
    d = tl.arange(0, D)
    e_max, e_sum = -float("inf"), 0.0
    acc = tl.zeros([D], dtype=tl.float32)
    for split in range(0, SPLITS):
        if split * per_split < seq_len:
            at = (req * n_heads + head) * SPLITS + split
            lse = tl.load(lse_ptr + at)
            part = tl.load(mid_ptr + at * D + d)
            new_max = tl.maximum(lse, e_max)
            rescale = tl.exp(e_max - new_max)
            w = tl.exp(lse - new_max)
            acc = acc * rescale + w * part
            e_sum = e_sum * rescale + w
            e_max = new_max
    tl.store(o_ptr + (req * n_heads + head) * D + d, acc / e_sum)


# -- Liger: rotary embedding, in place -----------------------------------------------------------------
@triton.jit
def rope_kernel(q_ptr, k_ptr, cos_ptr, sin_ptr, seq_len, n_qh: tl.constexpr, n_kh: tl.constexpr,
                hd: tl.constexpr, PAD_QH: tl.constexpr, PAD_KH: tl.constexpr, PAD_HD: tl.constexpr):
    """One program per token: the first and second halves of every head's vector rotated by the position's
    angles, written back where they were read."""
    tok = tl.program_id(0)
    pos = tok % seq_len
    half = tl.arange(0, PAD_HD // 2)
    in_half = half < hd // 2
    cos = tl.load(cos_ptr + pos * hd + half, mask=in_half, other=0)
    sin = tl.load(sin_ptr + pos * hd + half, mask=in_half, other=0)
    qh = tl.arange(0, PAD_QH)[:, None]
    q1 = q_ptr + tok * n_qh * hd + qh * hd + half[None, :]
    q_mask = (qh < n_qh) & in_half[None, :]
    a = tl.load(q1, mask=q_mask, other=0)
    b = tl.load(q1 + hd // 2, mask=q_mask, other=0)
    tl.store(q1, a * cos - b * sin, mask=q_mask)
    tl.store(q1 + hd // 2, b * cos + a * sin, mask=q_mask)
    kh = tl.arange(0, PAD_KH)[:, None]
    k1 = k_ptr + tok * n_kh * hd + kh * hd + half[None, :]
    k_mask = (kh < n_kh) & in_half[None, :]
    a = tl.load(k1, mask=k_mask, other=0)
    b = tl.load(k1 + hd // 2, mask=k_mask, other=0)
    tl.store(k1, a * cos - b * sin, mask=k_mask)
    tl.store(k1 + hd // 2, b * cos + a * sin, mask=k_mask)


# -- Liger: cross-entropy, the gradient written into the logits --------------------------------------------
@triton.jit
def cross_entropy_kernel(x_ptr, y_ptr, loss_ptr, n_cols, n_valid, ignore_index, BLOCK: tl.constexpr):
    """One program per row: skip an ignored target; an online max and sum of exponentials over the vocabulary;
    then softmax minus the one-hot target, divided by the number of counted rows, stored over the logits."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * n_cols
    y = tl.load(y_ptr + row)
    if y == ignore_index:
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            tl.store(x_row + cols, 0.0, mask=cols < n_cols)
        tl.store(loss_ptr + row, 0.0)
    else:
        m, d = -float("inf"), 0.0
        x_y = tl.load(x_row + y).to(tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
            new_m = tl.maximum(m, tl.max(x, 0))
            d = d * tl.exp(m - new_m) + tl.sum(tl.exp(x - new_m), 0)
            m = new_m
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
            grad = tl.exp(x - m) / d
            grad = tl.where(cols == y, grad - 1.0, grad) / n_valid
            tl.store(x_row + cols, grad, mask=cols < n_cols)
        tl.store(loss_ptr + row, (tl.log(d) + m - x_y) / n_valid)


# -- Liger: embedding lookup ------------------------------------------------------------------------
@triton.jit
def embedding_kernel(emb_ptr, idx_ptr, out_ptr, n, dim, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A 2-D grid over (tokens, embedding columns): each program gathers BLOCK_M rows of the table."""
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask_m, mask_n = rows < n, cols < dim
    idx = tl.load(idx_ptr + rows, mask=mask_m, other=0)
    mask = mask_m[:, None] & mask_n[None, :]
    e = tl.load(emb_ptr + idx[:, None] * dim + cols[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + rows[:, None] * dim + cols[None, :], e, mask=mask)


# -- vLLM: MoE alignment, four launches of scalar loops ----------------------------------------------------
@triton.jit
def moe_count_kernel(topk_ids_ptr, counts_ptr, n_experts, numel, per_program):
    """Stage 1: program p counts, in its row p + 1 of counts, the experts of its share of the tokens."""
    pid = tl.program_id(0)
    start = pid * per_program
    row = (pid + 1) * n_experts
    for i in range(per_program):
        if start + i < numel:
            e = tl.load(topk_ids_ptr + start + i)
            c = tl.load(counts_ptr + row + e)
            tl.store(counts_ptr + row + e, c + 1)


@triton.jit
def moe_prefix_kernel(counts_ptr, n_experts):
    """Stage 2: program e turns column e of counts into a running sum over the programs' rows."""
    pid = tl.program_id(0)
    last = 0
    for i in range(1, n_experts + 1):
        c = tl.load(counts_ptr + i * n_experts + pid)
        last = last + c
        tl.store(counts_ptr + i * n_experts + pid, last)


@triton.jit
def moe_cumsum_kernel(total_ptr, counts_ptr, cumsum_ptr, n_experts, block_size):
    """Stage 3, one program: each expert's token count padded to a multiple of block_size, summed."""
    last = 0
    base = n_experts * n_experts
    for i in range(1, n_experts + 1):
        c = tl.load(counts_ptr + base + i - 1)
        last = last + tl.cdiv(c, block_size) * block_size
        tl.store(cumsum_ptr + i, last)
    tl.store(total_ptr, last)


@triton.jit
def moe_sort_kernel(topk_ids_ptr, sorted_ids_ptr, expert_ids_ptr, counts_ptr, cumsum_ptr, n_experts, block_size,
                    numel, per_program):
    """Stage 4: program e names the blocks of expert e, then places its share of the tokens at their ranks."""
    pid = tl.program_id(0)
    lo = tl.load(cumsum_ptr + pid)
    hi = tl.load(cumsum_ptr + pid + 1)
    for i in range(lo, hi, block_size):
        tl.store(expert_ids_ptr + i // block_size, pid)
    start = pid * per_program
    row = pid * n_experts
    for i in range(start, tl.minimum(start + per_program, numel)):
        e = tl.load(topk_ids_ptr + i)
        c = tl.load(counts_ptr + row + e)
        tl.store(sorted_ids_ptr + c + tl.load(cumsum_ptr + e), i)
        tl.store(counts_ptr + row + e, c + 1)


# -- vLLM: greedy rejection sampling of draft tokens ---------------------------------------------------
@triton.jit
def rejection_greedy_kernel(out_ptr, cu_draft_ptr, draft_ptr, target_argmax_ptr, bonus_ptr, is_greedy_ptr,
                            MAX_SPEC: tl.constexpr):
    """One program per request: accept draft tokens while they match the target's argmax; the first mismatch
    is replaced by the target's token, and a request that accepted all gets its bonus token."""
    req = tl.program_id(0)
    if tl.load(is_greedy_ptr + req):
        start = 0 if req == 0 else tl.load(cu_draft_ptr + req - 1)
        n_draft = tl.load(cu_draft_ptr + req) - start
        rejected = False
        for pos in range(n_draft):
            if not rejected:
                draft = tl.load(draft_ptr + start + pos)
                target = tl.load(target_argmax_ptr + start + pos)
                tl.store(out_ptr + req * (MAX_SPEC + 1) + pos, target)
                if draft != target:
                    rejected = True
        if not rejected:
            tl.store(out_ptr + req * (MAX_SPEC + 1) + n_draft, tl.load(bonus_ptr + req))


# -- vLLM: AWQ int4 GEMM --------------------------------------------------------------------------
@triton.jit
def awq_gemm_kernel(a_ptr, qw_ptr, qz_ptr, scales_ptr, c_ptr, M, N, K, group_size, BM: tl.constexpr,
                    BN: tl.constexpr, BK: tl.constexpr, SPLIT_K: tl.constexpr):
    """C = A @ dequant(W): eight 4-bit weights per int32, in AWQ's order (0, 4, 1, 5, 2, 6, 3, 7); each split
    of K adds its product into its own slice of c (summed afterwards)."""
    pid, pid_k = tl.program_id(0), tl.program_id(1)
    n_tiles = tl.cdiv(N, BN)
    pid_m, pid_n = pid // n_tiles, pid % n_tiles
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rn8 = pid_n * (BN // 8) + tl.arange(0, BN // 8)
    j = tl.arange(0, BN) % 8
    shifts = ((j % 2) * 4 + j // 2) * 4                            # 0 16 4 20 8 24 12 28: AWQ's packing order
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(pid_k * BK, K, BK * SPLIT_K):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        packed = tl.load(qw_ptr + rk[:, None] * (N // 8) + rn8[None, :], mask=rk[:, None] < K, other=0)
        w = tl.interleave(packed, packed)
        w = tl.interleave(w, w)
        w = tl.interleave(w, w)                                     # (BK, BN): each int32 eight times
        w = (w >> shifts[None, :]) & 0xF
        g = k0 // group_size
        z = tl.load(qz_ptr + g * (N // 8) + rn8)
        z = tl.interleave(z, z)
        z = tl.interleave(z, z)
        z = tl.interleave(z, z)
        z = (z >> shifts) & 0xF
        s = tl.load(scales_ptr + g * N + rn)
        b = ((w - z[None, :]) * s[None, :]).to(tl.float16)
        acc += tl.dot(a, b)
    c = c_ptr + pid_k * M * N + rm[:, None] * N + rn[None, :]
    tl.store(c, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


# -- vLLM: the KV cache's store ------------------------------------------------------------------------
@triton.jit
def kv_cache_store_kernel(key_ptr, value_ptr, k_cache_ptr, v_cache_ptr, slot_ptr, block_size,
                          TOKEN: tl.constexpr):
    """One program per token: its slot (negative for padding) names a block of the cache and a row in it."""
    tok = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_ptr + tok).to(tl.int64)
    if slot >= 0:
        block, row = slot // block_size, slot % block_size
        at = (block * block_size + row) * TOKEN + tl.arange(0, TOKEN)
        src = tok * TOKEN + tl.arange(0, TOKEN)
        tl.store(k_cache_ptr + at, tl.load(key_ptr + src))
        tl.store(v_cache_ptr + at, tl.load(value_ptr + src))


# -- Triton's tutorial: layer norm forward ------------------------------------------------------------
@triton.jit
def layer_norm_fwd_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, N, eps, BLOCK: tl.constexpr):
    """One program per row, three loops over its columns: the mean, the variance, then the normalised row."""
    row = tl.program_id(0)
    x_row, y_row = x_ptr + row * stride, y_ptr + row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < N, other=0.0).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.0)
        acc += x * x
    rstd = 1 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < N
        w = tl.load(w_ptr + cols, mask=mask)
        b = tl.load(b_ptr + cols, mask=mask)
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (x - mean) * rstd * w + b, mask=mask)


# -- Liger: SwiGLU forward -----------------------------------------------------------------------------
@triton.jit
def swiglu_kernel(a_ptr, b_ptr, c_ptr, stride, n_cols, BLOCK: tl.constexpr):
    """One program per row: silu(a) * b, silu computed in fp32."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    a = tl.load(a_ptr + row * stride + cols, mask=mask, other=0).to(tl.float32)
    b = tl.load(b_ptr + row * stride + cols, mask=mask, other=0)
    c = (a * tl.sigmoid(a)).to(b.dtype) * b
    tl.store(c_ptr + row * stride + cols, c, mask=mask)


# -- the cases: each launches its kernels at sizes such libraries see, into fresh outputs ------------------------
def _cdiv(a, b):
    return (a + b - 1) // b


def cases(small=False):
    """name -> (run, expect): ``run()`` launches the kernel(s) into fresh outputs and returns them; ``expect()``
    computes the same outputs with torch. ``small`` shrinks the sizes (the tests' cases)."""
    import torch
    gen = torch.Generator().manual_seed(0)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen).to(dtype)

    def randint(lo, hi, *shape):
        return torch.randint(lo, hi, shape, generator=gen)
    s = 4 if small else 1
    out = {}

    # decode attention: 8 requests of 40..600 tokens, 8 heads of 64, 4 splits, a shuffled paged cache
    R, H, D, SPLITS, BN = 8 // (2 if small else 1), 8, 64, 4, 32
    lens = randint(40 // s, 600 // s, R)
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), lens.cumsum(0)])
    slots = torch.randperm(int(indptr[-1]) + 64, generator=gen)[:int(indptr[-1])]
    kc, vc, q = randn(int(slots.max()) + 1, H, D), randn(int(slots.max()) + 1, H, D), randn(R, H, D)

    def attention():
        mid, lse, o = torch.empty(R, H, SPLITS, D), torch.empty(R, H, SPLITS), torch.empty(R, H, D)
        decode_attention_stage1[(R, H, SPLITS)](q, kc, vc, indptr, slots, mid, lse, D ** -0.5, H, SPLITS=SPLITS,
                                                D=D, BLOCK_N=BN)
        decode_attention_stage2[(R, H)](indptr, mid, lse, o, H, SPLITS=SPLITS, D=D)
        return o

    def attention_ref():
        o = torch.empty(R, H, D)
        for r in range(R):
            idx = slots[indptr[r]:indptr[r + 1]]
            w = torch.softmax(torch.einsum("hd,nhd->hn", q[r], kc[idx]) * D ** -0.5, -1)
            o[r] = torch.einsum("hn,nhd->hd", w, vc[idx])
        return o
    out["decode attention"] = (attention, attention_ref)

    # rotary embedding: 2 sequences of 128 tokens, 32 query heads and 8 key heads of 128
    B, T, QH, KH, HD = 2, 128 // s, 32, 8, 128
    qr, kr = randn(B * T, QH, HD), randn(B * T, KH, HD)
    ang = torch.arange(T)[:, None] * 10000 ** (-torch.arange(HD // 2) / (HD // 2))
    cos, sin = torch.cat([ang.cos()] * 2, 1), torch.cat([ang.sin()] * 2, 1)

    def rope():
        qq, kk = qr.clone(), kr.clone()
        rope_kernel[(B * T,)](qq, kk, cos, sin, T, n_qh=QH, n_kh=KH, hd=HD, PAD_QH=QH, PAD_KH=KH, PAD_HD=HD)
        return qq, kk

    def rope_ref():
        c, sn = cos[:, :HD // 2].repeat(B, 1)[:, None], sin[:, :HD // 2].repeat(B, 1)[:, None]
        rot = lambda t: torch.cat([t[..., :HD // 2] * c - t[..., HD // 2:] * sn,   # noqa: E731
                                   t[..., HD // 2:] * c + t[..., :HD // 2] * sn], -1)
        return rot(qr), rot(kr)
    out["rotary embedding"] = (rope, rope_ref)

    # cross-entropy: 64 rows over a 32000-token vocabulary, some targets ignored
    CR, V = 64 // s, 32000 // s
    logits, target = randn(CR, V), randint(0, V, CR)
    target[::7] = -100
    n_valid = int((target != -100).sum())

    def xent():
        x, loss = logits.clone(), torch.empty(CR)
        cross_entropy_kernel[(CR,)](x, target, loss, V, n_valid, -100, BLOCK=4096)
        return x, loss

    def xent_ref():
        x = logits.clone().requires_grad_()
        loss = torch.nn.functional.cross_entropy(x, target, ignore_index=-100, reduction="none") / n_valid
        loss.sum().backward()
        return x.grad, loss.detach()
    out["cross-entropy"] = (xent, xent_ref)

    # embedding: 4096 tokens from a 32000 x 512 table
    NT, VOC, DIM = 4096 // s, 32000 // s, 512
    table, ids = randn(VOC, DIM), randint(0, VOC, NT)

    def embed():
        o = torch.empty(NT, DIM)
        embedding_kernel[(_cdiv(NT, 64), _cdiv(DIM, 128))](table, ids, o, NT, DIM, BLOCK_M=64, BLOCK_N=128)
        return o
    out["embedding"] = (embed, lambda: table[ids])

    # MoE alignment: 1024 tokens x top-2 over 64 experts (small: 256 x 2 over 16), blocks of 16
    E, NUMEL, BS = 64 // s, 2048 // s, 16
    topk = randint(0, E, NUMEL)
    per = _cdiv(NUMEL, E)
    max_padded = NUMEL + E * (BS - 1)

    def moe():                   # int32 counts and ids, as vLLM's: the scalar loops carry int32 sums
        counts, cum = torch.zeros((E + 1) * E, dtype=torch.int32), torch.zeros(E + 1, dtype=torch.int32)
        total = torch.zeros(1, dtype=torch.int32)
        sorted_ids = torch.full((max_padded,), NUMEL, dtype=torch.int32)
        expert_ids = torch.zeros(_cdiv(max_padded, BS), dtype=torch.int32)
        moe_count_kernel[(E,)](topk, counts, E, NUMEL, per)
        moe_prefix_kernel[(E,)](counts, E)
        moe_cumsum_kernel[(1,)](total, counts, cum, E, BS)
        moe_sort_kernel[(E,)](topk, sorted_ids, expert_ids, counts, cum, E, BS, NUMEL, per)
        return total, cum, sorted_ids, expert_ids

    def moe_ref():
        padded = (torch.bincount(topk, minlength=E) + BS - 1) // BS * BS
        cum = torch.cat([torch.zeros(1, dtype=torch.int32), padded.cumsum(0).to(torch.int32)])
        sorted_ids = torch.full((max_padded,), NUMEL, dtype=torch.int32)
        expert_ids = torch.zeros(_cdiv(max_padded, BS), dtype=torch.int32)
        fill = cum[:-1].clone()
        for i, e in enumerate(topk.tolist()):
            sorted_ids[fill[e]] = i
            fill[e] += 1
        for e in range(E):
            expert_ids[int(cum[e]) // BS:int(cum[e + 1]) // BS] = e
        return cum[-1:], cum, sorted_ids, expert_ids
    out["MoE alignment"] = (moe, moe_ref)

    # rejection sampler: 256 requests of up to 5 draft tokens, a few not greedy
    NR, SPEC = 256 // s, 5
    n_draft = randint(0, SPEC + 1, NR)
    cu = n_draft.cumsum(0)
    draft = randint(0, 4, int(cu[-1]))
    target_am = torch.where(torch.rand(int(cu[-1]), generator=gen) < 0.7, draft, randint(0, 4, int(cu[-1])))
    bonus, greedy = randint(0, 4, NR), torch.rand(NR, generator=gen) < 0.9

    def reject():
        o = torch.full((NR, SPEC + 1), -1, dtype=torch.int64)
        rejection_greedy_kernel[(NR,)](o, cu, draft, target_am, bonus, greedy, MAX_SPEC=SPEC)
        return o

    def reject_ref():
        o = torch.full((NR, SPEC + 1), -1, dtype=torch.int64)
        for r in range(NR):
            if not greedy[r]:
                continue
            lo = int(cu[r - 1]) if r else 0
            for pos in range(int(n_draft[r])):
                o[r, pos] = target_am[lo + pos]
                if draft[lo + pos] != target_am[lo + pos]:
                    break
            else:
                o[r, int(n_draft[r])] = bonus[r]
        return o
    out["rejection sampler"] = (reject, reject_ref)

    # AWQ GEMM: 16 tokens x 1024 -> 1024, groups of 128, split-K 2
    AM, AN, AK, GS = 16, 1024 // s, 1024 // s, 128
    a = randn(AM, AK, dtype=torch.float16)
    qw = randint(-2 ** 31, 2 ** 31, AK, AN // 8).to(torch.int32)
    qz = randint(-2 ** 31, 2 ** 31, AK // GS, AN // 8).to(torch.int32)
    sc = (torch.rand(AK // GS, AN, generator=gen) * 0.01).half()

    def awq():
        c = torch.empty(2, AM, AN)
        awq_gemm_kernel[(_cdiv(AM, 16) * _cdiv(AN, 64), 2)](a, qw, qz, sc, c, AM, AN, AK, GS, BM=16, BN=64, BK=32,
                                                              SPLIT_K=2)
        return c.sum(0)

    def awq_ref():
        shifts = torch.tensor([0, 16, 4, 20, 8, 24, 12, 28])
        unpack = lambda p: ((p.long()[..., None] >> shifts) & 0xF).reshape(p.shape[0], -1)  # noqa: E731
        w = (unpack(qw) - unpack(qz).repeat_interleave(GS, 0)) * sc.float().repeat_interleave(GS, 0)
        return a.float() @ w.half().float()
    out["AWQ GEMM"] = (awq, awq_ref)

    # KV-cache store: 512 tokens, 8 heads x 128, blocks of 16, some padding slots
    KT, TOK, KBS = 512 // s, 8 * 128, 16
    key, value = randn(KT, TOK), randn(KT, TOK)
    slot = torch.randperm(KT * 2, generator=gen)[:KT]
    slot[::9] = -1

    def kv_store():
        kc_, vc_ = torch.zeros(KT * 2, TOK), torch.zeros(KT * 2, TOK)
        kv_cache_store_kernel[(KT,)](key, value, kc_, vc_, slot, KBS, TOKEN=TOK)
        return kc_, vc_

    def kv_store_ref():
        kc_, vc_ = torch.zeros(KT * 2, TOK), torch.zeros(KT * 2, TOK)
        ok = slot >= 0
        kc_[slot[ok]], vc_[slot[ok]] = key[ok], value[ok]
        return kc_, vc_
    out["KV-cache store"] = (kv_store, kv_store_ref)

    # layer norm forward: 512 rows of 4000, BLOCK 1024
    LM, LN = 512 // s, 4000
    lx, lw, lb = randn(LM, LN), randn(LN), randn(LN)

    def layer_norm():
        y, mean, rstd = torch.empty(LM, LN), torch.empty(LM), torch.empty(LM)
        layer_norm_fwd_kernel[(LM,)](lx, y, lw, lb, mean, rstd, LN, LN, 1e-5, BLOCK=1024)
        return y, mean, rstd

    def layer_norm_ref():
        mean, var = lx.mean(1), lx.var(1, unbiased=False)
        return torch.nn.functional.layer_norm(lx, (LN,), lw, lb, 1e-5), mean, torch.rsqrt(var + 1e-5)
    out["layer norm forward"] = (layer_norm, layer_norm_ref)

    # SwiGLU: 512 rows of 5632 in fp16
    SM, SN = 512 // s, 5632
    sa, sb = randn(SM, SN, dtype=torch.float16), randn(SM, SN, dtype=torch.float16)

    def swiglu():
        c = torch.empty(SM, SN, dtype=torch.float16)
        swiglu_kernel[(SM,)](sa, sb, c, SN, SN, BLOCK=8192)
        return c
    out["SwiGLU"] = (swiglu, lambda: torch.nn.functional.silu(sa.float()).half() * sb)
    out.update(_kernels_for_tests_cases(randn, randint, s))
    return out


def _kernels_for_tests_cases(randn, randint, s):
    """The cases of the library-style kernels kept in tests/kernels_for_tests.py (see SOURCES)."""
    import torch
    from backends import kernels
    K = kernels(BACKEND)
    out = {}
    x = randn(1024 // s, 1000)

    def softmax():
        y = torch.empty_like(x)
        K.softmax_kernel[(x.shape[0],)](y, x, 1000, 1000, 1000, BLOCK=1024)
        return y
    out["fused softmax"] = (softmax, lambda: torch.softmax(x, 1))

    def persistent():
        y = torch.empty_like(x)
        K.persistent_softmax_kernel[(132 // s,)](x, y, x.shape[0], 1000, BLOCK=1024)
        return y
    out["persistent softmax"] = (persistent, lambda: torch.softmax(x, 1))
    a, b = randn(256 // s, 256), randn(256, 256 // s)

    def matmul():
        c = torch.empty(a.shape[0], b.shape[1])
        K.matmul_kernel[(_cdiv(a.shape[0], 32), _cdiv(b.shape[1], 32))](
            a, b, c, a.shape[0], b.shape[1], 256, 256, 1, b.shape[1], 1, b.shape[1], 1, BM=32, BN=32, BK=32)
        return c
    out["matmul"] = (matmul, lambda: a @ b)
    rows = randn(256 // s, 1000)

    def locked():
        partial = torch.zeros(8, 1000)
        K.locked_partial_sum_kernel[(rows.shape[0],)](rows, partial, torch.zeros(8, dtype=torch.int32), 1000,
                                                      GROUPS=8, BLOCK=1024)
        return partial
    out["layer norm dW (locks)"] = (locked, lambda: torch.stack([rows[g::8].sum(0) for g in range(8)]))
    xb, wb = randn(512 // s, 2048, dtype=torch.bfloat16), randn(2048, dtype=torch.bfloat16)

    def liger():
        y = torch.empty_like(xb)
        K.casting_rmsnorm_kernel[(xb.shape[0],)](y, xb, wb, 2048, 1e-6, 0.0, casting_mode=0, BLOCK=2048)
        return y

    def liger_ref():
        xf = xb.float()
        return (xf * torch.rsqrt((xf * xf).mean(1, keepdim=True) + 1e-6)).bfloat16() * wb
    out["Liger RMSNorm"] = (liger, liger_ref)
    e, g = randn(1 << (18 - s // 2)), randn(1 << (18 - s // 2))

    def geglu():
        h = torch.empty_like(e)
        K.geglu_kernel[(_cdiv(e.numel(), 1024),)](e, g, h, e.numel(), BLOCK=1024, LONG_INDEXING=False)
        return h
    out["GEGLU"] = (geglu, lambda: torch.nn.functional.gelu(e) * g)
    packed, lut = randint(0, 256, (1 << 16) // s).to(torch.uint8), randn(16)
    scale = randn(packed.numel() // 64).abs() + 0.5

    def dequant():
        o = torch.empty(2 * packed.numel())
        K.int4_unpack_kernel[(_cdiv(packed.numel(), 1024),)](packed, lut, scale, o, packed.numel(), GROUP=128,
                                                              BLOCK=1024)
        return o

    def dequant_ref():
        codes = torch.stack([packed.long() >> 4, packed.long() & 0xF], 1).reshape(-1)
        return lut[codes] * scale.repeat_interleave(128)
    out["4-bit dequantisation"] = (dequant, dequant_ref)
    xh = randn((1 << 17) // s, dtype=torch.float16)

    def total():
        o = torch.empty(_cdiv(xh.numel(), 1024), dtype=torch.float16)
        K.dtype_generic_sum_kernel[(o.numel(),)](xh, o, torch.zeros(3, dtype=torch.int32), xh.numel(), BLOCK=1024)
        return o
    out["sum (dtype-generic)"] = (total, lambda: xh.float().reshape(-1, 1024).sum(1).half())
    return out
