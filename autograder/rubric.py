"""The rubric: every graded item, its parts and their points, in one place.

The hidden tests take their numbers and weights from here (one test per graded
part), `make grade` prints its table from here, and a test in `make check`
compares the handout's points table with this file.

Policy for item 10 (GPU speed): it is graded only where CUDA is present (the
course GPU machine, ``make grade-all``). Without a GPU its parts are left out of
results.json and its top-level output says ``GPU_NOTE``; Gradescope's CPU run is
therefore out of 90 points (+5 extra credit, shown as extra credit: a test out
of 0 that adds its points when earned), and the TA adds item 10 from the GPU
regrade (docs/ta-guide.md).
"""
from __future__ import annotations

import dataclasses

GPU_NOTE = ("Item 10 (GPU speed, 10 points) is graded after the deadline on the course GPU machine; "
            "it is not part of this score.")


@dataclasses.dataclass(frozen=True)
class Part:
    number: str
    name: str
    points: float


@dataclasses.dataclass(frozen=True)
class Item:
    number: str
    name: str
    points: float
    what: str
    extra_credit: bool = False
    gpu_only: bool = False
    parts: tuple = ()

    def graded(self) -> tuple:
        """The parts a test grades: the item itself when it has no parts."""
        return self.parts or (Part(self.number, self.name, self.points),)


ITEMS = (
    Item("1", "Forward correctness", 15, "y and r match a float64 reference on 2-D, contiguous fp32 rows"),
    Item("2", "Backward dx", 15, "dx from rmsnorm_backward, given the reference r, matches a float64 reference"),
    Item("3", "Backward dg", 10, "dg from rmsnorm_backward, given the reference r, matches a float64 reference"),
    Item("4", "Robustness", 15, "the cases real callers hit", parts=(
        Part("4.1", "fp16 and bf16 inputs", 3),
        Part("4.2", "3-D and 4-D inputs", 2),
        Part("4.3", "non-contiguous x and dy", 2),
        Part("4.4", "N not a power of two, N = 1, large N, M = 1", 3),
        Part("4.5", "eps values, all-zero rows and masked-off lanes", 2),
        Part("4.6", "inputs untouched, g.grad, r saved, dtypes, shapes", 2),
        Part("4.7", "identical results when run twice", 1),
    )),
    Item("5", "Fused forward", 10, "on the simulator: x loaded once, y and r stored once, g at most once per row or "
                                   "per program"),
    Item("6", "Fused backward", 10, "on the simulator: x and dy loaded once, dx stored once"),
    Item("7", "Work happens in kernels", 10, "kernels launch in forward and backward and write y and dx; "
                                             "no value a host-side op computed from an M·N activation reaches "
                                             "a kernel or an output"),
    Item("8", "Race-free", 5, "the simulator's race detector finds no data race"),
    Item("9", "Improved dg reduction", 5, "a fused backward whose dg reduction is deterministic (no float "
                                          "atomics, no locks), with a partial buffer of at most M·N/8 elements; "
                                          "dg exact", extra_credit=True),
    Item("10", "GPU speed", 10, "GPU time of the kernels at (16384, 4096), as a percentage of copy bandwidth, "
                                "on the course GPU machine",
         gpu_only=True, parts=(
             Part("10.1", "forward fp32", 2.5),
             Part("10.2", "forward bf16", 2.5),
             Part("10.3", "forward+backward fp32", 2.5),
             Part("10.4", "forward+backward bf16", 2.5),
         )),
)

# Item 10: the percentage of copy bandwidth each part's kernels need, in GPU time (a CUDA graph's
# replay of the step on secret inputs; a step that cannot be captured earns nothing), calibrated on an H200
# (docs/perf.md) with the solution and slow variants graded 3-4 times each: GPU time varies by
# 1-2 points between gradings. The forward parts fail an unfused forward (11-28%) and blocks fixed
# too small (60-64%); the solution reaches 95-97%. The forward+backward parts fail a backward left
# to PyTorch (7-16%) and pass the lecture's M x N partial-dg backward (38-68%: improving it is item
# 9's extra credit) and an unfused forward with a fused backward (19-41%: it loses the forward parts).
COPY_NEEDED = {"10.1": 75, "10.2": 75, "10.3": 30, "10.4": 15}

# Which part owns each cause the diagnosis can name (starter/rmsnorm_testkit/diagnose.py's CAUSES, and the
# grader's own): one mistake costs points once, in its part. A part that finds a cause another part owns
# and charged keeps its points (judge/), as the handout's grading section says.
CAUSE_OWNERS = {
    # item 1, the forward: its formula, its r, its grid
    **dict.fromkeys(("mean_over_block", "sum_not_mean", "r_is_rms", "y_without_g", "y_times_rms", "r_not_stored",
                     "rows_not_stored_fwd", "elements_not_stored_fwd", "masked_nan", "y_not_from_kernels",
                     "r_not_from_kernels", "r_from_forward", "wrong_tensor_fwd", "unread_fwd", "r_rounded",
                     "r_rounded_bf16", "held_in_16_bits_fwd"), "1"),
    # item 2, dx: the backward's formula and grid
    **dict.fromkeys(("r_squared", "dot_not_divided", "dot_over_block", "g_missing_dx", "g_missing_first_term",
                     "dot_without_g", "dot_carried_over_rows", "dot_not_summed",
                     "second_term_missing", "second_term_sign", "rows_not_stored_bwd", "elements_not_stored_bwd",
                     "dx_not_from_kernels", "wrong_tensor_bwd", "unread_bwd", "r_read_from_g", "held_in_16_bits_bwd"),
                    "2"),
    # item 3, dg
    **dict.fromkeys(("dg_without_r", "dg_with_g", "dg_some_rows", "dg_not_from_kernels", "old_memory_nan",
                     "no_dg_backward", "dg_not_stored"), "3"),
    "sum_in_16_bits": "4.1",                        # 16-bit inputs: a sum of squares kept in 16 bits
    **dict.fromkeys(("x_rows_by_n", "dy_rows_by_n", "x_cols_adjacent", "dy_cols_adjacent"), "4.3"),          # strides
    # rows longer than one block
    **dict.fromkeys(("columns_not_stored", "sum_stops_early", "g_without_chunk_offset"), "4.4"),
    **dict.fromkeys(("eps_forgotten", "eps_outside_sqrt", "eps_ignored", "eps_over_n", "eps_forgotten_in_r3",
                     "padding_nan", "r_recomputed_without_eps", "r_recomputed", "lanes_undefined"), "4.5"),
    **dict.fromkeys(("dy_modified", "input_modified", "no_dg", "no_r_saved", "output_dtype", "output_shape",
                     "gradient_count", "ctx_tensors", "saved_tensors", "saved_tensor_swapped", "partial_dtype",
                     "needs_input_grad", "output_type"), "4.6"),
    "order_dependent": "4.7",
    "race": "8",
    # a wrong y, r or dx that matches no known wrong formula: the formula's, items 1 and 2 (OWNER_ONLY)
    "formula_fwd": "1",
    "formula_bwd": "2",
}
# Causes no one part owns: charged once, in the first part (in the rubric's order) that finds them. A compile rule
# broken (a kernel Triton refuses, run as written on the simulator) costs the first part whose outputs that kernel
# made: item 1 for the forward's kernels, 2 for the backward's, 4.4 for a path only long rows take.
FIRST_FINDER = frozenset({"compile_rule"})
# A cause its owner may find under a kindred name: NaN that masked-off rows make (1/sqrt(0)) is eps's doing
# when the owner of eps finds eps missing.
# So are elements never stored: which pattern they make (whole rows, some elements) depends on the input; and rows
# the backward's grid misses show as rows its kernels never loaded where dg is the only gradient checked (a step
# where x does not require grad: 4.6's).
# And eps used the wrong way looks like eps left out where the case's eps is too small to tell (1e-6 beside rows of
# mean square 1), or like the default eps where the caller's is near it (eps/N for eps = 0.5 and N = 20001).
_EPS = ("eps_forgotten", "eps_outside_sqrt", "eps_ignored", "eps_over_n", "eps_forgotten_in_r3",
        "r_recomputed_without_eps", "r_recomputed")
_UNSTORED_FWD = ("r_not_stored", "rows_not_stored_fwd", "elements_not_stored_fwd")
_UNSTORED_BWD = ("rows_not_stored_bwd", "elements_not_stored_bwd")
CAUSE_FAMILIES = {"padding_nan": _EPS, **{k: _EPS for k in _EPS},
                  **{k: _UNSTORED_FWD for k in _UNSTORED_FWD}, **{k: _UNSTORED_BWD for k in _UNSTORED_BWD},
                  "unread_bwd": _UNSTORED_BWD,
                  # a backward that returned before its launches: item 3 sees dg filled on the host, and no row of
                  # dx stored (judge/outputs._nothing_launched); a step where only g requires grad sees the dg alone
                  "dg_not_from_kernels": ("rows_not_stored_bwd",)}
# Rules of the whole submission rather than of one case's output: charged in their owner wherever they show
# (a tl.load without other= whose lanes, read as 0.0, give the right output: at most 4.5's 2 points, once).
SUBMISSION_RULES = frozenset({"lanes_undefined"})
# The formulas' items own the values of their outputs: where item 1's own cases find y or r wrong (item 2's dx), for
# a cause item 1 owns, every cause of item 1's that another part finds is charged in item 1, under whatever name it
# shows there (a 15-bit r is "held in 16 bits" where many elements are off, and matches no formula where a few are).
# A wrong y (or dx) that matches no known formula is item 1's (item 2's) only so: where item 1 does not find y or r
# wrong, each part that finds it charges it (two parts' own mistakes look alike). No file gains by it: the 4.x
# parts it excuses are worth 14 points, item 1 or 2 alone 15. Keyed by cause: the outputs its item owns.
OWNER_ONLY = {"formula_fwd": ("y", "r"), "formula_bwd": ("dx",)}
# A cause that is another's mistake where that other's owner finds it: fp32 inputs held in 16 bits somewhere (item
# 1's) and the sum of squares of 16-bit inputs kept in 16 bits (4.1's) are one .to(tl.float16) where the file has
# one; charged in item 1 where item 1 finds its own. No file gains by it: 4.1 is worth less than item 1. And dg
# summed over some rows only, where item 2 finds rows the backward's grid never stored, is those rows (a step
# where only g requires grad shows no dx).
SHOWN_AS = {"sum_in_16_bits": "held_in_16_bits_fwd", "dg_some_rows": "rows_not_stored_bwd"}
# Parts whose requirements are the point: extra credit is earned, so another part's charge does not excuse it.
NEVER_EXCUSED = frozenset({"9"})

# The items of right outputs: a submission that fails any of their parts is not ranked on the speed leaderboard
# (a fast kernel that computes the wrong thing is not fast).
RANKED_ONLY_IF = ("1", "2", "3", "4")

BY_NUMBER = {i.number: i for i in ITEMS}
PARTS = {p.number: p for i in ITEMS for p in i.graded()}


def item_of(number: str) -> Item:
    """The item a part number belongs to ("4.3" -> item 4)."""
    return BY_NUMBER[number.split(".")[0]]


def total(include_extra_credit: bool = False, gpu: bool = True) -> float:
    return sum(i.points for i in ITEMS
               if (include_extra_credit or not i.extra_credit) and (gpu or not i.gpu_only))
