"""Common student mistakes, each made in the reference solution by one edit.

    python3 tests/mistakes.py OUT_DIR       # writes OUT_DIR/<name>.py

tests/test_public_messages.py runs the public tests on each and checks that the first failure
names the cause in a student's terms; tests/test_mistakes_graded.py grades each and checks that it
costs points in the one part that owns its cause; tests/make_handout_images.py draws one of them.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "solution" / "rmsnorm.py"
sys.path.insert(0, str(ROOT / "starter"))
from generate import make_starter  # noqa: E402

LOAD_TILE = "return tl.load(ptr + rows[:, None] * row_stride + cols[None, :], mask=mask, other=0.0)"
FWD_LOAD = "x = load_tile(x_ptr, rows, x_row_stride, cols, mask).to(tl.float32)"
FWD_R = "r = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)        # masked lanes add 0"
DG_STORE = "tl.store(dg_partial_ptr + pid * n_cols + cols, tl.sum(dg, axis=0), mask=col_mask)"
FWD_PID = "    pid = tl.program_id(0)\n    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)"
FWD_R_CHUNKED = "r = tl.rsqrt(tl.sum(sq, axis=1) / n_cols + eps)"
Y_STORE = "tl.store(y_rows + cols[None, :], x * r[:, None] * g[None, :], mask=mask)"
Y_STORE_CHUNKED = "tl.store(y_rows + c[None, :], x * r[:, None] * g[None, :], mask=mask)"
R_STORE = "    tl.store(r_ptr + rows, r, mask=row_mask)\n"
BWD_R = "    r = tl.load(r_ptr + rows, mask=row_mask, other=0.0)\n    x, dy = x.to(tl.float32), dy.to(tl.float32)\n"
DX_STORE = "    tl.store(dx_ptr + rows[:, None] * dx_row_stride + cols[None, :], dx, mask=mask)"
SQ_LOOP = ("        for start in range(0, n_cols, BLOCK_N):\n            c = start + cols\n"
           "            mask = row_mask[:, None] & (c < n_cols)[None, :]\n"
           "            x = load_tile(x_ptr, rows, x_row_stride, c, mask).to(tl.float32)\n            sq += x * x")
DOT = "c = tl.sum(dyg * x, axis=1) * (r * r * r) / n_cols"
SINGLE = "    if SINGLE_PASS:\n        # The whole row fits in registers: read x once, write y once."
CHUNK_MASK_FWD = "            c = start + cols\n            mask = row_mask[:, None] & (c < n_cols)[None, :]\n"
CHUNK_MASK_BWD = "                c = start + cols\n                mask = row_mask[:, None] & (c < n_cols)[None, :]\n"
FIRST_CHUNK_MASK = "mask = row_mask[:, None] & (cols < n_cols)[None, :]\n"      # from the first chunk's columns
SQ_ZEROS = "        sq = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n"
ACC_ZEROS = "            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n"

EDITS = {
    # -- addresses: a kernel reads one tensor where another is expected ------------------------------------
    # the backward's dy tile is loaded from x_ptr (with dy's row stride): dy is never read, x twice
    "dy_loaded_from_x_ptr": [("load_tile(dy_ptr, rows, dy_row_stride, cols, mask)",
                              "load_tile(x_ptr, rows, dy_row_stride, cols, mask)")],
    # the forward's wrapper passes y where the kernel takes x, and x where it takes y
    "x_and_y_swapped_at_launch": [("            x2, g, y, r, m, n, x2.stride(0), y.stride(0), float(eps),",
                                   "            y, g, x2, r, m, n, x2.stride(0), y.stride(0), float(eps),")],
    # the wrapper passes dy where the backward kernel takes x, and x where it takes dy
    "x_and_dy_swapped_at_launch": [("        x2, g, dy2, r, dx, dg_partial, n, x2.stride(0), dy2.stride(0),",
                                    "        dy2, g, x2, r, dx, dg_partial, n, x2.stride(0), dy2.stride(0),")],
    # the wrapper passes dx where the backward kernel takes dy, and dy where it takes dx: it reads dx's empty memory
    # as dy and writes dx into dy
    # a helper the backward calls, without @triton.jit: Triton refuses to call a plain Python function from a kernel
    "helper_without_jit": [("@triton.jit\ndef bwd_tile(", "def bwd_tile(")],
    "dx_and_dy_swapped_at_launch": [("        x2, g, dy2, r, dx, dg_partial, n, x2.stride(0), dy2.stride(0),",
                                     "        x2, g, dx, r, dy2, dg_partial, n, x2.stride(0), dy2.stride(0),")],
    # the forward's launch passes x's column stride (1) as its row stride: each row reads a window of row 0's memory
    "column_stride_as_row_stride": [("            x2, g, y, r, m, n, x2.stride(0), y.stride(0), float(eps),",
                                     "            x2, g, y, r, m, n, x2.stride(1), y.stride(0), float(eps),")],
    # the forward's launch passes y's row stride for x's: the same for contiguous x, rows N apart for a strided view
    "x_stride_from_y": [("            x2, g, y, r, m, n, x2.stride(0), y.stride(0), float(eps),",
                         "            x2, g, y, r, m, n, y.stride(0), y.stride(0), float(eps),")],
    # the same in the backward, for dy
    "dy_column_stride_as_row_stride": [("        x2, g, dy2, r, dx, dg_partial, n, x2.stride(0), dy2.stride(0),",
                                        "        x2, g, dy2, r, dx, dg_partial, n, x2.stride(0), dy2.stride(1),")],
    # the backward reads each row's r through g_ptr
    "r_loaded_from_g_ptr": [("dg += bwd_tile(x, dy, g, rows, row_mask, mask, cols, r_ptr,",
                             "dg += bwd_tile(x, dy, g, rows, row_mask, mask, cols, g_ptr,", 2),
                            ("            r = tl.load(r_ptr + rows, mask=row_mask, other=0.0)\n",
                             "            r = tl.load(g_ptr + rows, mask=row_mask, other=0.0)\n")],
    # every load of a tile reads its lanes past N (and past M) too
    "no_mask": [(LOAD_TILE, LOAD_TILE.replace(", mask=mask, other=0.0", ""))],
    # masked-off lanes are left undefined (NaN in the simulator) and enter the sums
    "mask_without_other": [(LOAD_TILE, LOAD_TILE.replace(", other=0.0", ""))],
    # the forward steps from row to row by N, not by the row stride
    "row_stride_is_n": [(FWD_LOAD, FWD_LOAD.replace("x_row_stride", "n_cols"))],
    # every program of the backward stores its share of dg into row 0 of the partial buffer
    "dg_into_one_row": [(DG_STORE, DG_STORE.replace(" + pid * n_cols", ""))],
    # the program's dg summed across its columns instead of down its rows: a block of BLOCK_M values stored through
    # BLOCK_N pointers, which Triton refuses; where a tile has one row (6 x 513) it compiles and stores the wrong sum
    "dg_summed_across_columns": [(DG_STORE, DG_STORE.replace("tl.sum(dg, axis=0)", "tl.sum(dg, axis=1)"))],
    # dg's sum launched as one program ("dg is one vector"): only its first BLOCK_N columns are stored
    "dg_sum_one_program": [("    dg_sum_kernel[grid](dg_partial, dg, programs, n, BLOCK_P=block_p, BLOCK_N=sum_n, "
                            "num_warps=4)", "    dg_sum_kernel[(1,)](dg_partial, dg, programs, n, BLOCK_P=block_p, "
                            "BLOCK_N=sum_n, num_warps=4)")],
    # r recomputed in the backward from the saved x and g ("it saves memory"): right gradients, one more read of x
    # on a GPU, which item 10 times; nothing the CPU's parts charge
    "r_recomputed_by_the_function": [
        ("        y, r = rmsnorm_forward(x, g, eps)\n        ctx.save_for_backward(x, g, r)\n",
         "        y, _ = rmsnorm_forward(x, g, eps)\n        ctx.save_for_backward(x, g)\n        ctx.eps = eps\n"),
        ("        x, g, r = ctx.saved_tensors\n",
         "        x, g = ctx.saved_tensors\n        _, r = rmsnorm_forward(x, g, ctx.eps)\n")],
    # the guard for an empty input inverted: the backward returns its unstored dx and a zero dg before any launch
    "backward_returns_before_launch": [("    if m == 0:\n        return dx.view(x.shape), torch.zeros_like(g)",
                                        "    if m != 0:\n        return dx.view(x.shape), torch.zeros_like(g)")],
    # the same, with a mean over the block as well: wrong even where those lanes read 0.0
    "mask_without_other_and_mean_over_block": [(LOAD_TILE, LOAD_TILE.replace(", other=0.0", "")),
                                               (FWD_R, FWD_R.replace("/ n_cols", "/ BLOCK_N"))],
    # loads without other=, whose masked-off lanes are then replaced before any sum: nothing undefined is stored
    "mask_without_other_kept_out": [(LOAD_TILE, "return tl.where(mask, tl.load(ptr + rows[:, None] * row_stride"
                                                " + cols[None, :], mask=mask), 0.0)")],
    # the autograd Function returns gradients for x and g only, none for eps
    "two_gradients_for_three_inputs": [("        return dx, dg, None\n", "        return dx, dg\n")],
    # the forward allocates y like x: for a transposed x, torch.empty_like keeps x's column-major layout
    "y_allocated_like_x": [("    y = torch.empty((m, n), dtype=x.dtype, device=x.device)\n",
                            "    y = torch.empty_like(x).view(m, n)\n")],
    # rmsnorm_backward returns dg in fp32 for 16-bit g (autograd casts g.grad back; a direct caller gets fp32)
    "dg_in_fp32": [("    dg = torch.empty_like(g)\n",
                    "    dg = torch.empty(g.shape, dtype=torch.float32, device=g.device)\n")],
    # the forward loads x again to compute y
    "x_loaded_twice": [(FWD_R, f"{FWD_R}\n        {FWD_LOAD}")],
    # a while loop whose variable never moves
    "endless_loop": [(FWD_PID, "    pid = tl.program_id(0)\n    i = 0\n    while i < n_cols:\n        i = i * 1"
                               "                                  # meant: i += BLOCK_N\n"
                               "    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)")],
    # the chunked forward's while loop never moves on to the next chunk (its body calls the load_tile helper)
    "endless_chunk_loop": [("        sq = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n"
                            "        for start in range(0, n_cols, BLOCK_N):",
                            "        sq = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n"
                            "        start = 0\n        while start < n_cols:                # meant: start += BLOCK_N"
                            " at the end")],
    # the squares of 16-bit x are summed in x's dtype (8 bits of mantissa for bf16), not in fp32
    "squares_summed_in_16_bits": [(FWD_R, FWD_R.replace("tl.sum(x * x, axis=1)",
                                                        "tl.sum((x * x).to(x_ptr.dtype.element_ty), axis=1)"))],
    # y rounded to fp16 before its store ("half is faster"): fp32 outputs keep only 16 bits' worth of digits
    "y_rounded_to_half": [(Y_STORE, Y_STORE.replace("x * r[:, None] * g[None, :]",
                                                    "(x * r[:, None] * g[None, :]).to(tl.float16)"))],
    # the backward's dy·g held in fp16: dx's first term and its dot product round to 11 bits (dg, from dy, is right)
    "dy_times_g_in_half": [("    dyg = dy * g[None, :]\n", "    dyg = (dy * g[None, :]).to(tl.float16)\n")],
    # the wrapper takes the partial dg buffer from torch.empty, and the chunked backward adds into it
    "partial_dg_not_zeroed": [("alloc = torch.empty if single else torch.zeros", "alloc = torch.empty")],
    # the forward ignores SINGLE_PASS=False: a long row gets one tile of BLOCK_N columns
    "no_chunked_path": [(SINGLE, SINGLE.replace("if SINGLE_PASS:", "if True:"))],
    # the wrapper computes y again with PyTorch after its kernel
    "y_on_the_host": [("    return y.view(x.shape), r\n",
                       "    y = (x2.float() * r[:, None] * g.float()).to(x.dtype)\n    return y.view(x.shape), r\n")],
    # the backward recomputes r with PyTorch instead of using the one the forward saved
    "r_recomputed_on_the_host": [("        ctx.save_for_backward(x, g, r)\n",
                                  "        ctx.save_for_backward(x, g, r)\n        ctx.eps = eps\n"),
                                 ("        x, g, r = ctx.saved_tensors\n",
                                  "        x, g, _ = ctx.saved_tensors\n"
                                  "        r = torch.rsqrt(x.float().pow(2).mean(-1) + ctx.eps).reshape(-1)\n")],
    # r handed to the backward as an attribute of ctx, not through save_for_backward
    "r_kept_as_ctx_attribute": [("        ctx.save_for_backward(x, g, r)\n",
                                 "        ctx.save_for_backward(x, g)\n        ctx.r = r\n"),
                                ("        x, g, r = ctx.saved_tensors\n",
                                 "        x, g = ctx.saved_tensors\n        r = ctx.r\n")],
    # the forward checks its input on the host, which makes it wait for the GPU (.item()): time on a GPU (item 10),
    # no point on the CPU, since the check's result reaches no output and no kernel
    "nan_check_on_the_host": [("    _check_inputs(x, g)\n    # [TODO] Part (c): allocate y",
                               "    _check_inputs(x, g)\n    if torch.isnan(x).any().item():\n"
                               "        raise ValueError(\"x holds NaN\")\n    # [TODO] Part (c): allocate y")],
    # r squared where the derivation gives r cubed
    "r_squared_in_dx": [("c = tl.sum(dyg * x, axis=1) * (r * r * r) / n_cols",
                         "c = tl.sum(dyg * x, axis=1) * (r * r) / n_cols")],
    # the wrapper's default is the lecture's reduction: one partial dg row per input row (an M x N buffer)
    # a student who stopped after part (c): part (b)'s backward, one program per row (an M x N buffer)
    "one_partial_row_per_input_row": "abc",
    # the wrapper stores dx in dy's memory, to save an allocation
    "dx_written_into_dy": [("    dx = torch.empty((m, n), dtype=x.dtype, device=x.device)\n",
                            "    dx = dy2                                      # reuse dy's memory for dx\n")],
    # dx stored into x's own memory (the backward reads each row before it writes it: dx comes out right)
    "dx_written_into_x": [("    dx = torch.empty((m, n), dtype=x.dtype, device=x.device)\n",
                           "    dx = x2                                       # reuse x's memory for dx\n")],
    # every program adds its dg into row 0 of the partial buffer with a float atomic (no race, no fixed order)
    "dg_by_atomic_add": [(DG_STORE, DG_STORE.replace("tl.store(dg_partial_ptr + pid * n_cols + cols,",
                                                     "tl.atomic_add(dg_partial_ptr + cols,")),
                         ("alloc = torch.empty if single else torch.zeros", "alloc = torch.zeros")],
    # every program adds its dg into row 0 of the partial buffer by a plain load and an atomic_xchg of the sum: the
    # updates made between the two are lost (a race of a plain load with other programs' atomics)
    "dg_lost_update": [(DG_STORE, "tl.atomic_xchg(dg_partial_ptr + cols, tl.load(dg_partial_ptr + cols, mask=col_mask)"
                                  " + tl.sum(dg, axis=0), mask=col_mask)"),
                       ("alloc = torch.empty if single else torch.zeros", "alloc = torch.zeros")],
    # --- the causes the diagnosis names (starter/rmsnorm_testkit/diagnose.py), each in the part that owns it ---
    # the forward leaves eps out of r
    "eps_left_out": [(FWD_R, FWD_R.replace(" + eps)", ")")), (FWD_R_CHUNKED, FWD_R_CHUNKED.replace(" + eps)", ")"))],
    "eps_added_before_mean": [(FWD_R, "r = tl.rsqrt((tl.sum(x * x, axis=1) + eps) / n_cols)"),
                              (FWD_R_CHUNKED, "r = tl.rsqrt((tl.sum(sq, axis=1) + eps) / n_cols)")],
    # eps added outside the square root
    "eps_outside_sqrt": [(FWD_R, "r = 1.0 / (tl.sqrt(tl.sum(x * x, axis=1) / n_cols) + eps)"),
                         (FWD_R_CHUNKED, "r = 1.0 / (tl.sqrt(tl.sum(sq, axis=1) / n_cols) + eps)")],
    # the wrapper passes 1e-5 to the kernel, whatever eps the caller gave
    "eps_fixed": [("x2, g, y, r, m, n, x2.stride(0), y.stride(0), float(eps),",
                   "x2, g, y, r, m, n, x2.stride(0), y.stride(0), 1e-5,")],
    # the mean of x² taken over the block's lanes (BLOCK_N), not the row's N values
    "mean_over_block": [(FWD_R, FWD_R.replace("/ n_cols", "/ BLOCK_N"))],
    # the sum of squares not divided by N
    "sum_not_mean": [(FWD_R, FWD_R.replace(" / n_cols", "")), (FWD_R_CHUNKED, FWD_R_CHUNKED.replace(" / n_cols", ""))],
    # r stored as the RMS, not its reciprocal (the backward then multiplies by the RMS)
    "r_stored_as_rms": [(R_STORE, R_STORE.replace("r, mask", "1.0 / r, mask"))],
    # y without the scale g
    "y_without_g": [(Y_STORE, Y_STORE.replace(" * g[None, :]", "")),
                    (Y_STORE_CHUNKED, Y_STORE_CHUNKED.replace(" * g[None, :]", ""))],
    # the forward never stores r (the backward then reads whatever torch.empty held)
    "r_never_stored": [(R_STORE, "")],
    # the forward's grid covers half the rows
    "grid_misses_rows": [("rmsnorm_fwd_kernel[(cdiv(m, block_m),)](", "rmsnorm_fwd_kernel[(cdiv(m, 2 * block_m),)](")],
    # the grid counted from x.shape[0], not from the M rows of x viewed as (M, N): right for 2-D x, and for 3-D x
    # whose rows fit one program's tile; a taller 3-D x has rows no program stores
    "grid_from_x_shape0": [("rmsnorm_fwd_kernel[(cdiv(m, block_m),)](",
                            "rmsnorm_fwd_kernel[(cdiv(x.shape[0], block_m),)](")],
    # the forward's grid rounded down: no program at all where M < BLOCK_M
    "grid_rounds_down": [("rmsnorm_fwd_kernel[(cdiv(m, block_m),)](", "rmsnorm_fwd_kernel[(m // block_m,)](")],
    # the wrappers take x's shape as (M, N): only 2-D inputs work
    "only_2d_inputs": [("    m, n = x2.shape\n    y = torch.empty", "    m, n = x.shape\n    y = torch.empty"),
                       ("    m, n = x2.shape\n    if tuple(r.shape)", "    m, n = x.shape\n    if tuple(r.shape)")],
    # y allocated in fp32 whatever x's dtype
    "y_in_fp32": [("    y = torch.empty((m, n), dtype=x.dtype, device=x.device)",
                   "    y = torch.empty((m, n), dtype=torch.float32, device=x.device)")],
    # the Function's forward returns r beside y "so that the caller can see it": rmsnorm(x, g) gives a tuple
    "function_returns_y_and_r": [("        ctx.save_for_backward(x, g, r)\n        return y\n",
                                  "        ctx.save_for_backward(x, g, r)\n        return y, r\n")],
    # dx allocated in fp32 whatever x's dtype ("to keep precision"): autograd converts what the Function returns
    "dx_in_fp32": [("    dx = torch.empty((m, n), dtype=x.dtype, device=x.device)",
                    "    dx = torch.empty((m, n), dtype=torch.float32, device=x.device)")],
    # one block per row, capped at 4096 columns, and no chunked path for longer rows (forward and backward)
    "block_capped_at_4096": [("    if n_cols <= MAX_FUSED_N:\n        return triton.next_power_of_2(n_cols), True",
                              "    if n_cols <= MAX_FUSED_N:\n"
                              "        return min(triton.next_power_of_2(n_cols), 4096), True")],
    # the backward recomputes r, without eps, instead of loading the one the forward saved
    "eps_left_out_of_backward": [(BWD_R, "    x, dy = x.to(tl.float32), dy.to(tl.float32)\n"
                                         "    r = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols)\n")],
    # the backward recomputes r with eps = 1e-5 written in, instead of loading the one the forward saved
    "r_recomputed_in_backward": [(BWD_R, "    x, dy = x.to(tl.float32), dy.to(tl.float32)\n"
                                         "    r = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + 1e-5)\n")],
    # eps left out of the r³ term only
    "eps_left_out_of_r_cubed": [(DOT, "r0 = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols)\n"
                                      "    c = tl.sum(dyg * x, axis=1) * (r0 * r0 * r0) / n_cols")],
    # g left out of dx
    "g_left_out_of_dx": [("    dyg = dy * g[None, :]\n", "    dyg = dy\n")],
    # dx without the term r's dependence on x adds
    "second_term_left_out": [("    dx = dyg * r[:, None] - x * c[:, None]\n", "    dx = dyg * r[:, None]\n")],
    # the dot product not divided by N
    "dot_not_divided_by_n": [(DOT, DOT.replace(" / n_cols", ""))],
    # dg without r
    "dg_without_r": [("    dg_terms = dy * x * r[:, None]", "    dg_terms = dy * x")],
    # the wrapper sums all partial dg rows but the last
    "last_partial_row_not_summed": [("dg_sum_kernel[grid](dg_partial, dg, programs, n,",
                                     "dg_sum_kernel[grid](dg_partial, dg, programs - 1, n,")],
    # the backward steps through dy by x's row stride (right only when dy's rows are as far apart as x's)
    "dy_uses_x_row_stride": [("load_tile(dy_ptr, rows, dy_row_stride, cols, mask)",
                              "load_tile(dy_ptr, rows, x_row_stride, cols, mask)")],
    # the forward steps through y by x's row stride (y is contiguous, x may not be)
    "y_uses_x_row_stride": [("    y_rows = y_ptr + rows[:, None] * y_row_stride",
                             "    y_rows = y_ptr + rows[:, None] * x_row_stride")],
    # the autograd Function saves y instead of r
    "saves_y_not_r": [("ctx.save_for_backward(x, g, r)", "ctx.save_for_backward(x, g, y)")],
    "saves_y_not_x": [("ctx.save_for_backward(x, g, r)", "ctx.save_for_backward(y, g, r)")],
    # the chunked backward's dot product set to zero once, before the loop over the program's rows
    "chunked_dot_not_reset_per_row": [
        ("        for i in range(0, rows_per_program, BLOCK_M):\n"
         "            rows, row_mask = row_tile(first_row, i, rows_per_program, n_rows, BLOCK_M)\n"
         "            r = tl.load(r_ptr + rows, mask=row_mask, other=0.0)\n"
         "            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n",
         "        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n"
         "        for i in range(0, rows_per_program, BLOCK_M):\n"
         "            rows, row_mask = row_tile(first_row, i, rows_per_program, n_rows, BLOCK_M)\n"
         "            r = tl.load(r_ptr + rows, mask=row_mask, other=0.0)\n")],
    # the chunked backward's second loop loads g at the first chunk's columns
    "chunked_g_without_offset": [
        ("                g = tl.load(g_ptr + c, mask=c < n_cols, other=0.0).to(tl.float32)\n"
         "                tl.store(dx_ptr",
         "                g = tl.load(g_ptr + cols, mask=c < n_cols, other=0.0).to(tl.float32)\n"
         "                tl.store(dx_ptr")],
    # the saved tensors unpacked in another order than they were saved
    "saved_in_another_order": [("ctx.save_for_backward(x, g, r)", "ctx.save_for_backward(g, r, x)")],
    # y multiplied by the RMS where it should be divided by it
    "y_times_rms": [(Y_STORE, Y_STORE.replace("x * r[:, None]", "x / r[:, None]")),
                    (Y_STORE_CHUNKED, Y_STORE_CHUNKED.replace("x * r[:, None]", "x / r[:, None]"))],
    # the dot product divided by the block width, not N
    "dot_over_block": [(DOT, DOT.replace("/ n_cols", "/ x.shape[1]"))],
    # g left out of the dot product only
    "dot_without_g": [(DOT, DOT.replace("tl.sum(dyg * x, axis=1)", "tl.sum(dy * x, axis=1)"))],
    # g left out of dx's first term only
    "g_left_out_of_first_term": [("    dx = dyg * r[:, None] - x * c[:, None]\n",
                                  "    dx = dy * r[:, None] - x * c[:, None]\n")],
    # dy·g·x not summed over the row: each element scales by its own product
    "dot_not_summed": [("    c = tl.sum(dyg * x, axis=1) * (r * r * r) / n_cols        "
                        "# (r^3 / N) * sum_i dy_i g_i x_i\n    dx = dyg * r[:, None] - x * c[:, None]\n",
                        "    c = dyg * x * (r * r * r)[:, None] / n_cols\n    dx = dyg * r[:, None] - x * c\n")],
    # the second term of dx added, not subtracted
    "second_term_sign": [("    dx = dyg * r[:, None] - x * c[:, None]\n",
                          "    dx = dyg * r[:, None] + x * c[:, None]\n")],
    # g multiplied into dg
    "dg_with_g": [("    dg_terms = dy * x * r[:, None]", "    dg_terms = dy * x * r[:, None] * g[None, :]")],
    # the backward steps through dy by N, not by dy's row stride (every tile of the single-pass path)
    "dy_rows_by_n": [("dy_row_stride, cols, col_mask)\n", "n_cols, cols, col_mask)\n", 3)],
    # the backward's grid covers half the rows
    "backward_grid_misses_rows": [("    programs = cdiv(m, rows_per_program) ",
                                   "    programs = max(1, cdiv(m, rows_per_program) // 2) ")],
    # y returned as the (M, N) matrix, not in x's shape
    "y_not_reshaped": [("    return y.view(x.shape), r\n", "    return y, r\n")],
    # the wrapper computes dx again with PyTorch after its kernel
    "dx_on_the_host": [("    return dx.view(x.shape), dg\n",
                        "    xf, dyg = x2.float(), dy2.float() * g.float()\n"
                        "    dot = (dyg * xf).mean(-1, keepdim=True)\n"
                        "    dx = (dyg * r[:, None] - xf * r[:, None] ** 3 * dot).to(x.dtype)\n"
                        "    return dx.view(x.shape), dg\n")],
    # the wrapper computes dg with PyTorch instead of summing the partial rows
    "dg_on_the_host": [("    return dx.view(x.shape), dg\n",
                        "    dg = (dy2.float() * x2.float() * r[:, None]).sum(0).to(g.dtype)\n"
                        "    return dx.view(x.shape), dg\n")],
    # the wrapper computes r again with PyTorch after its kernel
    "r_on_the_host": [("    return y.view(x.shape), r\n",
                       "    r = torch.rsqrt(x2.float().pow(2).mean(-1) + eps)\n    return y.view(x.shape), r\n")],
    # the autograd Function returns no gradient for g
    "no_dg_returned": [("        return dx, dg, None\n", "        return dx, None, None\n")],
    # rmsnorm_backward itself returns no dg (so g.grad is None through autograd too)
    "no_dg_from_backward": [("    return dx.view(x.shape), dg\n", "    return dx.view(x.shape), None\n")],
    # the forward's store mask leaves out each row's last column
    "y_store_misses_last_column": [(Y_STORE, Y_STORE.replace("mask=mask)",
                                                             "mask=mask & (cols < n_cols - 1)[None, :])"))],
    # the backward's store mask leaves out each row's last column
    "dx_store_misses_last_column": [("tl.store(dx_ptr + rows[:, None] * dx_row_stride + cols[None, :], dx, mask=mask)",
                                     "tl.store(dx_ptr + rows[:, None] * dx_row_stride + cols[None, :], dx, "
                                     "mask=mask & (cols < n_cols - 1)[None, :])")],
    # r allocated as an (M, 1) column, not one value per row
    # r returned with x's batch shape ((5, 7) for x of (5, 7, 96)); the backward's own check of r's shape refuses it
    "r_with_batch_shape": [("    return y.view(x.shape), r\n", "    return y.view(x.shape), r.view(x.shape[:-1])\n")],
    "r_as_column": [("    r = torch.empty(m, dtype=torch.float32, device=x.device)\n",
                     "    r = torch.empty((m, 1), dtype=torch.float32, device=x.device)\n")],
    # a Triton 2 name: tl.math.fast_powf is not in Triton 3
    "triton_2_name": [(FWD_R, "r = tl.math.fast_powf(tl.sum(x * x, axis=1) / n_cols + eps, -0.5)")],
    # a formula no known mistake explains: the feedback can only say "check the formula"
    "unknown_formula": [(Y_STORE, Y_STORE.replace("x * r[:, None] * g[None, :]", "x * r[:, None] * g[None, :] * 1.5")),
                        (Y_STORE_CHUNKED, Y_STORE_CHUNKED.replace("x * r[:, None]", "x * r[:, None] * 1.5"))],
    # dx scaled by 1.5 in both paths: no known formula; charged in item 2, where the 4.x parts see it too
    "unknown_dx_formula": [(DX_STORE, DX_STORE.replace(", dx, mask", ", dx * 1.5, mask")),
                           ("dy * g[None, :] * r[:, None] - x * coef[:, None], mask=mask)",
                            "(dy * g[None, :] * r[:, None] - x * coef[:, None]) * 1.5, mask=mask)")],
    # -- outside the formula: the autograd Function's contract --------------------------------------------------
    # the gradients in another order than forward's inputs
    "backward_returns_dx_for_g": [("        return dx, dg, None\n", "        return dg, dx, None\n")],
    # a gradient for eps, a Python float
    "eps_gets_gradient": [("        return dx, dg, None\n", "        return dx, dg, torch.zeros(())\n")],
    # save_for_backward called twice: the second call replaces the first
    "save_for_backward_twice": [("        ctx.save_for_backward(x, g, r)\n",
                                 "        ctx.save_for_backward(x, g)\n        ctx.save_for_backward(r)\n")],
    # -- layouts and dtypes -------------------------------------------------------------------------------------
    # a view where the rows' columns are not adjacent: the strides are kept and the kernel steps by 1
    "view_not_reshape": [("            return t.view(-1, n)\n        except RuntimeError:\n            pass\n"
                          "    return t.reshape(-1, n).contiguous()",
                          "            return t.view(-1, n)\n        except RuntimeError:\n            pass\n"
                          "    return t.view(-1, n)")],
    "dy_viewed_as_it_is": [("    x2, dy2, g = _rows(x, x.shape[-1]), _rows(dy, x.shape[-1]), g.contiguous()",
                            "    x2, dy2, g = _rows(x, x.shape[-1]), dy.view(-1, x.shape[-1]), g.contiguous()")],
    # correct: a copy of every x, a strided view whose columns are adjacent included (moving data is allowed)
    "strided_x_copied_on_host": [("    x2, g = _rows(x, x.shape[-1]), g.contiguous()",
                                  "    x2, g = x.reshape(-1, x.shape[-1]).contiguous(), g.contiguous()")],
    # r allocated in x's dtype; r rounded to 16 bits by the kernel's store; the partial dg buffer in g's dtype
    "r_in_x_dtype": [("    r = torch.empty(m, dtype=torch.float32, device=x.device)\n",
                      "    r = torch.empty(m, dtype=x.dtype, device=x.device)\n")],
    "r_stored_in_16_bits": [(R_STORE, R_STORE.replace("r, mask", "r.to(tl.float16), mask"))],
    "r_stored_in_x_dtype": [(R_STORE, R_STORE.replace("r, mask", "r.to(x_ptr.dtype.element_ty), mask"))],
    "partial_dg_in_g_dtype": [("dg_partial = alloc((programs, n), dtype=torch.float32,",
                               "dg_partial = alloc((programs, n), dtype=g.dtype,")],
    # -- addresses and loops ------------------------------------------------------------------------------------
    # every program takes the same rows: program_id of an axis the grid does not have; rows not scaled by BLOCK_M
    "program_id_axis_1": [(FWD_PID, FWD_PID.replace("tl.program_id(0)", "tl.program_id(1)"))],
    "rows_not_scaled_by_block": [(FWD_PID, FWD_PID.replace("pid * BLOCK_M +", "pid +"))],
    # the backward's programs all take program 0's rows (no program stores the others, and all store the same):
    # one address fault, charged where rows never stored are, in the step that asks only g's gradient too
    "backward_program_id_axis_1": [("    pid = tl.program_id(0)\n    cols = tl.arange(0, BLOCK_N)\n",
                                    "    pid = tl.program_id(1)\n    cols = tl.arange(0, BLOCK_N)\n")],
    # y stored into x's own memory, to save an allocation: x changes, and the autograd backward reads the changed x
    "y_written_into_x": [("    y = torch.empty((m, n), dtype=x.dtype, device=x.device)\n",
                          "    y = x2                                        # normalise in place\n")],
    # the prefetching row loop stops a tile early, so a program's last tile (its only one, often) is never done
    "row_loop_one_tile_short": [("            for i in range(0, rows_per_program, BLOCK_M):\n                next_rows",
                                 "            for i in range(0, rows_per_program - BLOCK_M, BLOCK_M):\n"
                                 "                next_rows")],
    # a program's row mask one row too wide: it also stores the next program's first row (a race, item 8's) and
    # prefetches that row again (item 6's extra load, where the stores miss each other)
    "row_share_one_too_wide": [("(local < rows_per_program) & (rows < n_rows)",
                                "(local <= rows_per_program) & (rows < n_rows)")],
    # the first pass over a long row stops one chunk early
    "chunk_loop_stops_a_chunk_early": [(SQ_LOOP, SQ_LOOP.replace("range(0, n_cols, BLOCK_N)",
                                                                 "range(0, n_cols - BLOCK_N, BLOCK_N)"))],
    # -- traffic --------------------------------------------------------------------------------------------------
    "g_loaded_twice": [(FWD_R, f"{FWD_R}\n        g = tl.load(g_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)")],
    "dx_stored_twice": [(DX_STORE, f"{DX_STORE}\n{DX_STORE}")],
    # -- Triton's compile rules (the grader runs the kernel as written and charges the rule once) ------------------
    "int_grid": [("rmsnorm_fwd_kernel[(cdiv(m, block_m),)](", "rmsnorm_fwd_kernel[cdiv(m, block_m)](")],
    "block_n_not_power_of_2": [("        return triton.next_power_of_2(n_cols), True", "        return n_cols, True")],
    "loop_carried_scalar": [("        sq = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n", "        sq = 0.0\n")],
    "r_stored_as_column": [(R_STORE, R_STORE.replace("r, mask", "r[:, None], mask"))],
    "block_not_constexpr": [("BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):", "BLOCK_P, BLOCK_N: tl.constexpr):")],
    # correct: dx allocated like the dy that _rows made contiguous
    "dx_allocated_like_dy2": [("    dx = torch.empty((m, n), dtype=x.dtype, device=x.device)\n",
                               "    dx = torch.empty_like(dy2)\n")],
    # -- a long row's last chunk, and the gradients an autograd step asks for --------------------------------------
    # the chunk loops' mask made once, before them, from the first chunk's columns: right while N is a multiple of
    # the chunk, and the last chunk of any other row reads past the row's end (in the forward, then in the backward)
    "chunk_mask_from_the_first_chunk": [(CHUNK_MASK_FWD, "            c = start + cols\n", 2),
                                        (SQ_ZEROS, " " * 8 + FIRST_CHUNK_MASK + SQ_ZEROS)],
    "chunk_mask_from_the_first_chunk_bwd": [(CHUNK_MASK_BWD, "                c = start + cols\n", 2),
                                            (ACC_ZEROS, " " * 12 + FIRST_CHUNK_MASK + ACC_ZEROS)],
    # ctx.needs_input_grad read with x's and g's flags exchanged: right while both require grad, None otherwise
    "needs_input_grad_swapped": [("        return dx, dg, None\n",
                                  "        return (dx if ctx.needs_input_grad[1] else None), "
                                  "(dg if ctx.needs_input_grad[0] else None), None\n")],
    # the backward's dg accumulator made in g's dtype, then given fp32 terms in the loop: Triton refuses the kernel
    # for a 16-bit g (a loop-carried variable keeps its dtype), and compiles it for an fp32 g
    "dg_accumulator_in_g_dtype": [("        dg = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n",
                                   "        dg = tl.zeros((BLOCK_M, BLOCK_N), dtype=g_ptr.dtype.element_ty)\n")],
    # correct: only the gradients the inputs ask for
    "needs_input_grad_honoured": [("        return dx, dg, None\n",
                                   "        return (dx if ctx.needs_input_grad[0] else None), "
                                   "(dg if ctx.needs_input_grad[1] else None), None\n")],
}


def edited_solution(edits, what: str) -> str:
    """The solution's text with each (old, new[, count]) edit made; each old text must occur in it count
    times (once when not given). ``edits`` may instead be a string of part letters: the partial answer of
    those parts (`make partial PARTS=...`)."""
    src = SOLUTION.read_text()
    if isinstance(edits, str):
        return make_starter(src, edits)
    for old, new, *count in edits:
        want = count[0] if count else 1
        if src.count(old) != want:
            raise ValueError(f"{what}: the solution holds {old!r} {src.count(old)} times, not {want}")
        src = src.replace(old, new)
    return src


def write_all(names, make, argv):
    """``python3 SCRIPT OUT_DIR``: write OUT_DIR/<name>.py = make(name) for each name."""
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        (out / f"{name}.py").write_text(make(name))
        print(out / f"{name}.py")


def mistake(name: str) -> str:
    return edited_solution(EDITS[name], f"mistake {name}")


if __name__ == "__main__":
    write_all(EDITS, mistake, sys.argv)
