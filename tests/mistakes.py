"""Common student mistakes, each made in the reference solution by one edit.

    python3 tests/mistakes.py OUT_DIR       # writes OUT_DIR/<name>.py

tests/test_public_messages.py runs the public tests on each and checks that the first failure
names the cause in a student's terms; tests/make_handout_images.py draws one of them.
"""
import sys
from pathlib import Path

SOLUTION = Path(__file__).resolve().parents[1] / "solution" / "rmsnorm.py"

LOAD_TILE = "return tl.load(ptr + rows[:, None] * row_stride + cols[None, :], mask=mask, other=0.0)"
FWD_LOAD = "x = load_tile(x_ptr, rows, x_row_stride, cols, mask).to(tl.float32)"
FWD_R = "r = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)        # masked lanes add 0"
DG_STORE = "tl.store(dg_partial_ptr + pid * n_cols + cols, tl.sum(dg, axis=0), mask=col_mask)"
FWD_PID = "    pid = tl.program_id(0)\n    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)"
SINGLE = "    if SINGLE_PASS:\n        # The whole row fits in registers: read x once, write y once."

EDITS = {
    # every load of a tile reads its lanes past N (and past M) too
    "no_mask": [(LOAD_TILE, LOAD_TILE.replace(", mask=mask, other=0.0", ""))],
    # masked-off lanes are left undefined (NaN in the simulator) and enter the sums
    "mask_without_other": [(LOAD_TILE, LOAD_TILE.replace(", other=0.0", ""))],
    # the forward steps from row to row by N, not by the row stride
    "row_stride_is_n": [(FWD_LOAD, FWD_LOAD.replace("x_row_stride", "n_cols"))],
    # every program of the backward stores its share of dg into row 0 of the partial buffer
    "dg_into_one_row": [(DG_STORE, DG_STORE.replace(" + pid * n_cols", ""))],
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
    # the wrapper takes the partial dg buffer from torch.empty, and the chunked backward adds into it
    "partial_dg_not_zeroed": [("alloc = torch.empty if single else torch.zeros", "alloc = torch.empty")],
    # the forward ignores SINGLE_PASS=False: a long row gets one tile of BLOCK_N columns
    "no_chunked_path": [(SINGLE, SINGLE.replace("if SINGLE_PASS:", "if True:"))],
    # the wrapper computes y again with PyTorch after its kernel
    "y_on_the_host": [("    return y.view(x.shape), r\n",
                       "    y = (x2.float() * r[:, None] * g.float()).to(x.dtype)\n    return y.view(x.shape), r\n")],
    # the backward recomputes r with PyTorch instead of using the one the forward saved
    "r_recomputed_on_the_host": [("        x, g, r = ctx.saved_tensors\n",
                                  "        x, g, _ = ctx.saved_tensors\n"
                                  "        r = torch.rsqrt(x.float().pow(2).mean(-1) + 1e-5).reshape(-1)\n")],
    # the forward checks its input on the host, which also makes it wait for the GPU (.item())
    "nan_check_on_the_host": [("    _check_inputs(x, g)\n    # [TODO] Part (c): allocate y",
                               "    _check_inputs(x, g)\n    if torch.isnan(x).any().item():\n"
                               "        raise ValueError(\"x holds NaN\")\n    # [TODO] Part (c): allocate y")],
    # r squared where the derivation gives r cubed
    "r_squared_in_dx": [("c = tl.sum(dyg * x, axis=1) * (r * r * r) / n_cols",
                         "c = tl.sum(dyg * x, axis=1) * (r * r) / n_cols")],
    # the wrapper's default is the lecture's reduction: one partial dg row per input row (an M x N buffer)
    "one_partial_row_per_input_row": [('def rmsnorm_backward(dy, x, g, r, dg_reduction="programs"):',
                                       'def rmsnorm_backward(dy, x, g, r, dg_reduction="rows"):')],
    # the wrapper stores dx in dy's memory, to save an allocation
    "dx_written_into_dy": [("    dx = torch.empty((m, n), dtype=x.dtype, device=x.device)\n",
                            "    dx = dy2                                      # reuse dy's memory for dx\n")],
    # every program adds its dg into row 0 of the partial buffer with a float atomic (no race, no fixed order)
    "dg_by_atomic_add": [(DG_STORE, DG_STORE.replace("tl.store(dg_partial_ptr + pid * n_cols + cols,",
                                                     "tl.atomic_add(dg_partial_ptr + cols,")),
                         ("alloc = torch.empty if single else torch.zeros", "alloc = torch.zeros")],
}


def edited_solution(edits, what: str) -> str:
    """The solution's text with each (old, new) edit made; each old text must occur in it once."""
    src = SOLUTION.read_text()
    for old, new in edits:
        if src.count(old) != 1:
            raise ValueError(f"{what}: the solution holds {old!r} {src.count(old)} times, not once")
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
