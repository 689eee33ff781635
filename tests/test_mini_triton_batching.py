"""Batched and program-by-program runs agree (mini_triton/README.md, "Speed").

The simulator runs many programs of a launch in one pass over the kernel body; with
``set_batching(False)`` (``MINI_TRITON_BATCH=0``) it runs them one at a time, as Triton's
interpreter does. Each submission of the project's mistake corpus (tests/mistakes.py,
tests/corpus/) and calibration set (tests/calibration/) runs its forward and backward under
``mini_triton.record()`` both ways; the outputs, the errors, the traffic of every launch and
argument, and the verdicts of the checks (races, undefined lanes, order dependence, elements
never stored) must be the same.
"""
import math
import sys

import pytest
import torch

import mini_triton
from conftest import ROOT

sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "corpus"), str(ROOT / "starter" / "tests")]
import mistakes  # noqa: E402
from rmsnorm_check import load_impl  # noqa: E402
from variants import EDITS as VARIANTS  # noqa: E402
from variants import variant  # noqa: E402

HANGS = {"endless_loop", "endless_chunk_loop"}        # these never return, either way
CORPUS = {**{f"mistake_{n}": (lambda n=n: mistakes.mistake(n)) for n in mistakes.EDITS if n not in HANGS},
          **{f"variant_{n}": (lambda n=n: variant(n)) for n in VARIANTS},
          **{f"corpus_{p.stem}": p.read_text for p in sorted((ROOT / "tests" / "corpus").glob("*.py"))
             if p.stem != "variants"},
          **{f"calibration_{p.stem}": p.read_text for p in sorted((ROOT / "tests" / "calibration").glob("*.py"))}}

# (rows, columns, dtype, a view of every other column): one program per row and many rows per program,
# N not a power of two, 16-bit inputs, a strided view
CASES = [(37, 100, torch.float32, False), (6, 513, torch.float32, False), (33, 200, torch.bfloat16, False),
         (24, 80, torch.float32, True)]
# A row longer than one tile (the solution's chunked path) costs 0.3 s one program at a time: for the
# submissions written apart from the solution, and the mistakes made in its chunked path
LONG_ROW = (1, 16500, torch.float32, False)
LONG_ROW_FOR = {"mistake_no_chunked_path", "mistake_block_capped_at_4096", "mistake_partial_dg_not_zeroed"}
# Outputs of a launch that shuffles its programs: a float sum in another order differs by a few ulps
# of its largest terms, so an element that cancels to near 0 needs an absolute tolerance on that scale
ORDER_DEPENDENT_RTOL = 1e-5


def _inputs(M, N, dtype, strided):
    gen = torch.Generator().manual_seed(M * N)
    x = torch.randn(M, 2 * N if strided else N, generator=gen).to(dtype)
    dy = torch.randn(M, 2 * N if strided else N, generator=gen).to(dtype)
    if strided:
        x, dy = x[:, ::2], dy[:, ::2]
    return x, torch.randn(N, generator=gen).to(dtype), dy


def _launches(rec):
    """What the checks and the counts said of each launch."""
    out = []
    for ls in rec.launches:
        args = {n: (a.loaded, a.stored, a.atomics, a.loaded_bytes, a.stored_bytes,
                    a.distinct("load"), a.distinct("store"), a.distinct("any")) for n, a in ls.args.items()}
        out.append((ls.kernel, ls.grid, ls.programs, str(ls.race), ls.undefined_lanes,
                    ls.order_dependent, args))
    return out


def _step(fn, rec, *args):
    """(outputs, stored masks, the error's type and message) of one call."""
    try:
        outs = fn(*args)
    except Exception as e:                           # noqa: BLE001 -- the verdict is what is compared
        return None, None, f"{type(e).__name__}: {e}"
    outs = tuple(o for o in outs if isinstance(o, torch.Tensor))
    return outs, tuple(rec.stored_mask(o) for o in outs), None


def observe(mod, cases) -> list:
    """Everything the simulator says of ``mod``'s forward and backward on each case."""
    seen = []
    for M, N, dtype, strided in cases:
        x, g, dy = _inputs(M, N, dtype, strided)
        with mini_triton.record(host_ops=True, poison=True) as rec:
            fwd = _step(mod.rmsnorm_forward, rec, x, g)
            bwd = _step(mod.rmsnorm_backward, rec, dy, x, g, fwd[0][1]) if fwd[0] and len(fwd[0]) > 1 else None
        seen.append(((M, N, dtype, strided), fwd, bwd, _launches(rec)))
    return seen


def _same_tensor(a, b, loose):
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not loose:                                      # the same values, NaN where the other has NaN
        return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num()) \
            if a.is_floating_point() else torch.equal(a, b)
    a, b = a.double(), b.double()
    scale = float(a.nan_to_num(0, 0, 0).abs().max()) if a.numel() else 0.0
    return torch.allclose(a, b, rtol=ORDER_DEPENDENT_RTOL, atol=ORDER_DEPENDENT_RTOL * max(scale, 0.1),
                          equal_nan=True)


def _same_step(a, b, loose, what):
    (outs_a, masks_a, err_a), (outs_b, masks_b, err_b) = a, b
    assert err_a == err_b, f"{what}: the error differs:\n batched:  {err_a}\n one by one: {err_b}"
    if outs_a is None:
        return
    assert len(outs_a) == len(outs_b), what
    for i, (ta, tb) in enumerate(zip(outs_a, outs_b)):
        assert _same_tensor(ta, tb, loose), f"{what}: output {i} differs"
    for i, (ma, mb) in enumerate(zip(masks_a, masks_b)):
        assert torch.equal(ma, mb), f"{what}: the elements of output {i} that kernels stored differ"


@pytest.fixture(autouse=True)
def _races_recorded():
    old = mini_triton.get_race_mode()
    mini_triton.set_race_mode("record")                  # as the grader runs: a race is noted, not raised
    yield
    mini_triton.set_race_mode(old)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_batched_and_program_by_program_runs_agree(name, tmp_path):
    path = tmp_path / "rmsnorm.py"
    path.write_text(CORPUS[name]())
    mod = load_impl(path, backend="mini_triton", name=f"batching_{name}")
    cases = CASES + [LONG_ROW] if name in LONG_ROW_FOR or not name.startswith("mistake_") else CASES
    assert mini_triton.get_batching()
    batched = observe(mod, cases)
    old = mini_triton.set_batching(False)
    try:
        one_by_one = observe(mod, cases)
    finally:
        mini_triton.set_batching(old)
    for (case, fwd_a, bwd_a, launches_a), (_, fwd_b, bwd_b, launches_b) in zip(batched, one_by_one):
        loose = any(ls[5] for ls in launches_a + launches_b)       # programs shuffled: float sums reorder
        _same_step(fwd_a, fwd_b, loose, f"{name} forward {case}")
        assert (bwd_a is None) == (bwd_b is None), f"{name} {case}"
        if bwd_a is not None:
            _same_step(bwd_a, bwd_b, loose, f"{name} backward {case}")
        assert launches_a == launches_b, f"{name} {case}: the launches' records differ"


@pytest.fixture
def chunk_sizes(monkeypatch) -> list:
    """The number of programs of each chunk the simulator runs, in order, while the test runs."""
    from mini_triton import runtime
    sizes = []
    chunk = runtime.Chunk

    def spy(launch, pids, **kw):
        sizes.append(int(pids.numel()))
        return chunk(launch, pids, **kw)
    monkeypatch.setattr(runtime, "Chunk", spy)
    return sizes


def test_program_by_program_runs_one_program_per_chunk(chunk_sizes):
    """The switch does what it says: with batching off, every chunk holds one program."""
    tl = mini_triton.language

    @mini_triton.jit
    def double(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)

    x = torch.ones(1000)
    double[(math.ceil(1000 / 64),)](x, 1000, BLOCK=64)
    assert max(chunk_sizes) > 1
    chunk_sizes.clear()
    old = mini_triton.set_batching(False)
    try:
        double[(math.ceil(1000 / 64),)](x, 1000, BLOCK=64)
    finally:
        mini_triton.set_batching(old)
    assert chunk_sizes == [1] * 16 and torch.equal(x, torch.full((1000,), 4.0))


@pytest.mark.parametrize("loop", ["python_range", "tl_range"])
def test_a_grid_stride_loop_runs_programs_with_equal_trip_counts_together(chunk_sizes, loop):
    """Triton compiles Python's range in a kernel as tl.range: a loop whose start differs from program to program
    (range(pid, n_rows, programs)) runs the programs that make the same number of trips as one chunk, each with its
    own loop variable, and the results are the program-by-program run's."""
    tl = mini_triton.language

    @mini_triton.jit
    def row_sums(x_ptr, out_ptr, n_rows, n_cols, BLOCK: tl.constexpr, PY: tl.constexpr):
        pid, cols = tl.program_id(0), tl.arange(0, BLOCK)
        rows = range(pid, n_rows, tl.num_programs(0)) if PY else tl.range(pid, n_rows, tl.num_programs(0))
        for row in rows:
            tl.store(out_ptr + row, tl.sum(tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)))

    x = torch.randn(37, 100)
    out = torch.zeros(37)
    row_sums[(8,)](x, out, 37, 100, BLOCK=128, PY=loop == "python_range")
    assert chunk_sizes == [8, 5, 3]      # the chunk of 8 splits once: 5 programs make 5 trips, 3 make 4 (not 8 of 1)
    assert torch.allclose(out, x.sum(1), atol=1e-5)
    one = torch.zeros(37)
    old = mini_triton.set_batching(False)
    try:
        row_sums[(8,)](x, one, 37, 100, BLOCK=128, PY=loop == "python_range")
    finally:
        mini_triton.set_batching(old)
    assert torch.equal(out, one)
