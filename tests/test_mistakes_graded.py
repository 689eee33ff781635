"""One mistake, one charge: each common mistake (tests/mistakes.py, the solution with one defect) costs
points in the one part that owns its cause (autograder/rubric.py's CAUSE_OWNERS), and that part's message
names the cause; every other part keeps its points. Item 9 is extra credit: a mistake that leaves its
requirements unmet (a deterministic, fused, exact dg) does not earn it, which is not a charge.

A kernel that crashes or hangs leaves nothing to check, so its error costs every part whose inputs it
reaches and where nothing else could be checked: one crash (one site: the error's kind and the kernel's line, whatever
the input) is charged in the first part that meets it, and a part that checked something else keeps its points.

The gradings run the grader's own jobs, job code and verdicts in-process (tests/grade_in_process.py:
everything but the sandbox, whose process starts would cost more than the tasks); the hidden tests report
those verdicts, which test_the_hidden_tests_report_the_same_verdicts checks through `make grade`'s path on
two of them.
"""
import json
import subprocess
import sys
import textwrap

import pytest

from autograder import grade, rubric
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests"))
from grade_in_process import Pool  # noqa: E402
from mistakes import EDITS, SOLUTION, mistake  # noqa: E402

def _line_of(code: str) -> int:
    """The solution's line that holds ``code`` (the mistakes keep the solution's line numbers)."""
    return next(i for i, ln in enumerate(SOLUTION.read_text().splitlines(), 1) if code in ln)


CRASH = ["1", "2", "3", "4.1", "4.2", "4.3", "4.4", "4.5", "4.6", "6", "8", "9"]
# mistake: (the causes the diagnosis names, the parts it costs, words the first of them must say)
CHARGED = {
    # addresses: named from what the kernels read, before any formula, and charged once, in item 2
    "dy_loaded_from_x_ptr": (("wrong_tensor_bwd",), ["2", "9"], "never load dy and load x 2.0 times per element"),
    # two tensors passed the other way round: the grader runs the launch with them exchanged, so that the rest is
    # checked (job.judge.launches.Launcher.exchange); a backward run so does not earn item 9's extra credit
    "x_and_dy_swapped_at_launch": (("wrong_tensor_bwd",), ["2", "9"], "passes dy as rmsnorm_bwd_kernel's x_ptr, and x "
                                                                      "as dy_ptr"),
    "dx_and_dy_swapped_at_launch": (("wrong_tensor_bwd",), ["2", "9"], "passes dx as rmsnorm_bwd_kernel's dy_ptr, and "
                                                                       "dy as dx_ptr"),
    "x_and_y_swapped_at_launch": (("wrong_tensor_fwd",), ["1"], "passes y as rmsnorm_fwd_kernel's x_ptr, and x as "
                                                                "y_ptr"),
    # a row stride that makes the rows overlap: named from the distinct elements loaded, and checked from the
    # outputs of the memory it read (item 9 needs a right dg, so it is not earned either)
    "column_stride_as_row_stride": (("unread_fwd",), ["1"], "1 element apart (x.stride(1) passed as the row stride"),
    "dy_column_stride_as_row_stride": (("unread_bwd",), ["2", "9"], "1 element apart (dy.stride(1) passed as the row "
                                                                    "stride"),
    "x_stride_from_y": (("x_rows_by_n",), ["4.3"], "it matches x read with its rows N = 80 elements apart"),
    # r read through g: named where M <= N; where M > N the load runs past g's end, one crash (its site: the kernel's
    # line), charged in item 2 beside it; items 6 and 8 read the traffic of a core case that ran instead of (256, 128)
    "r_loaded_from_g_ptr": (("r_read_from_g",), ["2", "9"],
                            "r read from g (r of row i = g[i]): a tl.load reads g's pointer where r's is meant"),
    # one crash site (load_tile's line): the parts that checked something else keep their points (4.4's rows whose N
    # fills the blocks, 4.6's properties of the runs that did not crash)
    "no_mask": ((), [p for p in CRASH if p not in ("4.4", "4.6")], "OutOfBoundsError: out-of-bounds load in load_tile"),
    "mask_without_other": (("lanes_undefined",), ["4.5"], "a tl.load without other= (the first: load_tile line"),
    # the forward's mean is wrong even with those lanes read as 0.0; the backward's sums are right then
    "mask_without_other_and_mean_over_block": (("mean_over_block", "lanes_undefined"), ["1", "4.5"],
                                               "over the block's 128 lanes"),
    "row_stride_is_n": (("x_rows_by_n",), ["4.3"], "it matches x read with its rows N = 80 elements apart"),
    "dg_into_one_row": (("race",), ["8", "9"], "data race in rmsnorm_bwd_kernel: programs 0 and 1 both write"),
    # a compile rule broken at every tile of many rows; at 6 x 513's tiles of one row it compiles, and its wrong dg
    # is the rule's values, not a mistake of item 3's or 4.4's own
    "dg_summed_across_columns": (("compile_rule",), ["2", "3", "9"],
                                 "tl.store of a value of shape [8] through pointers of shape [128]"),
    "dg_sum_one_program": (("dg_not_stored",), ["3", "9"], "some of dg's N columns were never written"),
    # no launch at all: dx's rows never stored (item 2's) and a dg the host filled are one mistake; item 3 and item 6
    # have nothing else to check
    "backward_returns_before_launch": (("rows_not_stored_bwd",), ["2", "3", "6", "9"],
                                       "rows 0-36 of 37 hold whatever the memory held before"),
    "x_loaded_twice": ((), ["5"], "your forward loaded x 2.0 times per element"),
    "squares_summed_in_16_bits": (("sum_in_16_bits",), ["4.1"], "a sum of squares kept in fp16 rounds at every step"),
    "y_rounded_to_half": (("held_in_16_bits_fwd",), ["1"], "a value was held in a 16-bit dtype such as fp16"),
    "dy_times_g_in_half": (("held_in_16_bits_bwd",), ["2"], "each by about what one rounding to 16 bits does"),
    "partial_dg_not_zeroed": (("old_memory_nan",), ["4.4"], "Memory from torch.empty holds old data"),
    "no_chunked_path": (("columns_not_stored",), ["4.4"], "the columns from 4096 on were never written in any row"),
    "y_on_the_host": (("y_not_from_kernels",), ["1"], "your forward returned y without any kernel storing it"),
    "r_recomputed_on_the_host": ((), ["7"], "a host-side `pow` read all 32768 elements of x in your backward"),
    "r_kept_as_ctx_attribute": (("ctx_tensors",), ["4.6"], "kept ctx.r ((16,) fp32) as an attribute of ctx, and your"),
    "r_squared_in_dx": (("r_squared",), ["2"], "r² where the derivation gives r³"),
    "one_partial_row_per_input_row": ((), ["9"], "your partial dg buffer (dg_partial_ptr) has 32768 elements"),
    "dx_written_into_dy": (("dy_modified",), ["4.6"], "your backward modified dy"),
    "dx_written_into_x": (("input_modified",), ["4.6"], "your code wrote into x"),
    "dg_by_atomic_add": (("order_dependent",), ["4.7", "9"], "tl.atomic_add on dg_partial_ptr"),
    # one mistake (a race), charged once: not again as order dependence (4.7) or as scratch traffic (6)
    "dg_lost_update": (("race",), ["8", "9"], "reads dg_partial_ptr[0, 0] (rmsnorm_bwd_kernel line"),
    "eps_left_out": (("eps_forgotten",), ["4.5"], "it matches the formula with eps left out"),
    "eps_added_before_mean": (("eps_over_n",), ["4.5"], "eps is added to the sum of squares before the division by N"),
    "eps_outside_sqrt": (("eps_outside_sqrt",), ["4.5"], "eps is outside the square root"),
    "eps_fixed": (("eps_ignored",), ["4.5"], "instead of the eps = 0.01 the caller passed"),
    "mean_over_block": (("mean_over_block",), ["1"], "over the block's 128 lanes instead of the row's N = 100"),
    "sum_not_mean": (("sum_not_mean",), ["1"], "the sum of squares is not divided by N"),
    "r_stored_as_rms": (("r_is_rms",), ["1"], "r holds the RMS"),
    "y_without_g": (("y_without_g",), ["1"], "it matches x·r without the scale g"),
    "r_never_stored": (("r_not_stored",), ["1"], "no kernel stored r at all"),
    "grid_misses_rows": (("rows_not_stored_fwd",), ["1"], "the forward's programs miss some rows"),
    "grid_from_x_shape0": (("rows_not_stored_fwd",), ["4.2"], "the forward's programs miss some rows"),
    # no program at all at M < BLOCK_M: the parts whose every case has fewer rows check nothing else (item 5 says the
    # forward launched no kernel, the grid's doing: charged in item 1); 4.2's 3-D case of 160 rows has a program
    "grid_rounds_down": (("rows_not_stored_fwd",), ["1", "4.3", "4.5"], "the forward's programs miss some rows"),
    "only_2d_inputs": ((), ["4.2"], "ValueError: too many values to unpack"),
    "dg_in_fp32": (("output_dtype",), ["4.6"], "dg from rmsnorm_backward has dtype float32 for x of shape (256, 128) "
                                               "fp16"),
    "y_allocated_like_x": (("elements_not_stored_fwd",), ["4.3"], "transposes of (80, 24) tensors"),
    "two_gradients_for_three_inputs": (("gradient_count",), ["4.6"], "3 in all, in that order: return dx, dg, None"),
    "y_in_fp32": (("output_dtype",), ["4.6"], "y has dtype float32 for x of shape (256, 128) fp16"),
    # item 7 sees x.grad, autograd's conversion of the fp32 dx: the dtype's mistake, noted there, not host work
    "dx_in_fp32": (("output_dtype",), ["4.6"], "dx from rmsnorm_backward has dtype float32"),
    # the Function's output is 4.6's; 4.1 and 4.4 keep their points (their forward cases could be checked), while
    # 4.2, 4.3 and 4.5 have only autograd steps, which it stops: nothing else of theirs could be checked
    "function_returns_y_and_r": (("output_type",), ["4.2", "4.3", "4.5", "4.6"],
                                 "gave tuple instead of a tensor, so y.backward(dy) could not run"),
    "block_capped_at_4096": (("columns_not_stored",), ["4.4"], "the columns from 4096 on were never written"),
    "eps_left_out_of_backward": (("r_recomputed_without_eps", "padding_nan"), ["4.5"], "oad r from r_ptr"),
    "r_recomputed_in_backward": (("r_recomputed",), ["4.5"], "with r recomputed from x with eps = 1e-05"),
    "eps_left_out_of_r_cubed": (("eps_forgotten_in_r3",), ["4.5"], "with eps left out of the r³ term only"),
    "g_left_out_of_dx": (("g_missing_dx",), ["2"], "it matches the formula with g left out"),
    "second_term_left_out": (("second_term_missing",), ["2"], "it matches r·dy·g alone"),
    "dot_not_divided_by_n": (("dot_not_divided",), ["2"], "the sum is not divided by N"),
    "dg_without_r": (("dg_without_r",), ["3", "9"], "it matches sum over rows of dy·x: r is missing"),
    "last_partial_row_not_summed": (("dg_some_rows",), ["3", "9"], "it is the sum over rows 0-31 only"),
    "dy_uses_x_row_stride": ((), ["4.3"], "OutOfBoundsError: out-of-bounds load in load_tile line"),
    "y_uses_x_row_stride": ((), ["4.3"], "OutOfBoundsError: out-of-bounds store in rmsnorm_fwd_kernel"),
    "saves_y_not_r": (("no_r_saved",), ["4.6"], "and the backward needs r: (256,) fp32"),
    "chunked_dot_not_reset_per_row": (("dot_carried_over_rows",), ["4.4"], "carried into the rows after it: an "
                                                                          "accumulator set to zero once"),
    "chunked_g_without_offset": (("g_without_chunk_offset",), ["4.4"], "with g read at the row's first 4096 columns "
                                                                       "in every chunk"),
    "saves_y_not_x": (("saved_tensor_swapped",), ["4.6"], "your backward (TritonRMSNorm.backward) passes y as "
                                                          "rmsnorm_bwd_kernel's x_ptr, where rmsnorm_backward called "
                                                          "directly passes x"),
    # rmsnorm_backward's own check of g's shape refuses what the Function passes it: an error raised on the host,
    # charged in every part whose case it stops (the handout's rule), each message naming the Function's call
    "saved_in_another_order": ((), ["4.1", "4.2", "4.3", "4.4", "4.5", "4.6"],
                               "but rmsnorm_backward runs when called directly: look at how TritonRMSNorm.backward"),
    "y_times_rms": (("y_times_rms",), ["1"], "multiplied by the RMS instead of divided by it"),
    "dot_over_block": (("dot_over_block",), ["2"], "the dot product divided by the block's 128 lanes"),
    "dot_without_g": (("dot_without_g",), ["2"], "g is missing from the dot product"),
    "second_term_sign": (("second_term_sign",), ["2"], "the second term has the wrong sign"),
    "dot_not_summed": (("dot_not_summed",), ["2"], "the sum over the row is missing"),
    "g_left_out_of_first_term": (("g_missing_first_term",), ["2"], "g is missing from the first term"),
    "dg_with_g": (("dg_with_g",), ["3", "9"], "g should not be in dg"),
    "dy_rows_by_n": (("dy_rows_by_n",), ["4.3"], "it matches dy read with its rows N = 80 elements apart"),
    "backward_grid_misses_rows": (("rows_not_stored_bwd",), ["2", "9"], "the backward's grid misses some rows"),
    "y_not_reshaped": ((), ["4.2"], "RuntimeError: Mismatch in shape"),
    "dx_on_the_host": (("dx_not_from_kernels",), ["2", "9"], "your backward returned dx without any kernel storing it"),
    "dg_on_the_host": (("dg_not_from_kernels",), ["3", "9"], "your backward returned dg without any kernel storing"),
    "r_on_the_host": (("r_not_from_kernels",), ["1"], "your forward returned r without any kernel storing it"),
    "no_dg_returned": (("no_dg",), ["4.6"], "g.grad is None after backward"),
    "no_dg_from_backward": (("no_dg_backward",), ["3", "9"], "rmsnorm_backward must return (dx, dg)"),
    "y_store_misses_last_column": (("elements_not_stored_fwd",), ["1"], "y[0:37, 99] from rmsnorm_forward was never "
                                                                        "written"),
    "dx_store_misses_last_column": (("elements_not_stored_bwd",), ["2", "9"], "dx[0:37, 99] from rmsnorm_backward "
                                                                             "was never written"),
    "r_as_column": (("output_shape", "no_r_saved"), ["4.6"], "(256, 1) fp32"),
    # the backward's own check refuses r of x's batch shape: the shape is the cause, 4.6's, not 4.2's crash
    "r_with_batch_shape": (("output_shape",), ["4.6"], "The cause: the r your forward saved has shape (5, 7)"),
    # a Triton 2 name Triton 3 keeps in libdevice: a compile rule, the kernel run with libdevice's function
    "triton_2_name": (("compile_rule",), ["1"], "Triton has no tl.math.fast_powf either"),
    # a formula no cause explains, the kernels' traffic and launches the reference's: only then "check the formula"
    # (unnamed, it is charged wherever it shows: nothing ties the wrong y of one part's inputs to another's)
    # a wrong value no known formula explains is the formula's (item 1's, item 2's), where the 4.x parts see it too
    "unknown_formula": (("formula_fwd",), ["1"], "Most rows are off, by far: check the formula, y = x·r·g"),
    "unknown_dx_formula": (("formula_bwd",), ["2"], "check the formula"),
    # outside the formula: the Function's contract, charged once in 4.6 whatever the inputs
    "backward_returns_dx_for_g": (("gradient_count",), ["4.6"], "the one at index 0 (the gradient of x) has another "
                                                                "shape than x"),
    "eps_gets_gradient": (("gradient_count",), ["4.6"], "eps is a Python float, not a tensor"),
    "save_for_backward_twice": (("saved_tensors",), ["4.6"], "ctx.save_for_backward keeps the tensors of its last "
                                                             "call only"),
    # layouts and dtypes, each in its part
    "view_not_reshape": (("x_cols_adjacent",), ["4.3"], "this x's columns are 2 elements apart"),
    "dy_viewed_as_it_is": (("dy_cols_adjacent",), ["4.3"], "this dy's columns are 2 elements apart"),
    # r in x's dtype holds r rounded: the dtype is charged (4.6), not the values (4.1)
    "r_in_x_dtype": (("output_dtype",), ["4.6"], "r from rmsnorm_forward has dtype float16"),
    "r_stored_in_16_bits": (("r_rounded",), ["1"], "it matches the right r rounded to fp16"),
    # r rounded to x's dtype shows only on 16-bit inputs: 4.1's
    "r_stored_in_x_dtype": (("r_rounded", "r_rounded_bf16"), ["4.1"], "it matches the right r rounded to fp16"),
    "partial_dg_in_g_dtype": (("partial_dtype",), ["4.6"], "your partial dg buffer (dg_partial_ptr of "
                                                           "rmsnorm_bwd_kernel"),
    # addresses: programs that share rows race and leave others unstored, one fault, item 1's (not item 5's or 8's)
    "program_id_axis_1": (("rows_not_stored_fwd",), ["1"], "programs that store the same rows"),
    "backward_program_id_axis_1": (("rows_not_stored_bwd",), ["2", "9"], "the backward's grid misses some rows"),
    # the overlap is a race where two programs store one row, and at the drawn shape, where their stores miss each
    # other, a second load of the next program's first row: item 6 charges that load, since a race may not excuse
    # an unfused backward's loads (a file could add one to a two-pass backward and trade item 6 for item 8)
    "row_share_one_too_wide": (("race",), ["6", "8", "9"], "your backward loaded x 1.1 times per element"),
    "rows_not_scaled_by_block": (("rows_not_stored_fwd",), ["1"], "programs that store the same rows"),
    # the changed x makes every autograd step's dx wrong: the write's mistake, not a formula's
    "y_written_into_x": (("input_modified",), ["4.6"], "your code wrote into x"),
    # rows never stored: item 7's "no dx stored" and a g-only step's dg over some rows are those rows too
    "row_loop_one_tile_short": (("rows_not_stored_bwd",), ["2", "9"], "the backward's grid misses some rows"),
    "chunk_loop_stops_a_chunk_early": (("sum_stops_early",), ["4.4"], "all but the row's last 4096 columns"),
    # traffic
    "dx_stored_twice": ((), ["6", "9"], "your backward stored dx 2.0 times per element"),
    # Triton's compile rules: run as written, charged once in the first part whose outputs the kernel made
    "int_grid": (("compile_rule",), ["1"], "the grid must be a tuple"),
    "block_n_not_power_of_2": (("compile_rule",), ["1"], "the number of elements must be a power of 2"),
    "loop_carried_scalar": (("compile_rule",), ["4.4"], "the loop carries `sq`, which is a scalar before the loop"),
    "r_stored_as_column": (("compile_rule",), ["1"], "tl.store of a value of shape [64, 1] through pointers of "
                                                     "shape [64]"),
    "helper_without_jit": (("compile_rule",), ["2", "9"], "bwd_tile is a Python function, which Triton cannot "
                                                          "compile"),
    "block_not_constexpr": (("compile_rule",), ["2", "9"],
                            f"dg_sum_kernel line {_line_of('acc = tl.zeros((BLOCK_P,')}: block shape must be a "
                            "compile-time constant"),
    # a long row's last chunk masked as the first: a crash that only 4.4's rows of N = 20001 reach, in the forward
    # alone and through autograd (the forward's kernel), or through autograd only (the backward's)
    "chunk_mask_from_the_first_chunk": ((), ["4.4"], "x_ptr[3, 20001:20480] are past the end of x_ptr"),
    "chunk_mask_from_the_first_chunk_bwd": ((), ["4.4"], "your backward failed for x of shape (2, 20001) fp32"),
    # the Function's flags read the other way round: only 4.6's steps with one input requiring grad show it
    "needs_input_grad_swapped": (("needs_input_grad",), ["4.6"], "x.grad is None after y.backward(dy) for x of shape "
                                                                 "(16, 64) fp32 (only x requires grad, g does not)"),
    # a loop-carried accumulator whose dtype changes for a 16-bit g only: charged once, in 4.1, whose cases it breaks
    "dg_accumulator_in_g_dtype": (("compile_rule",), ["4.1"], "the loop carries `dg`, which is of tl.float16 before "
                                                              "the loop and of tl.float32 inside it"),
}
# The hanging ones cost every part their job's time-out reaches; tests/test_autograder_corpus.py grades that.
NOT_GRADED_HERE = {"endless_loop", "endless_chunk_loop"}
CPU_PARTS = [p.number for i in rubric.ITEMS if not i.gpu_only for p in i.graded()]
NOT_DIAGNOSED = {"r_from_forward",           # the diagnosis replaces it with the cause of the wrong r
                 "masked_nan"}               # replaced by what the output is with those lanes read as 0.0
# correct code: nothing charged, nothing noted
HARMLESS = {"mask_without_other_kept_out", "dx_allocated_like_dy2", "strided_x_copied_on_host",
            "needs_input_grad_honoured",
            "nan_check_on_the_host",     # a check whose result reaches no output: item 10's time on a GPU, no point

            "g_loaded_twice",            # twice per program of 4 rows: no more often than once per row
            "r_recomputed_by_the_function"}  # the forward's kernel run again in the backward for r: right, and fused


def test_every_mistake_has_its_expected_charge():
    assert set(CHARGED) | NOT_GRADED_HERE | HARMLESS == set(EDITS)


def test_every_cause_the_rubric_owns_is_made_by_a_mistake():
    made = {c for causes, _, _ in CHARGED.values() for c in causes}
    assert set(rubric.CAUSE_OWNERS) - NOT_DIAGNOSED == made - rubric.FIRST_FINDER, set(rubric.CAUSE_OWNERS) ^ made
    assert rubric.FIRST_FINDER <= made and not rubric.FIRST_FINDER & set(rubric.CAUSE_OWNERS)


EACH_S = 300                # one grading's limit: a stuck one fails its own test


class Graded(dict):
    """{mistake: its verdicts} (grade_in_process), each read as its test asks for it."""

    def __init__(self, pool):
        super().__init__()
        self.pool = pool

    def __missing__(self, name):
        self[name] = self.pool.verdict(name)
        return self[name]

    def items(self):
        return [(n, self[n]) for n in self.pool.futures]


# the mistakes each test reads, besides its own parameter: the gradings a run of some tests starts
NEEDS = {"test_check_the_formula_is_said_only_when_the_launches_and_the_traffic_are_the_references": "all",
         "test_masked_lanes_right_as_zeros_cost_only_their_rule_once_and_the_other_parts_say_so":
             ["mask_without_other"],
         "test_masked_lanes_wrong_even_as_zeros_are_charged_as_the_wrong_output_and_named":
             ["mask_without_other_and_mean_over_block"],
         "test_a_part_that_keeps_its_points_says_where_the_mistake_was_charged": ["eps_left_out_of_backward"],
         "test_the_hidden_tests_report_the_same_verdicts": []}


@pytest.fixture(scope="module")
def graded(request, tmp_path_factory):
    """The verdicts of the mistakes the selected tests read: each grading starts at once (two at a time) and is
    waited for by the test that reads it, within EACH_S; `-k NAME` grades that mistake alone."""
    wanted = []
    for item in request.session.items:
        if item.module is not request.module:
            continue
        needs = NEEDS.get(item.originalname, [])
        wanted += [*CHARGED, *HARMLESS] if needs == "all" else needs
        if hasattr(item, "callspec") and "name" in item.callspec.params:
            wanted.append(item.callspec.params["name"])
    d = tmp_path_factory.mktemp("graded")
    pool = Pool(each_s=EACH_S)
    try:
        for name in dict.fromkeys(wanted):
            path = d / name / "rmsnorm.py"
            path.parent.mkdir()
            path.write_text(mistake(name))
            pool.start(name, path)
        yield Graded(pool)
    finally:
        pool.close()


@pytest.mark.parametrize("name", list(CHARGED))
def test_a_mistake_costs_points_in_the_part_that_owns_its_cause(graded, name):
    causes, parts, words = CHARGED[name]
    got = graded[name]
    failed = [p for p in CPU_PARTS if p in got["failed"]]
    assert failed == parts, {p: got["failed"][p][:300] for p in failed}
    assert words in got["failed"][parts[0]], got["failed"][parts[0]]
    seen = {c for cs in got["causes"].values() for c in cs}
    assert set(causes) <= seen, seen
    for cause in causes:
        owner = parts[0] if cause in rubric.FIRST_FINDER else rubric.CAUSE_OWNERS[cause]
        if owner in parts:                      # charged where the rubric says; the others keep their points
            assert cause in got["causes"][owner]


LAUNCHES = textwrap.dedent("""
    import importlib.util, json, sys
    import torch
    import mini_triton
    spec = importlib.util.spec_from_file_location("submission", sys.argv[1])
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    torch.manual_seed(0)
    x, g, dy = torch.randn(256, 128), torch.randn(128), torch.randn(256, 128)
    with mini_triton.record() as rec:
        y, r = m.rmsnorm_forward(x, g)
        m.rmsnorm_backward(dy, x, g, r.float())
    roles = {t.data_ptr(): k for k, t in dict(x=x, g=g, dy=dy, y=y, r=r).items()}
    print(json.dumps([[L.kernel, list(L.grid), sorted([roles.get(a.data_ptr, "other"), a.loaded, a.stored]
                                                      for a in L.args.values())] for L in rec.launches]))
""")


def launches(path) -> list:
    """Each launch of rmsnorm_forward and rmsnorm_backward on (256, 128) fp32: its kernel, grid, and what it
    loaded and stored through each argument, by role."""
    out = subprocess.run([sys.executable, "-c", LAUNCHES, str(path)], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "MINI_TRITON": "1"}, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_check_the_formula_is_said_only_when_the_launches_and_the_traffic_are_the_references(graded, tmp_path):
    """A wrong address, grid, loop or launch is named for what it is: a mistake whose feedback ends in "check the
    formula" launched the reference's kernels on the reference's grid, and each moved what the reference's did."""
    said = sorted(n for n, v in graded.items() if any("check the formula" in m for m in v["failed"].values()))
    assert "unknown_formula" in said, said
    want = launches(SOLUTION)
    for name in said:
        path = tmp_path / name / "rmsnorm.py"
        path.parent.mkdir()
        path.write_text(mistake(name))
        assert launches(path) == want, name


@pytest.mark.parametrize("name", sorted(HARMLESS))
def test_correct_code_written_another_way_costs_nothing(graded, name):
    assert graded[name]["failed"] == {} and not any(graded[name]["notes"].values()), graded[name]


def test_masked_lanes_right_as_zeros_cost_only_their_rule_once_and_the_other_parts_say_so(graded):
    notes = [n for ns in graded["mask_without_other"]["notes"].values() for n in ns]
    assert notes and all("charged once, in part 4.5" in n for n in notes), notes
    assert "Triton documents those lanes as undefined" in graded["mask_without_other"]["failed"]["4.5"]


def test_masked_lanes_wrong_even_as_zeros_are_charged_as_the_wrong_output_and_named(graded):
    """The forward's mean over the block is wrong with those lanes read as 0.0 too: item 1 charges the formula
    and names the lanes after it; 4.1-4.4, whose dx is right for the r the forward saved, charge nothing."""
    got = graded["mask_without_other_and_mean_over_block"]
    assert "other=0.0" in got["failed"]["1"] and "mean of x² over the block" in got["failed"]["1"]
    assert not {"4.1", "4.2", "4.3", "4.4"} & set(got["failed"]), got["failed"]


def test_a_part_that_keeps_its_points_says_where_the_mistake_was_charged(graded):
    notes = [n for ns in graded["eps_left_out_of_backward"]["notes"].values() for n in ns]
    assert any("that mistake is charged once, in part 4.5" in n for n in notes), notes


@pytest.mark.usefixtures("sandbox_accounts")          # grades through the sandbox (conftest.py)
def test_the_hidden_tests_report_the_same_verdicts(graded, tmp_path):
    """`make grade`'s path (the hidden tests, results.json) fails exactly the parts the verdicts fail; a race
    is recorded by the judge's simulator there too, and charged once (a judge that raised it failed 2-6)."""
    for name in ("eps_left_out", "y_on_the_host", "dg_into_one_row"):
        sub = tmp_path / name / "rmsnorm.py"
        sub.parent.mkdir()
        sub.write_text(mistake(name))
        res = grade.grade(sub, tmp_path / f"{name}.json")
        by_part = {t["number"]: t for t in res["tests"]}
        failed = [p for p in CPU_PARTS if by_part[p]["status"] == "failed"]
        assert failed == CHARGED[name][1], {p: by_part[p]["output"][:300] for p in failed}
        kept = [by_part[p]["output"] for p in CPU_PARTS if by_part[p]["status"] == "passed" and by_part[p]["output"]]
        if name == "y_on_the_host":
            assert any("charged once, in part 1" in k for k in kept), kept
