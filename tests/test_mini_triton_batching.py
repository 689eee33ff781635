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
from rmsnorm_testkit.compare import load_impl  # noqa: E402
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
        assert _same_tensor(ta, tb, loose) if loose is not None else ta.shape == tb.shape, f"{what}: output {i} differs"
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
        if any(ls[3] != "None" for ls in launches_a + launches_b):
            loose = None        # a race: what it stores depends on how programs interleave (a lost update), not values
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


def test_programs_that_take_turns_by_their_id_run_one_by_one_after_the_second_turn(chunk_sizes):
    """`for i in range(P): if i == pid:` (a serial update of a shared row, each program in its turn): the first
    turn splits the chunk in two, one program and the rest; the rest, split again the same way, runs one program at a
    time (each chunk reran the whole kernel up to its turn: 16 programs cost 31 passes, about 2.5 times the CPU),
    and the result is the program-by-program run's."""
    tl = mini_triton.language

    @mini_triton.jit
    def in_turns(x_ptr, out_ptr, n_cols, P, BLOCK: tl.constexpr):
        pid, cols = tl.program_id(0), tl.arange(0, BLOCK)
        row = tl.load(x_ptr + pid * n_cols + cols, mask=cols < n_cols, other=0.0)
        for i in range(0, P):
            if i == pid:
                tl.store(out_ptr + cols, tl.load(out_ptr + cols, mask=cols < n_cols) + row, mask=cols < n_cols)

    x = torch.randn(16, 100)
    out = torch.zeros(100)
    in_turns[(16,)](x, out, 100, 16, BLOCK=128)
    assert chunk_sizes == [16, 1, 15] + [1] * 15, chunk_sizes
    one = torch.zeros(100)
    old = mini_triton.set_batching(False)
    try:
        in_turns[(16,)](x, one, 100, 16, BLOCK=128)
    finally:
        mini_triton.set_batching(old)
    assert torch.equal(out, one) and torch.allclose(out, x.sum(0), atol=1e-5)


def test_programs_peeled_off_at_two_different_lines_still_run_in_groups(chunk_sizes):
    """Only the same line peeling one program off again is a kernel taking turns: `if pid == 0:` and then
    `if pid == 1:` split the chunk into groups (1, 15, then 1 and 14), never into its 16 programs."""
    tl = mini_triton.language

    @mini_triton.jit
    def two_firsts(x_ptr, n, BLOCK: tl.constexpr):
        pid, offs = tl.program_id(0), tl.arange(0, BLOCK)
        if pid == 0:
            tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)
        if pid == 1:
            tl.store(x_ptr + n + offs, tl.load(x_ptr + n + offs, mask=offs < n) + 2.0, mask=offs < n)

    x = torch.zeros(200)
    two_firsts[(16,)](x, 100, BLOCK=128)
    assert chunk_sizes == [16, 1, 15, 1, 14], chunk_sizes
    assert torch.equal(x, torch.cat([torch.ones(100), torch.full((100,), 2.0)]))


def _in_place_kernel(branchy: bool):
    tl = mini_triton.language

    @mini_triton.jit
    def bump(x_ptr, old_ptr, n, BLOCK: tl.constexpr, BRANCHY: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs)                      # every lane in bounds: a strided view of x
        if BRANCHY:
            if tl.program_id(0) >= 0:                  # a test of a block: the chunk keeps an undo log
                tl.store(x_ptr + offs, x + 1.0)
        else:
            tl.store(x_ptr + offs, x + 1.0)
        tl.store(old_ptr + offs, x)                    # the value loaded before the store above
    return bump


@pytest.mark.parametrize("branchy", [False, True], ids=["straight_line", "may_diverge"])
def test_a_load_keeps_its_value_when_the_program_then_stores_over_it(branchy):
    """A load is a copy, as a program's registers are: where a chunk writes memory it loaded, a later use of the
    loaded block still sees the old values (loads of memory a launch never writes are views, runtime.Chunk)."""
    x = torch.arange(4096, dtype=torch.float32)
    old = torch.empty(4096)
    _in_place_kernel(branchy)[(64,)](x, old, 4096, BLOCK=64, BRANCHY=branchy)
    assert torch.equal(old, torch.arange(4096, dtype=torch.float32))
    assert torch.equal(x, torch.arange(4096, dtype=torch.float32) + 1)


def test_a_load_keeps_its_value_when_another_argument_shares_its_memory():
    """Two arguments that are views of one tensor: a store through one is a write into what the other loaded."""
    tl = mini_triton.language

    @mini_triton.jit
    def shift(src_ptr, dst_ptr, keep_ptr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(src_ptr + offs)
        tl.store(dst_ptr + offs, v * 10.0)
        tl.store(keep_ptr + offs, v)

    base = torch.arange(2048, dtype=torch.float32)
    keep = torch.empty(1024)
    shift[(64,)](base[:1024], base[:1024], keep, BLOCK=16)
    assert torch.equal(keep, torch.arange(1024, dtype=torch.float32))
    assert torch.equal(base[:1024], torch.arange(1024, dtype=torch.float32) * 10)


def test_a_launch_that_writes_nothing_it_reads_loads_views(monkeypatch):
    """The fast path is taken: after its first chunk, a launch whose stores never touch what it loads takes views."""
    from mini_triton import runtime
    views = []
    chunk = runtime.Chunk

    def spy(launch, pids, **kw):
        views.append(kw.get("views"))
        return chunk(launch, pids, **kw)
    monkeypatch.setattr(runtime, "Chunk", spy)
    x, y = torch.randn(512, 256), torch.empty(512, 256)
    kernels_for_tests().row_rmsnorm_fwd[(512,)](x, torch.ones(256), y, torch.empty(512), 256, 256, 1e-5, BLOCK=256)
    assert views[0] is False and all(views[1:]) and len(views) > 1
    views.clear()
    tl = mini_triton.language

    @mini_triton.jit
    def double(x_ptr, BLOCK: tl.constexpr):                 # straight-line code that writes what it loads
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs) * 2.0)
    double[(64,)](torch.zeros(4096), BLOCK=64)
    assert not any(views) and len(views) > 1


def kernels_for_tests():
    import kernels_for_tests as module
    return module


@pytest.mark.parametrize("case", ["plain", "masked", "bf16_output", "used_again", "broadcast_row", "undone"])
def test_a_stored_product_is_the_product_computed_apart(case):
    """A float +, -, * or / waits for its first use, and a tl.store computes it straight into memory: every way of
    storing it (a mask, a narrower output dtype, a value used again after the store, a value the same for every
    program, a chunk undone when its programs diverge) gives what computing it first gives."""
    tl = mini_triton.language

    @mini_triton.jit
    def scale(x_ptr, g_ptr, y_ptr, z_ptr, n_cols, MASKED: tl.constexpr, AGAIN: tl.constexpr, ROW: tl.constexpr,
              UNDONE: tl.constexpr, BLOCK: tl.constexpr):
        row, cols = tl.program_id(0), tl.arange(0, BLOCK)
        g = tl.load(g_ptr + cols)
        x = tl.load(x_ptr + row * BLOCK + cols)
        v = g * 3.0 if ROW else x * g / 7.0 - 1.0
        if UNDONE:
            if row % 2 == 0:                           # the chunk's programs disagree: it is undone, then rerun
                v = v + 0.5
        if MASKED:
            tl.store(y_ptr + row * BLOCK + cols, v, mask=cols < n_cols)
        else:
            tl.store(y_ptr + row * BLOCK + cols, v)
        if AGAIN:
            tl.store(z_ptr + row * BLOCK + cols, v * 2.0)

    M, B = 96, 128
    x, g = torch.randn(M, B), torch.randn(B)
    out_dtype = torch.bfloat16 if case == "bf16_output" else torch.float32
    y, z = torch.zeros(M, B, dtype=out_dtype), torch.zeros(M, B)
    scale[(M,)](x, g, y, z, 100, MASKED=case == "masked", AGAIN=case == "used_again", ROW=case == "broadcast_row",
                UNDONE=case == "undone", BLOCK=B)
    want = (g * 3.0).expand(M, B) if case == "broadcast_row" else x * g / 7.0 - 1.0
    if case == "undone":
        want = torch.where((torch.arange(M) % 2 == 0)[:, None], want + 0.5, want)
    if case == "masked":
        want = torch.where(torch.arange(B) < 100, want, 0.0)
    assert torch.equal(y, want.to(out_dtype))
    if case == "used_again":
        assert torch.equal(z, want * 2.0)


def test_a_stored_product_is_computed_into_the_output(monkeypatch):
    """The fast path is taken: the forward's y = x * r * g is computed into y, not copied there."""
    from mini_triton import memory
    taken = []
    real = memory._store_pending
    monkeypatch.setattr(memory, "_store_pending", lambda *a: taken.append(real(*a)) or taken[-1])
    x, y, r = torch.randn(64, 256), torch.empty(64, 256), torch.empty(64)
    kernels_for_tests().row_rmsnorm_fwd[(64,)](x, torch.ones(256), y, r, 256, 256, 1e-5, BLOCK=256)
    # per chunk of programs (one, or two when the chunk size is not yet known): y, then r (a value per program)
    assert taken in ([True, False], [True, False] * 2), taken
    assert torch.allclose(y, x * torch.rsqrt((x * x).mean(1, keepdim=True) + 1e-5), rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
def test_programs_waiting_for_a_lock_run_turn_by_turn(chunk_sizes):
    """Programs of a chunk that spin on one lock (Triton's layer-norm backward) get it one after another: after the
    first pass, the chunk runs as one chunk per turn, each of which finds its locks free (not two reruns per turn),
    and the sums are those of one program at a time."""
    import kernels_for_tests
    x, partial, locks = torch.randn(128, 100), torch.zeros(8, 100), torch.zeros(8, dtype=torch.int32)
    kernels_for_tests.locked_partial_sum_kernel[(128,)](x, partial, locks, 100, GROUPS=8, BLOCK=128)
    torch.testing.assert_close(partial, torch.stack([x[g::8].sum(0) for g in range(8)]))
    # the first chunk (16 programs, 2 per lock): itself, then 2 turns, the first run twice (it loaded partial as a
    # view, then stored into it: its loads must copy); the other 112 (14 per lock): itself, then 14 turns
    assert chunk_sizes == [16, 8, 8, 8, 112] + [8] * 14
    assert not locks.any()


@pytest.mark.parametrize("other", [None, -1.0])
def test_a_mask_that_keeps_a_box_of_lanes_reads_and_writes_that_box_as_a_view(monkeypatch, other):
    """A block wider than the row (cols < n_cols), whose masked-off lanes of the last row reach past the tensor:
    the lanes the mask keeps are copied as one strided view (no gather or scatter of each lane), the others hold
    `other` (or NaN, noted as undefined), and the launch's counts are the lanes' own."""
    from mini_triton import memory
    tl = mini_triton.language

    @mini_triton.jit
    def copy_rows(x_ptr, y_ptr, z_ptr, n_cols, OTHER: tl.constexpr, BLOCK: tl.constexpr):
        row, cols = tl.program_id(0), tl.arange(0, BLOCK)
        if OTHER is None:
            x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols)
        else:
            x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=OTHER)
        tl.store(y_ptr + row * n_cols + cols, x + 1.0, mask=cols < n_cols)
        tl.store(z_ptr + row * BLOCK + cols, x)

    def no_lane_by_lane(*a, **k):
        raise AssertionError("a lane-by-lane scatter")
    monkeypatch.setattr(memory, "_scatter", no_lane_by_lane)
    x, y, z = torch.randn(37, 100), torch.zeros(37, 100), torch.zeros(37, 128)
    with mini_triton.record() as rec:
        copy_rows[(37,)](x, y, z, 100, OTHER=other, BLOCK=128)
    assert torch.equal(y, x + 1)
    assert torch.equal(z[:, :100], x)
    tail = z[:, 100:]
    assert torch.isnan(tail).all() if other is None else torch.equal(tail, torch.full_like(tail, other))
    args = rec.launches[0].args
    assert args["x_ptr"].loaded == 3700 and args["y_ptr"].stored == 3700 and args["z_ptr"].stored == 37 * 128
    assert (rec.launches[0].undefined_lanes is not None) == (other is None)


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
@pytest.mark.parametrize("masked", [False, True], ids=["whole_rows", "cols_lt_n"])
def test_a_shuffled_launch_stores_its_rows_through_one_view(monkeypatch, masked):
    """A launch that runs in a shuffled order (a float atomic_add makes it order-dependent) still stores each
    program's row where it belongs, through one strided view of the rows in sorted order (no lane-by-lane
    scatter), and a chunk that is undone puts every row back."""
    from mini_triton import memory
    tl = mini_triton.language

    @mini_triton.jit
    def rows_and_total(x_ptr, y_ptr, total_ptr, n_cols, MASKED: tl.constexpr, BLOCK: tl.constexpr):
        row, cols = tl.program_id(0), tl.arange(0, BLOCK)
        keep = cols < n_cols if MASKED else cols < BLOCK
        x = tl.load(x_ptr + row * n_cols + cols, mask=keep, other=0.0)
        tl.store(y_ptr + row * n_cols + cols, x * 2.0 + row, mask=keep)
        tl.atomic_add(total_ptr, tl.sum(x, axis=0))

    def no_lane_by_lane(*a, **k):
        raise AssertionError("a lane-by-lane scatter")
    monkeypatch.setattr(memory, "_scatter", no_lane_by_lane)
    n = 100 if masked else 128
    x, y, total = torch.randn(64, n), torch.zeros(64, n), torch.zeros(1)
    for _ in range(2):                       # the second launch runs shuffled from its first chunk
        y.zero_()
        rows_and_total[(64,)](x, y, total, n, MASKED=masked, BLOCK=128)
        assert torch.equal(y, x * 2 + torch.arange(64.0)[:, None])
    torch.testing.assert_close(total, 2 * x.sum().reshape(1), rtol=1e-4, atol=1e-3)
