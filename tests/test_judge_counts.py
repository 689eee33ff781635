"""What items 6 and 9 make of a backward's scratch buffers, from launch records as the job reports them
(autograder/job/wire/phases.launch_records: every count in elements of the case's dtype, by bytes)."""
import pytest

from autograder.judge import counts

M, N = 256, 128


def launch(programs, **args):
    """A launch record: each argument {"dtype", "stored", "loaded", "atomics", "numel"} of a scratch buffer."""
    out = {}
    for i, (name, a) in enumerate(args.items()):
        out[name] = {"dtype": "tl.float32", "loaded": 0, "stored": 0, "atomics": 0, "numel": 0, "span": 0,
                     "distinct": 0, "storage": 1000 + i, "roles": [], "role": None, **a}
    return {"kernel": "bwd", "programs": programs, "args": out}


@pytest.mark.parametrize("what, launches", [
    # the lecture's M x N partial buffer: each contribution stored once, read back once by the sum
    ("the lecture's buffer", [launch(M, p={"stored": M * N, "numel": M * N, "distinct": M * N}),
                              launch(1, p={"loaded": M * N, "numel": M * N, "distinct": M * N})]),
    # a deterministic integer sum built by atomics: 32 programs add N int64 values each (two words apiece)
    ("an int64 sum by atomics", [launch(32, acc={"dtype": "tl.int64", "stored": 2 * 32 * N, "loaded": 2 * 32 * N,
                                                 "atomics": 2 * 32 * N, "numel": 2 * N, "distinct": 2 * N})]),
    # Triton's tutorial: locks and first-visit counters, a few accesses a row, beside a partial buffer
    ("locks beside partial rows", [launch(M, p={"stored": M * N, "loaded": M * N - 16 * N, "numel": 16 * N,
                                                "distinct": 16 * N},
                                          lock={"dtype": "tl.int32", "stored": 3 * M, "loaded": 4 * M,
                                                "atomics": 3 * M, "numel": 32, "distinct": 32})]),
])
def test_honest_scratch_is_no_extra_pass(what, launches):
    assert counts.scratch_problem(launches, M, N) is None, what


@pytest.mark.parametrize("dtype", ["tl.float32", "tl.int32"])
def test_a_second_m_by_n_pass_through_scratch_is_one_in_any_dtype(dtype):
    """An extra M x N buffer written by one kernel and read by the next, as fp32 or as int32 words, with as many
    programs that do nothing as anyone likes."""
    launches = [launch(M + 8192, p={"dtype": dtype, "stored": M * N, "numel": M * N, "distinct": M * N},
                       q={"dtype": dtype, "stored": M * N, "numel": M * N, "distinct": M * N})]
    assert "stored 65536 elements into scratch" in counts.scratch_problem(launches, M, N)


def io_launch(x_loaded, x_distinct):
    """A backward launch that loads x ``x_loaded`` times over ``x_distinct`` elements, and moves dy and dx once."""
    return [launch(32, x={"roles": ["x"], "loaded": x_loaded, "distinct": x_distinct, "numel": M * N},
                   dy={"roles": ["dy"], "loaded": M * N, "distinct": M * N, "numel": M * N},
                   dx={"roles": ["dx"], "stored": M * N, "distinct": M * N, "numel": M * N})]


@pytest.mark.parametrize("x_loaded, x_distinct, kind, words", [
    (2 * M * N, M * N, "repeat", "loaded x 2.0 times per element"),               # a second pass over x
    (3 * M * N // 2, M * N // 2, "repeat", "loaded x 3.0 times per element"),     # more than one pass in all
    (M * N, M * N // 2, "coverage", "for only 16384 of the 32768 elements, some of them 2.0 times"),   # an address
    (M * N // 2, M * N // 2, "coverage", "for only 16384 of the 32768 elements"),
])
def test_elements_loaded_twice_while_others_never_are_an_address_not_a_second_pass(x_loaded, x_distinct, kind,
                                                                                      words):
    """One tile's rows loaded twice and another's never, in no more loads than one pass: the index that picks the
    rows (a prefetch of the tile the program holds, say) is wrong; its cause is the rows never stored, not fusion."""
    problems = counts.backward_io_problems(io_launch(x_loaded, x_distinct), M, N)
    assert [(k, words in m) for k, m in problems] == [(kind, True)], problems
