"""Each common mistake, made in the solution (tests/mistakes.py), fails the public tests first where its
cause is, with a message that names the cause in a student's terms."""
import os
import re
import subprocess
import sys
import time

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests"))
from mistakes import EDITS, mistake  # noqa: E402

TIME_LIMIT_S = 5            # the public tests' per-test limit, shortened for the endless loop

# mistake -> (the first failing public test, words its message must hold)
EXPECTED = {
    "no_mask": ("test_part_a.py::test_one_row_per_program",
                ["OutOfBoundsError", "load_tile line", "x_ptr[36, 100:128]", "past the end of x_ptr",
                 "a tensor of shape (37, 100)", "Columns 100 and up", "mask them"]),
    "mask_without_other": ("test_part_a.py::test_one_row_per_program",
                           ["r from rmsnorm_fwd_kernel differs", "is nan", "without other=", "other=0.0"]),
    "row_stride_is_n": ("test_part_a.py::test_strided_rows",
                        ["from rmsnorm_fwd_kernel differs", "rows are 160 elements apart", "row stride 160, N 80",
                         "step from row to row by x_row_stride, not n_cols"]),
    "dg_into_one_row": ("test_part_b.py::test_one_row_per_program",
                        ["DataRaceError", "both write dg_partial_ptr[0,", "per-program partial buffer"]),
    "x_loaded_twice": ("test_part_a.py::test_forward_reads_x_once_and_writes_y_once",
                       ["your forward loaded x 2.0 times per element", "a fused kernel reads x once"]),
    "endless_loop": ("test_part_a.py::test_one_row_per_program",
                     [f"timed out after {TIME_LIMIT_S} s in rmsnorm_fwd_kernel, line", "(`while i < n_cols:`)",
                      "an infinite loop"]),
    "endless_chunk_loop": ("test_part_a.py::test_long_rows_in_chunks[3x300-fp32]",
                           [f"timed out after {TIME_LIMIT_S} s in ", "rmsnorm_fwd_kernel, line",
                            "inside the loop of line", "(`while start < n_cols:", "an infinite loop"]),
    "squares_summed_in_16_bits": ("test_part_a.py::test_half_precision[fp16]",
                                  ["r from rmsnorm_fwd_kernel differs", "held to fp32's tolerance",
                                   "a sum of squares kept in fp16 rounds at every step",
                                   "tl.load(...).to(tl.float32)"]),
    "partial_dg_not_zeroed": ("test_part_c.py::test_backward_long_rows",
                              ["dg (g.grad after rmsnorm(x, g).backward(dy)) differs", "allocate that buffer with "
                               "torch.zeros"]),
    "no_chunked_path": ("test_part_a.py::test_long_rows_in_chunks[3x300-fp32]",
                        ["from rmsnorm_fwd_kernel differs", "SINGLE_PASS=False", "chunked path",
                         "do not fit in a program's registers", "loop over each row in chunks of BLOCK_N"]),
    "y_on_the_host": ("test_part_c.py::test_work_happens_in_kernels[fp32]",
                      ["a host-side `mul` read all 16384 elements of x in your forward (fp32 x), at rmsnorm.py "
                       "line", "(`y = (x2.float() * r[:, None] * g.float()).to(x.dtype)`)",
                       "the kernels must do the work on M·N data"]),
    "r_recomputed_on_the_host": ("test_part_c.py::test_work_happens_in_kernels[fp32]",
                                 ["a host-side `pow` read all 16384 elements of x in your backward (fp32 x)"]),
    "dx_written_into_dy": ("test_part_c.py::test_backward_long_rows",
                           ["your backward (y.backward(dy) through rmsnorm) wrote into dy: dy[0, 0] was",
                            "store dx in a tensor of its own"]),
    "dg_by_atomic_add": ("test_part_c.py::test_backward_gives_the_same_dg_in_every_run",
                         ["tl.atomic_add on dg_partial_ptr", "in your backward", "part 4.7",
                          "Give each program its own row of dg_partial"]),
    "r_squared_in_dx": ("test_part_b.py::test_one_row_per_program",
                        ["dx from rmsnorm_bwd_kernel differs", "Every row is off, not a few lanes? Then check the "
                         "formula", "r cubed where x itself appears"]),
    "one_partial_row_per_input_row": ("test_part_d.py::test_partial_dg_buffer_holds_at_most_an_eighth_of_x",
                                      ["rmsnorm_bwd_kernel stores into dg_partial_ptr, a buffer of 32768 elements",
                                       "at most M·N/8 = 4096 elements", "_num_programs_bwd"]),
    "nan_check_on_the_host": ("test_part_c.py::test_work_happens_in_kernels[fp32]",
                              ["a host-side `isnan` read all 16384 elements of x in your forward (fp32 x)",
                               "(`if torch.isnan(x).any().item():`)", "makes Python wait for the GPU"]),
}


def test_every_mistake_has_an_expectation():
    assert set(EXPECTED) == set(EDITS)


def first_failure(impl, tmp_path, **extra_env):
    """(test id, message, seconds) of the first failing public test on ``impl``."""
    env = dict(os.environ, RMSNORM_IMPL=str(impl), RMSNORM_TEST_TIMEOUT=str(TIME_LIMIT_S), MINI_TRITON="1",
               COLUMNS="200", **extra_env)
    env.pop("TRITON_INTERPRET", None)
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "--tb=short", "-p", "no:cacheprovider",
                        str(ROOT / "starter" / "tests")], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    seconds = time.monotonic() - start
    summary = p.stdout.split("fix the first one first", 1)
    assert p.returncode == 1 and len(summary) == 2, p.stdout[-3000:] + p.stderr[-2000:]
    m = re.search(r"^FAILED \S+/tests/(\S+)\n((?:    .*\n?)+)", summary[1], flags=re.M)
    assert m, summary[1]
    message = " ".join(line.strip() for line in m.group(2).splitlines())
    return m.group(1), message, seconds


@pytest.mark.parametrize("name", sorted(EDITS))
def test_the_first_failure_names_the_mistake(name, tmp_path):
    impl = tmp_path / "rmsnorm.py"
    impl.write_text(mistake(name))
    test, message, seconds = first_failure(impl, tmp_path)
    want_test, words = EXPECTED[name]
    assert test == want_test, (test, message)
    for w in words:
        assert w in message, (w, message)
    if name == "endless_loop":
        assert seconds < TIME_LIMIT_S + 20, f"the time-out took {seconds:.0f} s"


def test_the_time_limit_without_sigalrm_gives_the_same_message(tmp_path):
    """Windows has no SIGALRM: a timer thread raises the time-out in the test's thread instead."""
    impl = tmp_path / "rmsnorm.py"
    impl.write_text(mistake("endless_loop"))
    test, message, seconds = first_failure(impl, tmp_path, RMSNORM_TEST_TIMER="thread")
    assert test == EXPECTED["endless_loop"][0]
    for w in EXPECTED["endless_loop"][1]:
        assert w in message, (w, message)
    assert seconds < TIME_LIMIT_S + 20


def test_the_solution_passes_every_public_test(tmp_path):
    env = dict(os.environ, RMSNORM_IMPL=str(ROOT / "solution" / "rmsnorm.py"), MINI_TRITON="1")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(ROOT / "starter" / "tests")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and " passed" in p.stdout and "failed" not in p.stdout, p.stdout[-3000:]
