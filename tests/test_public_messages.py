"""Each common mistake, made in the solution (tests/mistakes.py), fails the public tests first where its
cause is, with a message that names the cause in a student's terms."""
import concurrent.futures
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests"))
import forked_pytest  # noqa: E402
from mistakes import EDITS, mistake  # noqa: E402

TIME_LIMIT_S = 5            # the public tests' per-test limit, shortened for the endless loop

# mistake -> (the first failing public test, words its message must hold)
B = "test_part_b.py::test_one_row_per_program"
EXPECTED = {
    "dy_loaded_from_x_ptr": (B, ["dx from rmsnorm_bwd_kernel differs", "never load dy and load x 2.0 times per element",
                                 "a tl.load reads x's pointer where dy's is meant"]),
    "x_and_y_swapped_at_launch": ("test_part_c.py::test_forward[(37, 100)]",
                                  ["y from rmsnorm_forward differs", "passes y as rmsnorm_fwd_kernel's x_ptr, and x as "
                                   "y_ptr"]),
    "x_and_dy_swapped_at_launch": ("test_part_c.py::test_backward_dx[(37, 100)]",
                                   ["passes dy as rmsnorm_bwd_kernel's x_ptr, and x as dy_ptr",
                                    "not in the order of the kernel's parameters"]),
    "r_with_batch_shape": ("test_part_c.py::test_forward[(4, 40, 64)]",
                           ["r from rmsnorm_forward has shape (4, 40)", "it must be (160,), one value per row"]),
    "helper_without_jit": (B, ["CompilationError: rmsnorm_bwd_kernel line", "bwd_tile is a Python function",
                               "decorate it with @triton.jit"]),
    "dx_and_dy_swapped_at_launch": ("test_part_c.py::test_backward_dx[(37, 100)]",
                                    ["wrote into dy", "passes dx as rmsnorm_bwd_kernel's dy_ptr, and dy as dx_ptr"]),
    "column_stride_as_row_stride": ("test_part_c.py::test_forward[(37, 100)]",
                                    ["load only 136 of the 3700 elements of x",
                                     "x.stride(1) passed as the row stride"]),
    "dy_column_stride_as_row_stride": ("test_part_c.py::test_backward_dx[(37, 100)]",
                                       ["load only 136 of the 3700 elements of dy",
                                        "dy.stride(1) passed as the row stride"]),
    "x_stride_from_y": ("test_part_c.py::test_forward_strided_rows",
                        ["it matches x read with its rows N = 80 elements apart, but this x's rows are 160 apart"]),
    "r_loaded_from_g_ptr": (B, ["dx from rmsnorm_bwd_kernel differs", "each row's r read from g"]),
    "no_mask": ("test_part_a.py::test_one_row_per_program",
                ["OutOfBoundsError", "load_tile line", "x_ptr[36, 100:128]", "past the end of x_ptr",
                 "a tensor of shape (37, 100)", "Columns 100 and up", "mask them"]),
    "mask_without_other": ("test_part_a.py::test_one_row_per_program",
                           ["r from rmsnorm_fwd_kernel differs", "NaN where the reference has none", "without other=",
                            "other=0.0"]),
    "mask_without_other_and_mean_over_block": ("test_part_a.py::test_one_row_per_program",
                                               ["NaN where the reference has none", "without other="]),
    "mask_without_other_kept_out": (None, ["passed in"]),          # correct: every public test passes
    "dg_in_fp32": ("test_part_c.py::test_backward_wrapper_keeps_the_input_dtypes[fp16]",
                   ["dg from rmsnorm_backward has dtype torch.float32", "it must be torch.float16"]),
    "y_allocated_like_x": ("test_part_c.py::test_transposed_x_and_dy",
                           ["was never written by your kernels", "transposes of (80, 24) tensors"]),
    "two_gradients_for_three_inputs": ("test_part_c.py::test_backward_dx[(37, 100)]",
                                       ["returned an incorrect number of gradients (expected 3, got 2)",
                                        "return dx, dg, None"]),
    "row_stride_is_n": ("test_part_a.py::test_strided_rows",
                        ["from rmsnorm_fwd_kernel differs", "rows are 160 elements apart", "it matches x read with its "
                         "rows N = 80 elements apart", "Step from row to row by the row stride"]),
    "dg_into_one_row": (B, ["DataRaceError", "both write dg_partial_ptr[0,", "per-program partial buffer"]),
    "dg_summed_across_columns": (B, ["dg (the sum of the dg_partial rows your rmsnorm_bwd_kernel stored) differs",
                                     "100 of 100 elements are off"]),
    "dg_sum_one_program": ("test_part_c.py::test_backward_dg[(37, 100)]",
                           ["dg[8:100] (g.grad after rmsnorm(x, g).backward(dy)) was never written",
                            "some of dg's N columns were never written"]),
    "backward_returns_before_launch": ("test_part_c.py::test_backward_dx[(37, 100)]",
                                       ["dx[0:37, 0:100] (x.grad after rmsnorm(x, g).backward(dy)) was never written",
                                        "rows 0-36 of 37 hold whatever the memory held before"]),
    "x_loaded_twice": ("test_part_a.py::test_forward_reads_x_once_and_writes_y_once",
                       ["your forward loaded x 2.0 times per element", "a fused kernel reads x once"]),
    "endless_loop": ("test_part_a.py::test_one_row_per_program",
                     [f"timed out after {TIME_LIMIT_S} s in rmsnorm_fwd_kernel, line", "(`while i < n_cols:`)",
                      "where `i` and `n_cols` kept the same values", "an infinite loop"]),
    "endless_chunk_loop": ("test_part_a.py::test_long_rows_in_chunks[3x300-fp32]",
                           [f"timed out after {TIME_LIMIT_S} s in ", "rmsnorm_fwd_kernel, line",
                            "(`while start < n_cols:", "kept the same values", "an infinite loop"]),
    "squares_summed_in_16_bits": ("test_part_a.py::test_half_precision[fp16]",
                                  ["r from rmsnorm_fwd_kernel differs", "r is off by a little",
                                   "a sum of squares kept in fp16 rounds at every step",
                                   "tl.load(...).to(tl.float32)"]),
    "y_rounded_to_half": ("test_part_a.py::test_one_row_per_program",
                          ["y from rmsnorm_fwd_kernel differs", "each by about what one rounding to 16 bits does",
                           "a value was held in a 16-bit dtype such as fp16", "no .to(tl.float16) of x or g"]),
    "dy_times_g_in_half": (B, ["dx from rmsnorm_bwd_kernel differs", "each by about what one rounding to 16 bits does",
                               "a 16-bit dtype such as fp16", "no .to(tl.float16) of x, dy or g"]),
    "partial_dg_not_zeroed": ("test_part_c.py::test_backward_long_rows",
                              ["dg (g.grad after rmsnorm(x, g).backward(dy)) differs",
                               "Memory from torch.empty holds old data", "needs it zeroed first (torch.zeros)"]),
    "no_chunked_path": ("test_part_a.py::test_long_rows_in_chunks[3x300-fp32]",
                        ["y[0:3, 128:300] from rmsnorm_fwd_kernel was never written", "SINGLE_PASS=False",
                         "the columns from 128 on were never written in any row", "chunked path"]),
    "y_on_the_host": ("test_part_c.py::test_work_happens_in_kernels[fp32]",
                      ["a host-side `mul` read all 16384 elements of x in your forward (fp32 x), at rmsnorm.py "
                       "line", "(`y = (x2.float() * r[:, None] * g.float()).to(x.dtype)`)",
                       "the kernels must do the work on M·N data"]),
    "r_recomputed_on_the_host": ("test_part_c.py::test_work_happens_in_kernels[fp32]",
                                 ["a host-side `pow` read all 16384 elements of x in your backward (fp32 x)"]),
    "nan_check_on_the_host": (None, ["passed in"]),                 # a check: item 10's time on a GPU only
    "r_squared_in_dx": (B, ["dx from rmsnorm_bwd_kernel differs", "it matches r·dy·g − x·r²·sum(dy·g·x)/N: r² where "
                            "the derivation gives r³"]),
    "one_partial_row_per_input_row": ("test_part_d.py::test_several_rows_per_program[37x100-8rows-by2]",
                                      ["part (d) is not done yet: rmsnorm_bwd_kernel has no parameter "
                                       "rows_per_program", "add the parameters n_rows and rows_per_program"]),
    "dx_written_into_dy": ("test_part_c.py::test_backward_dx[(37, 100)]",
                           ["your backward (y.backward(dy) through rmsnorm) wrote into dy: dy[0, 0] was",
                            "store dx in a tensor of its own"]),
    "dx_written_into_x": ("test_part_c.py::test_backward_wrapper_given_r",
                          ["rmsnorm_backward(dy, x, g, r) wrote into x", "never in x's memory"]),
    "dg_lost_update": (B, ["DataRaceError", "reads dg_partial_ptr[0, 0]", "while program 1 changes it with an atomic",
                           "loses the updates made in between"]),
    "dg_by_atomic_add": (B, ["tl.atomic_add on dg_partial_ptr", "at rmsnorm_bwd_kernel line", "part 4.7",
                             "Give each program its own row of dg_partial"]),
    "eps_left_out": ("test_part_a.py::test_n_not_a_power_of_two[N=1]",
                     ["it matches the formula with eps left out: r = 1/sqrt(mean(x²))", "Add eps inside the square "
                      "root"]),
    "eps_added_before_mean": ("test_part_a.py::test_the_eps_the_caller_passes",
                              ["it matches r = 1/sqrt((sum(x²) + eps)/N)", "Add eps after the mean"]),
    "eps_outside_sqrt": ("test_part_a.py::test_n_not_a_power_of_two[N=1]",
                         ["it matches r = 1/(sqrt(mean(x²)) + eps): eps is outside the square root"]),
    "eps_fixed": ("test_part_c.py::test_the_eps_the_caller_passes",
                  ["it matches the formula with eps = 1e-05 instead of the eps = 0.1 the caller passed"]),
    "mean_over_block": ("test_part_a.py::test_one_row_per_program",
                        ["r from rmsnorm_fwd_kernel differs", "it matches a mean of x² over the block's 128 lanes "
                         "instead of the row's N = 100 values", "Divide the sum of squares by n_cols, not by BLOCK_N"]),
    "sum_not_mean": ("test_part_a.py::test_one_row_per_program",
                     ["the sum of squares is not divided by N"]),
    "r_stored_as_rms": ("test_part_a.py::test_one_row_per_program",
                        ["r holds the RMS, sqrt(mean(x²) + eps), where its reciprocal is expected"]),
    "y_without_g": ("test_part_a.py::test_one_row_per_program", ["y from rmsnorm_fwd_kernel differs",
                                                                 "it matches x·r without the scale g"]),
    "r_never_stored": ("test_part_a.py::test_one_row_per_program",
                       ["r[0:37] from rmsnorm_fwd_kernel was never written", "no kernel stored r at all"]),
    "grid_rounds_down": ("test_part_c.py::test_forward[(37, 100)]",
                         ["rows 0-36 of 37 hold whatever the memory held before", "the forward's programs miss some "
                          "rows"]),
    "grid_from_x_shape0": ("test_part_c.py::test_forward[(4, 40, 64)]",
                           ["y[128:160, 0:64] from rmsnorm_forward was never written", "rows 128-159 of 160",
                            "the forward's programs miss some rows"]),
    "grid_misses_rows": ("test_part_c.py::test_forward[(4, 40, 64)]",
                         ["y[128:160, 0:64] from rmsnorm_forward was never written", "rows 128-159 of 160",
                          "the forward's programs miss some rows", "the elements that were stored are right"]),
    "only_2d_inputs": ("test_part_c.py::test_forward[(4, 40, 64)]",
                       ["rmsnorm_forward raised ValueError: too many values to unpack", "x has 3 dims",
                        "x.reshape(-1, x.shape[-1])"]),
    "y_in_fp32": ("test_part_c.py::test_half_precision[fp16]",
                  ["y from rmsnorm_forward has dtype torch.float32 for x of shape (33, 200) fp16",
                   "it must keep x's dtype"]),
    "function_returns_y_and_r": ("test_part_c.py::test_the_eps_the_caller_passes",
                                 ["y from rmsnorm(x, g, 0.1) (your TritonRMSNorm.forward) should be a torch.Tensor, "
                                  "got tuple"]),
    "dx_in_fp32": ("test_part_c.py::test_backward_wrapper_keeps_the_input_dtypes[fp16]",
                   ["dx from rmsnorm_backward has dtype torch.float32 for x of shape (33, 200) fp16",
                    "it must be torch.float16"]),
    "block_capped_at_4096": ("test_part_c.py::test_forward_rows_of_16384",
                             ["y[0:3, 4096:16384] from rmsnorm_forward was never written",
                              "the columns from 4096 on were never written in any row"]),
    "eps_left_out_of_backward": ("test_part_b.py::test_the_r_it_is_given",
                                 ["dx from rmsnorm_bwd_kernel differs", "r recomputed from x without eps",
                                  "Load r from r_ptr", "the backward has no eps"]),
    "r_recomputed_in_backward": ("test_part_b.py::test_the_r_it_is_given",
                                 ["it matches the gradients with r recomputed from x with eps = 1e-05, in place of "
                                  "the r the kernel was given (made with eps = 0.5)", "Load r from r_ptr"]),
    "eps_left_out_of_r_cubed": ("test_part_b.py::test_the_r_it_is_given",
                                ["with eps left out of the r³ term only"]),
    "g_left_out_of_dx": (B, ["it matches the formula with g left out: r·dy − x·r³·sum(dy·x)/N"]),
    "second_term_left_out": (B, ["it matches r·dy·g alone: the term that r's dependence on x adds is missing"]),
    "dot_not_divided_by_n": (B, ["it matches r·dy·g − x·r³·sum(dy·g·x): the sum is not divided by N"]),
    "dg_without_r": (B, ["dg (the sum of the dg_partial rows", "it matches sum over rows of dy·x: r is missing"]),
    "last_partial_row_not_summed": ("test_part_c.py::test_backward_dg[(37, 100)]",
                                    ["it is the sum over rows 0-31 only: the other rows' contributions are missing"]),
    "dy_uses_x_row_stride": ("test_part_b.py::test_strided_x_and_contiguous_dy",
                             ["out-of-bounds load", "dy_ptr[24, 0:80]", "past the end of dy_ptr",
                              "x's rows are 160 elements apart, dy's rows are 80 elements apart",
                              "step through each tensor with its own row stride"]),
    "y_uses_x_row_stride": ("test_part_a.py::test_strided_rows", ["out-of-bounds store", "y_ptr[24, 0:80]",
                                                                  "past the end of y_ptr",
                                                                  "step through each tensor with its own row "
                                                                  "stride"]),
    "r_kept_as_ctx_attribute": ("test_part_c.py::test_autograd_keeps_tensors_through_save_for_backward",
                                ["kept ctx.r ((6,) fp32) as an attribute of ctx", "ctx.save_for_backward(x, g, r)"]),
    "saved_in_another_order": ("test_part_c.py::test_backward_dx[(37, 100)]",
                               ["but rmsnorm_backward runs when called directly",
                                "Your forward saved (100,) fp32, (37,) fp32, (37, 100) fp32, in that order",
                                "unpack ctx.saved_tensors in the order ctx.save_for_backward was given them"]),
    "chunked_dot_not_reset_per_row": ("test_part_c.py::test_backward_long_rows",
                                      ["each row's sum(dy·g·x) carried into the rows after it",
                                       "Set the accumulator to zero at the start of each row"]),
    "chunked_g_without_offset": ("test_part_b.py::test_long_rows_in_chunks[3x300]",
                                 ["it matches dx with g read at the row's first 128 columns in every chunk",
                                  "g_ptr + start + cols"]),
    "saves_y_not_x": ("test_part_c.py::test_backward_dx[(37, 100)]",
                      ["your backward (TritonRMSNorm.backward) passes y as rmsnorm_bwd_kernel's x_ptr",
                       "ctx.save_for_backward(x, g, r)"]),
    "saves_y_not_r": ("test_part_c.py::test_backward_dx[(37, 100)]",
                      ["your TritonRMSNorm.forward saved (37, 100) fp32, (100,) fp32, (37, 100) fp32",
                       "the backward needs r: (37,) fp32", "ctx.save_for_backward(x, g, r)"]),
    "y_times_rms": ("test_part_a.py::test_one_row_per_program",
                    ["it matches x·sqrt(mean(x²) + eps)·g: multiplied by the RMS instead of divided by it"]),
    "dot_over_block": (B, ["the dot product divided by the block's 128 lanes instead of N = 100"]),
    "dot_without_g": (B, ["g is missing from the dot product"]),
    "second_term_sign": (B, ["the second term has the wrong sign"]),
    "dot_not_summed": (B, ["the sum over the row is missing"]),
    "g_left_out_of_first_term": (B, ["g is missing from the first term"]),
    "dg_with_g": (B, ["g should not be in dg"]),
    "dy_rows_by_n": ("test_part_b.py::test_strided_rows_and_untouched_dy",
                     ["it matches dy read with its rows N = 80 elements apart, but this dy's rows are 160 apart"]),
    "backward_grid_misses_rows": ("test_part_c.py::test_backward_dx[(37, 100)]",
                                  ["dx[16:37, 0:100] (x.grad after rmsnorm(x, g).backward(dy)) was never written",
                                   "the backward's grid misses some rows"]),
    "y_not_reshaped": ("test_part_c.py::test_forward[(4, 40, 64)]",
                       ["y from rmsnorm_forward has shape (160, 64) for x of shape (4, 40, 64) fp32",
                        "y.view(x.shape)"]),
    "dx_on_the_host": ("test_part_c.py::test_backward_reads_x_and_dy_once_and_writes_dx_once",
                       ["your backward stored dx 0.0 times per element"]),
    "dg_on_the_host": ("test_part_c.py::test_work_happens_in_kernels[fp32]",
                       ["a host-side `mul` read all 16384 elements of dy in your backward (fp32 x)", "(`dg = "]),
    "r_on_the_host": ("test_part_c.py::test_work_happens_in_kernels[fp32]",
                      ["a host-side `pow` read all 16384 elements of x in your forward", "(`r = torch.rsqrt("]),
    "no_dg_returned": ("test_part_c.py::test_backward_dg[(37, 100)]",
                       ["g.grad is None after y.backward(dy)", "must return dg for g as its second value"]),
    "no_dg_from_backward": ("test_part_c.py::test_backward_dg[(37, 100)]",
                            ["g.grad is None after y.backward(dy)", "since rmsnorm_backward returns None for dg"]),
    "y_store_misses_last_column": ("test_part_a.py::test_one_row_per_program",
                                   ["y[0:37, 99] from rmsnorm_fwd_kernel was never written",
                                    "Check the offsets and masks of your tl.store",
                                    "the elements that were stored are right"]),
    "dx_store_misses_last_column": (B, ["dx[0:37, 99] from rmsnorm_bwd_kernel was never written"]),
    "r_as_column": ("test_part_c.py::test_forward[(37, 100)]",
                    ["r from rmsnorm_forward has shape (37, 1)", "one value per row"]),
    "triton_2_name": ("test_part_a.py::test_one_row_per_program",
                      ["rmsnorm_fwd_kernel line", "Triton has no tl.math.fast_powf either: this line would not compile "
                       "on a GPU", "libdevice.fast_powf"]),
    "backward_returns_dx_for_g": ("test_part_c.py::test_backward_dx[(37, 100)]",
                                  ["returned an invalid gradient at index 0", "return dx, dg, None"]),
    "eps_gets_gradient": ("test_part_c.py::test_backward_dx[(37, 100)]", ["eps is a Python float, not a tensor"]),
    "save_for_backward_twice": ("test_part_c.py::test_backward_dx[(37, 100)]",
                                ["saved only (37,) fp32", "keeps the tensors of its last call only"]),
    "view_not_reshape": ("test_part_c.py::test_transposed_x_and_dy",
                         ["x's columns are 24 elements apart", "x.reshape(-1, N).contiguous()"]),
    "dy_viewed_as_it_is": ("test_part_c.py::test_transposed_x_and_dy",
                           ["this dy's columns are 24 elements apart", "dy.reshape(-1, N).contiguous()"]),
    "strided_x_copied_on_host": (None, ["passed in"]),              # correct: moving data is allowed
    "r_in_x_dtype": ("test_part_c.py::test_half_precision[fp16]",
                     ["r from rmsnorm_forward has dtype torch.float16", "allocate it with dtype=torch.float32"]),
    "r_stored_in_16_bits": ("test_part_a.py::test_one_row_per_program", ["it matches the right r rounded to fp16"]),
    "r_stored_in_x_dtype": ("test_part_a.py::test_half_precision[fp16]", ["it matches the right r rounded to fp16",
                                                                          "Store r as computed, in fp32"]),
    "partial_dg_in_g_dtype": ("test_part_c.py::test_half_precision[fp16]",
                              ["your partial dg buffer", "is float16", "dtype=torch.float32"]),
    "program_id_axis_1": ("test_part_a.py::test_one_row_per_program",
                          ["DataRaceError", "programs 0 and 1 both write y_ptr[0, 0]", "shares overlap"]),
    "backward_program_id_axis_1": ("test_part_b.py::test_one_row_per_program",
                                   ["programs 0 and 1 both write dx_ptr[0, 0]", "asks for tl.program_id(1)"]),
    "row_share_one_too_wide": ("test_part_b.py::test_backward_reads_x_and_dy_once_and_writes_dx_once",
                               ["programs load each other's rows: their shares overlap"]),
    "y_written_into_x": ("test_part_c.py::test_forward[(37, 100)]",
                         ["rmsnorm_forward wrote into x", "store y in a tensor of its own"]),
    "row_loop_one_tile_short": ("test_part_b.py::test_one_row_per_program",
                                ["was never written by rmsnorm_bwd_kernel", "whole rows were never written"]),
    "rows_not_scaled_by_block": ("test_part_a.py::test_several_rows_per_program",
                                 ["DataRaceError", "both write y_ptr[1, 0]", "shares overlap"]),
    "chunk_loop_stops_a_chunk_early": ("test_part_a.py::test_long_rows_in_chunks[3x300-fp32]",
                                       ["all but the row's last 44 columns", "stops one chunk early"]),
    "dx_stored_twice": ("test_part_b.py::test_backward_reads_x_and_dy_once_and_writes_dx_once",
                        ["your backward stored dx 2.0 times per element"]),
    "int_grid": ("test_part_c.py::test_forward[(37, 100)]", ["TypeError", "the grid must be a tuple"]),
    "block_n_not_power_of_2": ("test_part_c.py::test_forward[(37, 100)]",
                               ["CompilationError", "tl.arange(0, 81) has 81 elements", "power of 2"]),
    "loop_carried_scalar": ("test_part_a.py::test_long_rows_in_chunks[3x300-fp32]",
                            ["CompilationError", "the loop carries `sq`", "Loop-carried variable"]),
    "r_stored_as_column": ("test_part_a.py::test_one_row_per_program",
                           ["CompilationError", "through pointers of shape [1]", "Cannot broadcast"]),
    "block_not_constexpr": ("test_part_c.py::test_backward_dx[(37, 100)]",
                            ["CompilationError", "dg_sum_kernel line", "tl.constexpr"]),
    "dx_allocated_like_dy2": (None, ["passed in"]),                 # correct: every public test passes
    "g_loaded_twice": (None, ["passed in"]),                        # correct: g no more often than once per row
    "unknown_formula": ("test_part_a.py::test_one_row_per_program", ["check the formula"]),
    "unknown_dx_formula": ("test_part_b.py::test_one_row_per_program", ["check the formula, dx = r·dy·g"]),
    "chunk_mask_from_the_first_chunk": ("test_part_a.py::test_long_rows_in_chunks[3x300-fp32]",
                                        ["OutOfBoundsError", "x_ptr[2, 300:384] are past the end of x_ptr",
                                         "Columns 300 and up are past the end of a row of 300: mask them"]),
    "chunk_mask_from_the_first_chunk_bwd": ("test_part_b.py::test_long_rows_in_chunks[3x300]",
                                            ["OutOfBoundsError", "x_ptr[2, 300:384] are past the end of x_ptr",
                                             "Columns 300 and up are past the end of a row of 300: mask them"]),
    "needs_input_grad_swapped": ("test_part_c.py::test_only_the_inputs_that_require_grad[only_x]",
                                 ["x.grad is None after y.backward(dy)", "where only x requires grad",
                                  "ctx.needs_input_grad[0] is True", "[0] is x's, [1] is g's"]),
    "needs_input_grad_honoured": (None, ["passed in"]),             # correct: only the gradients asked for
    "r_recomputed_by_the_function": (None, ["passed in"]),          # the forward's kernels again: not dg's scratch
    "dg_accumulator_in_g_dtype": ("test_part_b.py::test_half_precision[fp16]",
                                  ["CompilationError", "the loop carries `dg`, which is of tl.float16 before the loop "
                                   "and of tl.float32 inside it", "dtype=tl.float32"]),
}


def test_every_mistake_has_an_expectation():
    assert set(EXPECTED) == set(EDITS)


def first_failure(impl, tmp_path, limit=TIME_LIMIT_S, **extra_env):
    """(test id, message, seconds) of the first failing public test on ``impl``, each test stopped after ``limit``
    seconds."""
    env = dict(os.environ, RMSNORM_IMPL=str(impl), RMSNORM_TEST_TIMEOUT=str(limit), MINI_TRITON="1",
               COLUMNS="200", **extra_env)
    env.pop("TRITON_INTERPRET", None)
    start = time.monotonic()
    code, out = forked_pytest.run(["-x", "-q", "--tb=short", "-p", "no:cacheprovider", str(ROOT / "starter" / "tests")],
                                  env, ROOT, timeout=300)
    seconds = time.monotonic() - start
    summary = out.split("fix the first one first", 1)
    assert code == 1 and len(summary) == 2, out[-5000:]
    m = re.search(r"^FAILED \S+/tests/(.+)\n((?:    .*\n?)+)", summary[1], flags=re.M)
    assert m, summary[1]
    message = " ".join(line.strip() for line in m.group(2).splitlines())
    return m.group(1), message, seconds


@pytest.fixture(scope="module")
def first_failures(tmp_path_factory):
    """{mistake: (test id, message, seconds)} of the public tests on every mistake, two at a time."""
    d = tmp_path_factory.mktemp("mistakes")

    def run(name):
        impl = d / name / "rmsnorm.py"
        impl.parent.mkdir()
        impl.write_text(mistake(name))
        try:
            # the short limit for the endless loops; the others get the students' 30 s (a long-row test nears
            # 5 s when the machine is busy)
            return name, first_failure(impl, d, limit=TIME_LIMIT_S if "endless" in name else 30)
        except AssertionError as e:                  # no failure, or one that could not be read: the test says
            return name, (None, str(e), 0.0)
    slow_first = sorted(EDITS, key=lambda n: "endless" not in n)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(run, slow_first))


@pytest.mark.parametrize("name", sorted(EDITS))
def test_the_first_failure_names_the_mistake(name, first_failures):
    test, message, seconds = first_failures[name]
    want_test, words = EXPECTED[name]
    assert test == want_test, (test, message)
    assert want_test is not None or " failed" not in message, message
    for w in words:
        assert w in message, (w, message)
    if name == "endless_loop":
        assert seconds < TIME_LIMIT_S + 30, f"the time-out took {seconds:.0f} s"


def test_the_time_limit_without_sigalrm_gives_the_same_message(tmp_path):
    """Windows has no SIGALRM: a timer thread raises the time-out in the test's thread instead."""
    impl = tmp_path / "rmsnorm.py"
    impl.write_text(mistake("endless_loop"))
    test, message, seconds = first_failure(impl, tmp_path, RMSNORM_TEST_TIMER="thread")
    assert test == EXPECTED["endless_loop"][0]
    for w in EXPECTED["endless_loop"][1]:
        assert w in message, (w, message)
    assert seconds < TIME_LIMIT_S + 20


def test_a_time_out_stops_the_run_and_the_summary_counts_the_tests_that_did_not_run(tmp_path):
    impl = tmp_path / "rmsnorm.py"
    impl.write_text(mistake("endless_loop"))
    env = dict(os.environ, RMSNORM_IMPL=str(impl), RMSNORM_TEST_TIMEOUT="2", MINI_TRITON="1", COLUMNS="200")

    def pytest(*args):
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args,
                               str(ROOT / "starter" / "tests")], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=300).stdout
    collected = int(re.search(r"(\d+) tests? collected", pytest("--collect-only")).group(1))
    out = pytest()
    m = re.search(r"(\d+) tests did not run: the run stopped at the time-out of (\S+)\. Fix it, then run them again",
                  out)
    assert m and m.group(2) == "test_one_row_per_program", out[-3000:]
    ran = sum(int(n) for n in re.findall(r"(\d+) (?:passed|failed)", out.strip().splitlines()[-1]))
    assert int(m.group(1)) + ran == collected and ran == 1, (m.group(1), ran, collected)
    assert f"and the {m.group(1)} tests after it did not run" in out
