"""The known mistakes: what each cause's message says and how to fix it (``CAUSES``), and the wrong
formulas whose outputs identify them (``forward_alternatives``, ``backward_alternatives``).

A cause is recognised when a wrong output matches, within the tolerance, a float64 reference computed
the wrong way: eps left out, a mean over the block instead of N, r² for r³... rmsnorm_testkit/diagnose.py
decides which cause explains an output; this file only says what each cause is. To add one: its
``Cause`` here, and the wrong formula under its key in one of the ``*_alternatives``.
"""
from __future__ import annotations

import dataclasses

import torch

DEFAULT_EPS = 1e-5          # what the API's eps defaults to: a kernel that ignores eps uses it


@dataclasses.dataclass(frozen=True)
class Cause:
    """A known mistake: what the wrong output matches (``says``) and what to do (``fix``), in a student's
    terms. Both may name {N} (the row length), {B} (the block width), {eps} and {stride} (x's row stride)."""
    key: str
    says: str
    fix: str


DX = "dx = r·dy·g − x·r³·sum(dy·g·x)/N"
UNREAD_FIX = ("each row's result needs every element of its row: pass each tensor's own row stride (x.stride(0), "
              "not x.stride(1)), and make each tl.load's offsets reach the end of the row (a loop over the row "
              "steps by BLOCK_N)")
HELD_SAYS = ("many of its elements are off, each by about what one rounding to 16 bits does (at most {share} of "
             "its largest value): on the way from the fp32 inputs, a value was held in a 16-bit dtype such as fp16")
TF32 = "a tl.dot of fp32 values rounds them to tf32, the same 11 bits, unless given input_precision=\"ieee\""
CAUSES = {c.key: c for c in (
    # -- elements never written ------------------------------------------------------------------------------
    Cause("r_not_stored", "no kernel stored r at all",
          "store each row's r = 1/sqrt(mean(x²) + eps) into r_ptr (the backward uses it)"),
    Cause("rows_not_stored_fwd", "whole rows were never written: the forward's programs miss some rows (too "
          "few programs, or programs that store the same rows)",
          "launch cdiv(M, BLOCK_M) programs, each storing its own BLOCK_M rows (rows = tl.program_id(0)·BLOCK_M + "
          "tl.arange(0, BLOCK_M))"),
    Cause("rows_not_stored_bwd", "whole rows were never written: the backward's grid misses some rows",
          "make the programs cover every row: each program's rows, and the number of programs times the rows "
          "per program, must reach M"),
    Cause("columns_not_stored", "the columns from {first} on were never written in any row",
          "a row longer than one block needs a loop over all its columns: with SINGLE_PASS=False, loop over each "
          "row in chunks of BLOCK_N columns up to the row's end (range(0, n_cols, BLOCK_N), the last, partial chunk "
          "masked: the chunked path), and have the wrapper choose it for N > MAX_FUSED_N"),
    Cause("dg_not_stored", "some of dg's N columns were never written by the kernel that sums the partial rows",
          "give that kernel a grid that covers all N columns of dg (each program BLOCK_N of them: cdiv(N, "
          "BLOCK_N) programs, as _dg_sum_config returns), or sum the partial buffer on the host"),
    Cause("elements_not_stored_fwd", "some elements were never written by the forward's kernels",
          "check the offsets and masks of your tl.store: every element of every row must be stored once"),
    Cause("elements_not_stored_bwd", "some elements were never written by the backward's kernels",
          "check the offsets and masks of your tl.store: every element of every row must be stored once"),
    # -- the forward's formula -----------------------------------------------------------------------------
    Cause("eps_forgotten", "it matches the formula with eps left out: r = 1/sqrt(mean(x²))",
          "add eps inside the square root, r = 1/sqrt(mean(x²) + eps), with the eps the caller passed"),
    Cause("eps_outside_sqrt", "it matches r = 1/(sqrt(mean(x²)) + eps): eps is outside the square root",
          "put eps inside: r = 1/sqrt(mean(x²) + eps)"),
    Cause("eps_over_n", "it matches r = 1/sqrt((sum(x²) + eps)/N): eps is added to the sum of squares before the "
          "division by N, so the formula has eps/N where eps belongs", "add eps after the mean: r = 1/sqrt(sum(x²)/N + "
          "eps)"),
    Cause("eps_ignored", "it matches the formula with eps = 1e-05 instead of the eps = {eps:g} the caller passed",
          "pass the caller's eps through rmsnorm_forward and TritonRMSNorm.forward to the kernel; do not fix it"),
    Cause("mean_over_block", "it matches a mean of x² over the block's {B} lanes instead of the row's N = {N} "
          "values", "divide the sum of squares by n_cols, not by BLOCK_N: masked lanes add 0 to the sum, but a mean "
          "over the block still counts them"),
    Cause("sum_not_mean", "it matches r = 1/sqrt(sum(x²) + eps): the sum of squares is not divided by N",
          "divide the sum of squares by n_cols: r = 1/sqrt(sum(x²)/N + eps)"),
    Cause("r_is_rms", "r holds the RMS, sqrt(mean(x²) + eps), where its reciprocal is expected",
          "store r = 1/sqrt(mean(x²) + eps) (tl.rsqrt): the backward multiplies by it"),
    Cause("y_without_g", "it matches x·r without the scale g", "multiply by g: y = x·r·g"),
    Cause("y_times_rms", "it matches x·sqrt(mean(x²) + eps)·g: multiplied by the RMS instead of divided by it",
          "divide by the RMS: y = x·r·g with r = 1/sqrt(mean(x²) + eps)"),
    Cause("x_rows_by_n", "it matches x read with its rows N = {N} elements apart, but this x's rows are {stride} "
          "apart", "step from row to row by the row stride the wrapper passes (x.stride(0)), not by n_cols"),
    Cause("dy_rows_by_n", "it matches dy read with its rows N = {N} elements apart, but this dy's rows are "
          "{dy_stride} apart", "step from row to row of dy by dy's own row stride (dy.stride(0)), not by n_cols "
          "or by x's stride"),
    *(Cause(key, f"it matches the right r rounded to {name}: r was computed in fp32 and rounded to {name} on its "
                 f"way to memory", "store r as computed, in fp32 (no .to(tl.float16) or .to(x.dtype) on it): the "
                 "backward multiplies by r³, and an r with 2-3 significant digits costs dx its accuracy")
      for key, name in (("r_rounded", "fp16"), ("r_rounded_bf16", "bf16"))),
    Cause("sum_stops_early", "it matches r with the sum of squares over all but the row's last {variant} columns: "
          "the loop over the row's chunks stops one chunk early", "let the loop reach the end of the row, "
          "range(0, n_cols, BLOCK_N), and mask the last chunk's lanes past n_cols"),
    Cause("x_cols_adjacent", "it matches x read with its columns next to each other, but this x's columns are "
          "{col_stride} elements apart (x.stride(-1) = {col_stride}), and the kernel steps by 1 from column to column",
          "give the kernel rows whose columns are adjacent: x.view keeps x's strides, x.reshape(-1, N).contiguous() "
          "makes such rows (or pass the column stride to the kernel as well)"),
    Cause("dy_cols_adjacent", "it matches dy read with its columns next to each other, but this dy's columns are "
          "{dy_col_stride} elements apart (dy.stride(-1) = {dy_col_stride}), and the kernel steps by 1 from column to "
          "column", "give the kernel rows of dy whose columns are adjacent: dy.view keeps dy's strides, "
          "dy.reshape(-1, N).contiguous() makes such rows (or pass the column stride to the kernel as well)"),
    Cause("sum_in_16_bits", "r is off by a little: a sum of squares kept in {dtype} rounds at every step",
          "convert x to fp32 before squaring (tl.load(...).to(tl.float32)); tl.sum adds 16-bit values in 16 bits"),
    # fp32 inputs, outputs off in many elements by about one rounding to 11 bits (fp16, or tf32 in a tl.dot)
    Cause("held_in_16_bits_fwd", HELD_SAYS, "keep fp32 inputs in fp32 from load to store: no .to(tl.float16) of x "
          "or g, no 16-bit buffer or accumulator (" + TF32 + ")"),
    Cause("held_in_16_bits_bwd", HELD_SAYS, "keep fp32 inputs in fp32 from load to store: no .to(tl.float16) of x, "
          "dy or g, no 16-bit buffer for dx, dg's partial sums or an accumulator (" + TF32 + ")"),
    # -- the backward's formula ----------------------------------------------------------------------------
    Cause("r_recomputed_without_eps", "it matches the gradients with r recomputed from x without eps, "
          "r = 1/sqrt(mean(x²)), in place of the r the kernel was given",
          "load r from r_ptr, one value per row: the forward saved it, with the caller's eps in it (the backward "
          "has no eps to recompute it with)"),
    Cause("r_recomputed", "it matches the gradients with r recomputed from x with eps = 1e-05, in place of the r "
          "the kernel was given (made with eps = {eps:g})",
          "load r from r_ptr, one value per row: the forward saved it, with the caller's eps in it (the backward "
          "has no eps to recompute it with)"),
    Cause("eps_forgotten_in_r3", "it matches " + DX + " with eps left out of the r³ term only",
          "use the r the forward saved (it has eps in it) in both terms, rather than recomputing it"),
    Cause("dot_carried_over_rows", "it matches " + DX + " with each row's sum(dy·g·x) carried into the rows after "
          "it: an accumulator set to zero once, before the loop over rows, keeps adding row after row",
          "set the accumulator to zero at the start of each row (or tile of rows), inside the loop over rows"),
    Cause("g_without_chunk_offset", "it matches dx with g read at the row's first {variant} columns in every chunk: "
          "g's offsets in a loop over the row's chunks lack the chunk's start",
          "load g at the chunk's own columns, g_ptr + start + cols, as x and dy are, in every loop over the row"),
    Cause("r_squared", "it matches r·dy·g − x·r²·sum(dy·g·x)/N: r² where the derivation gives r³",
          "the second term is x·r³·sum(dy·g·x)/N (dr/dx_j = −r³·x_j/N)"),
    Cause("dot_not_divided", "it matches r·dy·g − x·r³·sum(dy·g·x): the sum is not divided by N",
          "divide the dot product by N: " + DX),
    Cause("dot_over_block", "it matches r·dy·g − x·r³·sum(dy·g·x)/{B}: the dot product divided by the block's "
          "{B} lanes instead of N = {N}", "divide by n_cols: " + DX),
    Cause("g_missing_dx", "it matches the formula with g left out: r·dy − x·r³·sum(dy·x)/N",
          "the gradient flows through y = x·r·g, so g multiplies dy everywhere: " + DX),
    Cause("g_missing_first_term", "it matches r·dy − x·r³·sum(dy·g·x)/N: g is missing from the first term",
          "the gradient flows through y = x·r·g, so g multiplies dy there too: " + DX),
    Cause("dot_without_g", "it matches r·dy·g − x·r³·sum(dy·x)/N: g is missing from the dot product",
          "the dot product is sum(dy·g·x): " + DX),
    Cause("second_term_missing", "it matches r·dy·g alone: the term that r's dependence on x adds is missing",
          "since r depends on every x_j of the row, dx has a second term, −x·r³·sum(dy·g·x)/N: " + DX),
    Cause("second_term_sign", "it matches r·dy·g + x·r³·sum(dy·g·x)/N: the second term has the wrong sign",
          "subtract it: " + DX),
    Cause("dot_not_summed", "it matches r·dy·g − x·r³·(dy·g·x)/N with each element's own dy·g·x: the sum over the "
          "row is missing (a tl.sum left out, or taken down the tile's rows, axis=0, instead of along each row)",
          "sum dy·g·x along each row, tl.sum(dy * g * x, axis=1) of a (BLOCK_M, BLOCK_N) tile (one value per row, "
          "then [:, None] to scale its row): " + DX),
    Cause("dg_without_r", "it matches sum over rows of dy·x: r is missing", "multiply by r: dg = the sum over rows "
          "of dy·x·r"),
    Cause("dg_with_g", "it matches sum over rows of dy·x·r·g: g should not be in dg",
          "leave g out: dg = the sum over rows of dy·x·r (dy/dg_j = x_j·r)"),
    Cause("dg_some_rows", "it is the sum over {rows} only: the other rows' contributions are missing",
          "every row must add its dy·x·r to dg exactly once: check the rows each program sums, and that the "
          "wrapper adds up every partial row"),
    Cause("masked_nan", "it has NaN where the reference has none",
          "lanes masked off in a tl.load without other={loads} enter your sums: Triton leaves those lanes undefined, "
          "and the simulator fills them with NaN to show where they go; give those loads other=0.0"),
    Cause("lanes_undefined", "it has NaN where the reference has none, from lanes masked off in a tl.load without "
          "other={loads}; with those lanes read as 0.0, it is right", "Triton documents those lanes as undefined "
          "(NVIDIA's backend reads 0.0 today; the simulator reads NaN to show where they go), so give those loads "
          "other=0.0, or keep the lanes out of what you store (tl.where(mask, value, 0.0)). Only this rule is "
          "charged, once"),
    Cause("old_memory_nan", "it has NaN where the reference has none",
          "memory from torch.empty holds old data (NaN here, as it can on a GPU): a kernel that adds into a "
          "buffer, such as its row of the partial dg buffer in the chunked path, needs it zeroed first "
          "(torch.zeros); otherwise, a tl.load without other= leaves its masked lanes NaN"),
    Cause("padding_nan", "it has NaN, and no masked load or buffer of old data explains it: your kernel computed a "
          "NaN, most likely in lanes or rows past the end (masked, loaded as 0), where 1/sqrt(0) = inf and "
          "0·inf = NaN, and the NaN then entered a sum", "keep eps inside the square root (r = 1/sqrt(mean(x²) + "
          "eps) is finite for a row of zeros), or keep masked lanes out of your sums (tl.where(mask, value, 0.0))"),
    Cause("race", "the launch that made it had a data race ({race})",
          "give each program its own output slot: a race-free kernel gives the same values in every run"),
    Cause("r_from_forward", "it is right for the r your forward saved, and that r is wrong: {r_cause}",
          "fix r in the forward; the backward is right"),
    # -- addresses: what the kernels read, before any formula (diagnose.traffic_cause) ----------------
    Cause("wrong_tensor_fwd", "{traffic}", "check each tl.load's pointer, and that the launch passes the tensors "
          "in the order of the kernel's parameters"),
    Cause("wrong_tensor_bwd", "{traffic}", "check each tl.load's pointer, and that the launch passes the tensors "
          "in the order of the kernel's parameters"),
    Cause("saved_tensor_swapped", "{traffic}", "save what the backward needs, ctx.save_for_backward(x, g, r), and "
          "unpack ctx.saved_tensors in that order (x, g, r = ctx.saved_tensors) before passing them on"),
    Cause("unread_fwd", "{traffic}", UNREAD_FIX),
    Cause("unread_bwd", "{traffic}", UNREAD_FIX),
    Cause("r_read_from_g", "it matches the gradients with each row's r read from g (r of row i = g[i]): a tl.load "
          "reads g's pointer where r's is meant", "load r from r_ptr, one value per row (tl.load(r_ptr + rows))"),
)}

# For the backward's messages: the formula, when the diagnosis points at it.
FORMULA = {
    "y": "y = x·r·g with r = 1/sqrt(mean(x²) + eps), the mean over the row's N values",
    "r": "r = 1/sqrt(mean(x²) + eps), one fp32 value per row",
    "dx": (DX + " (x̂ = x·r: dx = r·(dy·g − x̂·mean(dy·g·x̂))); the handout's float64 check in part (b) tests a "
           "formula before it goes into the kernel"),
    "dg": "dg = the sum over all rows of dy·x·r",
}


def rows64(t, n):
    return t.detach().cpu().double().reshape(-1, n)


def next_pow2(n):
    return 1 << max(0, int(n) - 1).bit_length()


def chunk_widths(n) -> list:
    """The chunk widths a loop over a row of n might step by: powers of 2 from 16 that leave two chunks or more."""
    return [1 << k for k in range(4, 16) if 2 << k <= n]


def block_widths(n, block_n=None):
    """Block widths a kernel might have averaged over instead of N."""
    return sorted({b for b in (block_n, next_pow2(n)) if b and b != n})


class Made:
    """(y, r) of one wrong forward, y made when first read: a check of r alone (the r an autograd Function saved,
    say) reads many alternatives' r and none of their y, which is as large as x."""
    __slots__ = ("_y", "r")

    def __init__(self, make_y, r):
        self._y, self.r = once(make_y), r

    def __getitem__(self, i):
        if i in (1, -1):
            return self.r
        if i not in (0, -2):
            raise IndexError(i)
        return self._y()

    def __len__(self):
        return 2

    def __iter__(self):
        return iter((self[0], self[1]))


def forward_alternatives(x, g, eps=DEFAULT_EPS, block_n=None) -> dict:
    """{cause key: (y, r)}: the forward computed each known wrong way, in float64 (y like x, r flat)."""
    n = x.shape[-1]
    x64, g64 = rows64(x, n), g.detach().cpu().double()
    ms = x64.pow(2).mean(-1)
    r = torch.rsqrt(ms + eps)

    def out(r_alt, y_of=None):
        """(y, r) of one wrong forward: y made from r_alt, or by ``y_of``, when first read."""
        return Made(y_of or (lambda: (x64 * r_alt[:, None] * g64).reshape(x.shape)), r_alt)
    right_y = once(lambda: (x64 * r[:, None] * g64).reshape(x.shape))
    alts = {"eps_forgotten": out(torch.rsqrt(ms)), "eps_outside_sqrt": out(1 / (ms.sqrt() + eps)),
            "r_is_rms": out(1 / r, right_y), "y_without_g": out(r, lambda: (x64 * r[:, None]).reshape(x.shape)),
            "y_times_rms": out(r, lambda: (x64 / r[:, None] * g64).reshape(x.shape)),
            # y made from the fp32 r, which was then rounded when it was stored (x's dtype, say)
            "r_rounded": out(r.half().double(), right_y), "r_rounded_bf16": out(r.bfloat16().double(), right_y)}
    if n > 1:
        alts["sum_not_mean"] = out(torch.rsqrt(ms * n + eps))
        if _tells_apart(ms, eps / n, (0.0, eps, DEFAULT_EPS)):
            alts["eps_over_n"] = out(torch.rsqrt(ms + eps / n))
    if eps != DEFAULT_EPS:
        alts["eps_ignored"] = out(torch.rsqrt(ms + DEFAULT_EPS))
    for b in block_widths(n, block_n):
        alts["mean_over_block"] = out(torch.rsqrt(ms * n / b + eps))
    running = None                                     # each row's sums of squares up to each column
    for c in (1 << k for k in range(4, 16)):           # a chunk loop that stops one chunk of c columns early
        if c < n:
            running = x64.pow(2).cumsum(-1) if running is None else running
            kept = running[:, (n - 1) // c * c - 1] / n
            alts[f"sum_stops_early@{n - (n - 1) // c * c}"] = out(torch.rsqrt(kept + eps))
    x_n = rows_n_apart(x)
    if x_n is not None:
        alts["x_rows_by_n"] = forward_alternatives_plain(x_n, g, eps)
    x_c = cols_adjacent(x)
    if x_c is not None:
        alts["x_cols_adjacent"] = forward_alternatives_plain(x_c, g, eps)
    return alts


def _tells_apart(ms, eps_used, others) -> bool:
    """Whether r = 1/sqrt(ms + eps_used) differs from r with each of ``others`` in its place by far more than any
    tolerance in some row (a row of zeros, or a large eps): else the outputs cannot tell them apart, and the
    diagnosis keeps to the simpler cause (eps left out, say)."""
    return all(bool(((eps_used - e) / (ms + min(eps_used, e) + 1e-30)).abs().max() > 1e-2) for e in others)


def forward_alternatives_plain(x, g, eps):
    """(y, r) of the right formula on x, float64."""
    n = x.shape[-1]
    x64 = rows64(x, n)
    r = torch.rsqrt(x64.pow(2).mean(-1) + eps)
    return (x64 * r[:, None] * g.detach().cpu().double()).reshape(x.shape), r


def rows_n_apart(t):
    """``t`` as a kernel that steps by N instead of t's row stride reads it (None when they agree, or when
    that would read past t's memory): the same memory, rows N apart from t's first element."""
    if t.dim() != 2 or t.stride(-1) != 1 or t.stride(0) == t.shape[-1] or t.shape[0] < 2:
        return None
    m, n = t.shape
    if t.storage_offset() + m * n > t.untyped_storage().nbytes() // t.element_size():
        return None
    return t.as_strided((m, n), (n, 1), t.storage_offset())


def cols_adjacent(t):
    """``t`` as a kernel that steps by 1 from column to column reads it, when t's columns are further apart (a
    strided view passed as it is): the same memory, t's row stride kept, columns adjacent. None when t's columns
    are adjacent, or that would read past t's memory."""
    if t.dim() != 2 or t.stride(-1) == 1 or t.shape[-1] < 2:
        return None
    m, n = t.shape
    if t.storage_offset() + (m - 1) * t.stride(0) + n > t.untyped_storage().nbytes() // t.element_size():
        return None
    return t.as_strided((m, n), (t.stride(0), 1), t.storage_offset())


def rows_k_apart(t, k):
    """``t`` as a kernel reads it that steps ``k`` elements from row to row (a column stride of 1 passed as the
    row stride, say), as (M, N); None when t's columns are not adjacent or that would read past t's memory."""
    n = t.shape[-1] if t.dim() else 1
    m = t.numel() // max(1, n)
    if t.dim() == 0 or t.stride(-1) != 1 or m == 0:
        return None
    if t.storage_offset() + (m - 1) * k + n > t.untyped_storage().nbytes() // t.element_size():
        return None
    return t.as_strided((m, n), (k, 1), t.storage_offset())


def backward_alternatives(x, g, dy, r, eps=DEFAULT_EPS, block_n=None) -> dict:
    """{cause key: (dx, dg)}: the backward computed each known wrong way from x, g, dy and the r it was
    given, in float64 (dx like x, dg like g)."""
    n = x.shape[-1]
    x64, dy64, g64 = rows64(x, n), rows64(dy, n), g.detach().cpu().double()
    r64 = r.detach().cpu().double().reshape(-1, 1)
    r0 = torch.rsqrt(x64.pow(2).mean(-1, keepdim=True))          # eps left out
    dyg = dy64 * g64
    dot = (dyg * x64).sum(-1, keepdim=True)
    dg = (dy64 * x64 * r64).sum(0)

    def dx_of(first, second):
        return (first - second).reshape(x.shape)

    def grads(rr):
        return dx_of(dyg * rr, x64 * rr ** 3 * (dyg * x64).sum(-1, keepdim=True) / n), (dy64 * x64 * rr).sum(0)
    alts = {
        "r_recomputed_without_eps": grads(r0),
        "eps_forgotten_in_r3": (dx_of(dyg * r64, x64 * r0 ** 3 * dot / n), dg),
        "r_squared": (dx_of(dyg * r64, x64 * r64 ** 2 * dot / n), dg),
        "dot_not_divided": (dx_of(dyg * r64, x64 * r64 ** 3 * dot), dg),
        "g_missing_dx": (dx_of(dy64 * r64, x64 * r64 ** 3 * (dy64 * x64).sum(-1, keepdim=True) / n), dg),
        "dot_without_g": (dx_of(dyg * r64, x64 * r64 ** 3 * (dy64 * x64).sum(-1, keepdim=True) / n), dg),
        "g_missing_first_term": (dx_of(dy64 * r64, x64 * r64 ** 3 * dot / n), dg),
        "second_term_missing": ((dyg * r64).reshape(x.shape), dg),
        "second_term_sign": (dx_of(dyg * r64, -x64 * r64 ** 3 * dot / n), dg),
        "dot_not_summed": (dx_of(dyg * r64, x64 * r64 ** 3 * dyg * x64 / n), dg),
        "dg_without_r": (dx_of(dyg * r64, x64 * r64 ** 3 * dot / n), (dy64 * x64).sum(0)),
        "dg_with_g": (dx_of(dyg * r64, x64 * r64 ** 3 * dot / n), (dy64 * x64 * r64 * g64).sum(0)),
    }
    if x64.shape[0] <= n:
        alts["r_read_from_g"] = grads(g64[:x64.shape[0]].reshape(-1, 1))
    if x64.shape[0] > 1:                              # one program's rows, the dot product never set back to 0
        alts["dot_carried_over_rows"] = (dx_of(dyg * r64, x64 * r64 ** 3 * dot.cumsum(0) / n), dg)
    for b in chunk_widths(n):                         # g loaded at the first chunk's columns in a chunk loop
        gb = g64[torch.arange(n) % b]
        dot_b = (dy64 * gb * x64).sum(-1, keepdim=True)
        alts[f"g_without_chunk_offset@{b}"] = (dx_of(dy64 * gb * r64, x64 * r64 ** 3 * dot / n), dg)
        alts[f"g_without_chunk_offset@{b}/dot"] = (dx_of(dy64 * gb * r64, x64 * r64 ** 3 * dot_b / n), dg)
    if eps != DEFAULT_EPS:
        alts["r_recomputed"] = grads(torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + DEFAULT_EPS))
    for b in block_widths(n, block_n):
        alts["dot_over_block"] = (dx_of(dyg * r64, x64 * r64 ** 3 * dot / b), dg)
    for key, t, read in (("x_rows_by_n", "x", rows_n_apart), ("dy_rows_by_n", "dy", rows_n_apart),
                         ("x_cols_adjacent", "x", cols_adjacent), ("dy_cols_adjacent", "dy", cols_adjacent)):
        moved = read(x if t == "x" else dy)
        if moved is not None:
            alts[key] = backward_plain(moved if t == "x" else x, g, moved if t == "dy" else dy, r)
    return alts


def backward_plain(x, g, dy, r):
    """(dx, dg) of the right formula from x, g, dy and a given r, float64."""
    n = x.shape[-1]
    x64, dy64, g64 = rows64(x, n), rows64(dy, n), g.detach().cpu().double()
    r64 = r.detach().cpu().double().reshape(-1, 1)
    dyg = dy64 * g64
    dx = dyg * r64 - x64 * r64 ** 3 * (dyg * x64).sum(-1, keepdim=True) / n
    return dx.reshape(x.shape), (dy64 * x64 * r64).sum(0)


def dg_rows(x, dy, r) -> tuple:
    """The alternative that lets diagnose find a dg summed over only some rows: each row's contribution."""
    n = x.shape[-1]
    return ("_dg_rows", rows64(dy, n) * rows64(x, n) * r.detach().cpu().double().reshape(-1, 1))


def once(make):
    """``make``, called the first time the function it returns is, and its result kept for every later call."""
    made = []

    def get():
        if not made:
            made.append(make())
        return made[0]
    return get


class Later:
    """Alternatives made when first read: diagnose reads them only for an output that is wrong, and most are
    right, so a grader that checks many outputs makes them for the few that need them."""

    def __init__(self, make):
        self._made = once(lambda: list(make()))

    def __iter__(self):
        return iter(self._made())


def pick(alternatives: dict, index: int) -> list:
    """The (key, tensor) pairs of one output from forward_alternatives (0: y, 1: r) or backward_alternatives
    (0: dx, 1: dg)."""
    return [(k, v[index]) for k, v in alternatives.items()]
