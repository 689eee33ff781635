"""Every GPU-bug check fires on a buggy kernel, with a message that locates the bug,
and stays silent on correct kernels.

About 530 lines, one section per check (bounds, shapes and control flow, races, device_assert and overflow,
tracebacks, Triton's compile rules): each section's kernels are small and written beside the tests that launch
them, which a split would separate."""
import linecache
import warnings

import pytest
import torch

import mini_triton as triton
from backends import kernels

tl = triton.language
K = kernels("mini")


@triton.jit
def copy_unmasked(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))          # no mask: the tail is out of bounds


@triton.jit
def load_before_start(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK) - 2
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.load(x_ptr + offs, mask=offs < 100, other=0.0))


@triton.jit
def store_past_end(out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.zeros((BLOCK,), tl.float32) + 7.0, mask=offs < n)


@triton.jit
def partial_row_per_row(part_ptr, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)                   # meant: one row of the partial buffer per *program*
    row = tl.program_id(0) * 2                   # but indexed by the program's first input row
    tl.store(part_ptr + row * n_cols + cols, tl.zeros((BLOCK,), tl.float32), mask=cols < n_cols)


# -- bounds ---------------------------------------------------------------------
def test_rows_past_a_small_buffer_suggest_checking_the_row_index_too():
    """A partial buffer has fewer rows than x: masking with n_rows would not be the fix."""
    part = torch.zeros(3, 16)
    with pytest.raises(triton.OutOfBoundsError) as e:
        partial_row_per_row[(3,)](part, 16, BLOCK=16)
    msg = " ".join(str(e.value).split())
    assert "part_ptr[4, 0:16]" in msg and "Rows 3 and up do not exist (part_ptr has 3 rows)" in msg, msg
    assert "check how the row index is computed" in msg, msg


@triton.jit
def dy_rows_by_x_stride(x_ptr, dy_ptr, out_ptr, x_row_stride, dy_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * x_row_stride + cols)
    tl.store(out_ptr + row * n_cols + cols, x * tl.load(dy_ptr + row * x_row_stride + cols))


@triton.jit
def tile_of_rows_unmasked(x_ptr, out_ptr, n_rows, n_cols, BLOCK_M: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs = rows[:, None] * n_cols + tl.arange(0, BLOCK)[None, :]
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))


def test_rows_past_the_end_are_explained_with_what_the_kernel_has():
    """One row per program and no row count (part (b)'s kernel): the hint names the tensor's own stride parameter, not
    a mask with a row count the kernel does not take; a kernel that takes one is told to mask with it."""
    x, dy, out = torch.randn(6, 16)[:, :8], torch.randn(6, 8), torch.zeros(6, 8)
    with pytest.raises(triton.OutOfBoundsError) as e:
        dy_rows_by_x_stride[(6,)](x, dy, out, x.stride(0), dy.stride(0), 8, BLOCK=8)
    msg = " ".join(str(e.value).split())
    assert "each program's row comes from its program id" in msg and "dy_ptr's offset uses its own row stride " \
        "(dy_row_stride)" in msg and "n_rows" not in msg, msg
    with pytest.raises(triton.OutOfBoundsError) as e:
        tile_of_rows_unmasked[(2,)](torch.randn(6, 8), torch.zeros(6, 8), 6, 8, BLOCK_M=4, BLOCK=8)
    assert "mask them (rows < n_rows)" in " ".join(str(e.value).split()), str(e.value)


def test_unmasked_tail_load_is_out_of_bounds_with_full_location():
    x, out = torch.randn(100), torch.empty(100)
    with pytest.raises(triton.OutOfBoundsError) as e:
        copy_unmasked[(1,)](x, out, 100, BLOCK=128)
    msg = str(e.value)
    assert "out-of-bounds load" in msg and "copy_unmasked" in msg and "program 0" in msg
    assert "line" in msg and "x_ptr" in msg and "100–127" in msg and "past the end" in msg


def test_out_of_bounds_names_the_offending_program_of_many():
    x, out = torch.randn(300), torch.empty(300)
    with pytest.raises(triton.OutOfBoundsError, match=r"program 2: offsets 300–383"):
        copy_unmasked[(3,)](x, out, 300, BLOCK=128)


def test_negative_offsets_are_errors():
    x, out = torch.randn(100), torch.empty(128)
    with pytest.raises(triton.OutOfBoundsError, match=r"offsets -2, -1 are before the start of x_ptr"):
        load_before_start[(1,)](x, out, BLOCK=128)


def test_rejected_store_modifies_no_memory():
    out = torch.zeros(64)
    neighbour = torch.zeros(200)
    with pytest.raises(triton.OutOfBoundsError, match="out-of-bounds store"):
        store_past_end[(1,)](out, 100, BLOCK=128)
    assert torch.equal(out, torch.zeros(64)) and torch.equal(neighbour, torch.zeros(200))


def test_bounds_cover_only_the_view_not_the_whole_storage():
    base = torch.randn(300)
    x = base[100:200]                     # a view: offsets 100.. belong to someone else
    out = torch.empty(100)
    with pytest.raises(triton.OutOfBoundsError, match="x_ptr"):
        copy_unmasked[(1,)](x, out, 100, BLOCK=128)


def test_masked_lanes_are_never_checked():
    x, y, out = torch.randn(100), torch.randn(100), torch.empty(100)
    K.add_kernel[(1,)](x, y, out, 100, BLOCK=128)
    torch.testing.assert_close(out, x + y)


def test_masked_load_without_other_is_poisoned_not_zero():
    @triton.jit
    def sum_without_other(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n), axis=0))
    out = torch.zeros(1)
    sum_without_other[(1,)](torch.ones(100), out, 100, BLOCK=128)
    assert torch.isnan(out).all(), "masked-off lanes must not silently read as 0"


def test_masked_integer_lanes_without_other_never_raise_where_they_are_not_stored():
    """A running count over a masked int load (a public cumsum kernel's shape): its masked lanes are added to
    and never stored. They read 0, as on NVIDIA's backend, and no int32 overflow is claimed."""
    @triton.jit
    def plus_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        v = tl.load(x_ptr + offs, mask=mask) + 1
        tl.store(out_ptr + offs, tl.cumsum(v, axis=0), mask=mask)
    x, out = torch.arange(100, dtype=torch.int32), torch.zeros(100, dtype=torch.int32)
    plus_one[(1,)](x, out, 100, BLOCK=128)
    assert torch.equal(out, torch.cumsum(x + 1, 0).to(torch.int32))


# -- shapes and control flow -------------------------------------------------------
def test_arange_must_have_power_of_two_length():
    @triton.jit
    def k(out_ptr, BLOCK: tl.constexpr):
        tl.store(out_ptr + tl.arange(0, BLOCK), 1.0)
    with pytest.raises(triton.CompilationError, match=r"100 elements.*power of 2"):
        k[(1,)](torch.empty(100), BLOCK=100)


def test_runtime_argument_cannot_set_a_shape():
    @triton.jit
    def k(out_ptr, n):
        tl.store(out_ptr + tl.arange(0, n), 1.0)
    with pytest.raises(triton.CompilationError, match="tl.constexpr"):
        k[(1,)](torch.empty(128), 128)


def test_python_if_on_a_block_is_an_error():
    @triton.jit
    def k(x_ptr, out_ptr, BLOCK: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, BLOCK))
        if x > 0:
            tl.store(out_ptr + tl.arange(0, BLOCK), x)
    with pytest.raises(triton.BlockTruthError, match=r"shape \[16\].*tl.where"):
        k[(1,)](torch.randn(16), torch.empty(16), BLOCK=16)


def test_if_on_a_scalar_is_fine():
    out = torch.zeros(1001)
    x = torch.randn(1000)
    K.first_program_kernel[(8,)](x, out, 1000, BLOCK=128)
    torch.testing.assert_close(out[:1000], x + 1)
    assert float(out[1000]) == 42.0


# -- races ------------------------------------------------------------------------
@triton.jit
def racy_column_sum(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    """Accumulates into out with a plain load + store: every program hits the same addresses."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    acc = tl.load(out_ptr + cols, mask=mask, other=0.0)
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    tl.store(out_ptr + cols, acc + x, mask=mask)


def test_store_store_race_names_tensor_index_and_both_programs():
    x, out = torch.randn(4, 10), torch.zeros(10)
    with pytest.raises(triton.DataRaceError) as e:
        racy_column_sum[(4,)](x, out, 10, BLOCK=16)
    msg = str(e.value)
    assert "racy_column_sum" in msg and "programs 0 and 1" in msg and "out_ptr[0]" in msg
    assert "per-program partial buffer" in msg and "order programs run" in msg


@triton.jit
def copy_rows_by_axis(x_ptr, y_ptr, n_cols, AXIS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(AXIS)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    tl.store(y_ptr + row * n_cols + cols, tl.load(x_ptr + row * n_cols + cols, mask=mask), mask=mask)


def test_a_race_says_when_every_program_got_0_from_an_axis_the_grid_does_not_spread():
    x = torch.randn(4, 10)
    with pytest.raises(triton.DataRaceError) as e:
        copy_rows_by_axis[(4,)](x, torch.empty(4, 10), 10, AXIS=1, BLOCK=16)
    assert "asks for tl.program_id(1), but the grid (4, 1) has one program along axis 1" in str(e.value)
    assert "tl.program_id(0) for a grid of one dimension" in str(e.value)
    y = torch.empty(4, 10)
    copy_rows_by_axis[(4,)](x, y, 10, AXIS=0, BLOCK=16)
    assert torch.equal(y, x)
    with pytest.raises(triton.DataRaceError) as e:           # a race of its own: nothing said of the axes
        racy_column_sum[(4,)](x, torch.zeros(10), 10, BLOCK=16)
    assert "tl.program_id(" not in str(e.value)


@triton.jit
def copy_rows_with_stride(x_ptr, y_ptr, n_cols, y_row_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask)
    tl.store(y_ptr + row * y_row_stride + cols, x, mask=mask)


def test_a_store_race_of_programs_less_than_a_row_apart_names_the_row_stride():
    x, y = torch.randn(4, 10), torch.empty(4, 10)
    with pytest.raises(triton.DataRaceError) as e:
        copy_rows_with_stride[(4,)](x, y, 10, y.stride(1), BLOCK=16)
    assert "Their first stores are 1 element apart, while y_ptr's rows are 10 elements apart" in str(e.value)
    assert "row stride (stride(0)), not by a column stride (stride(1))" in str(e.value)
    with pytest.raises(triton.DataRaceError) as e:           # every program at the same place: another mistake
        racy_column_sum[(4,)](x, torch.zeros(10), 10, BLOCK=16)
    assert "first stores are" not in str(e.value)
    copy_rows_with_stride[(4,)](x, y, 10, y.stride(0), BLOCK=16)
    assert torch.equal(y, x)


def test_load_of_another_programs_store_is_a_race():
    @triton.jit
    def shift(x_ptr, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs + 1, mask=offs + 1 < 4 * BLOCK, other=0.0)   # reads the next block's first
        tl.store(x_ptr + offs, v)
    with pytest.raises(triton.DataRaceError, match=r"program 0 reads x_ptr\[16\].*program 1 writes it"):
        shift[(4,)](torch.randn(64), BLOCK=16)


@triton.jit
def store_then_read_another_programs_row(buf_ptr, half_ptr, BLOCK: tl.constexpr):
    """Each program stores its own fp32 row; program 1 reads row 0 back through an fp16 view of the buffer."""
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    tl.store(buf_ptr + pid * BLOCK + offs, offs.to(tl.float32))
    if pid == 1:
        v = tl.load(half_ptr + offs)             # the first BLOCK halves: row 0's first BLOCK // 2 floats
        tl.store(buf_ptr + pid * BLOCK + offs, v.to(tl.float32))


def test_a_race_through_a_view_of_another_dtype_is_still_a_race():
    """fp32 stored by one program, read as fp16 by another: the same bytes, so the same race."""
    buf = torch.zeros(2, 16)
    with pytest.raises(triton.DataRaceError, match=r"program 1 reads half_ptr\[0, 0\].*program 0 writes it"):
        store_then_read_another_programs_row[(2,)](buf, buf.view(torch.float16), BLOCK=16)


def test_views_of_another_dtype_that_touch_other_bytes_do_not_race():
    buf = torch.zeros(2, 16)
    halves = buf.view(torch.float16)[1]          # row 1's bytes only, which program 1 itself writes
    store_then_read_another_programs_row[(2,)](buf, halves, BLOCK=16)


@pytest.mark.parametrize("sieve", ["python", "torch"])
def test_the_race_sieve_finds_the_same_races_over_few_programs_in_python_and_over_many_in_torch(sieve, monkeypatch):
    """Few programs' byte ranges are clustered in Python, many in torch (races.FEW): the same races either way."""
    from mini_triton import races
    if sieve == "torch":
        monkeypatch.setattr(races, "FEW", 0)
    with pytest.raises(triton.DataRaceError, match=r"programs 0 and 1"):
        racy_column_sum[(4,)](torch.randn(4, 10), torch.zeros(10), 10, BLOCK=16)
    buf = torch.zeros(2, 16)
    with pytest.raises(triton.DataRaceError, match=r"program 1 reads half_ptr\[0, 0\]"):
        store_then_read_another_programs_row[(2,)](buf, buf.view(torch.float16), BLOCK=16)
    store_then_read_another_programs_row[(2,)](buf, buf.view(torch.float16)[1], BLOCK=16)
    K.row_rmsnorm_fwd[(600,)](torch.randn(600, 8), torch.randn(8), torch.empty(600, 8), torch.empty(600), 8, 8,
                              1e-5, BLOCK=8)                     # adjacent rows, 600 programs: no race


def test_atomics_are_exempt_from_race_checks():
    x, out = torch.randint(0, 9, (1000,), dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    K.atomic_sum_kernel[(8,)](x, out, 1000, BLOCK=128)
    assert int(out) == int(x.sum())


@triton.jit
def add_by_load_and_xchg(out_ptr, x_ptr, N, BLOCK: tl.constexpr):
    """Each program adds its row into one shared row: a plain load, then atomic_xchg of the sum."""
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    old = tl.load(out_ptr + cols, mask=mask, other=0.0)
    tl.atomic_xchg(out_ptr + cols, old + tl.load(x_ptr + tl.program_id(0) * N + cols, mask=mask), mask=mask)


@triton.jit
def count_visits_under_a_lock(count_ptr, lock_ptr, seen_ptr):
    """Each program reads a counter plainly and sets it with atomic_xchg, both under one lock (the first-visit
    flag of Triton's layer-norm tutorial): the lock orders them."""
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    count = tl.load(count_ptr)
    tl.store(seen_ptr + tl.program_id(0), count)
    tl.atomic_xchg(count_ptr, count + 1)
    tl.atomic_xchg(lock_ptr, 0)


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
def test_a_plain_load_of_what_another_program_changes_with_an_atomic_is_a_race():
    with pytest.raises(triton.DataRaceError, match=r"reads out_ptr\[0\] .* without an atomic, while program \d+ "
                                                   r"changes it with an atomic"):
        add_by_load_and_xchg[(4,)](torch.zeros(8), torch.ones(4, 8), 8, BLOCK=8)


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
def test_a_recorded_race_and_order_dependence_name_their_buffer():
    """A lost update is one mistake: the grader charges its order dependence to the race, since both are out_ptr's."""
    triton.set_race_mode("record")
    try:
        with triton.record() as rec:
            add_by_load_and_xchg[(4,)](torch.zeros(8), torch.arange(32.0).reshape(4, 8), 8, BLOCK=8)
            count_visits_under_a_lock[(3,)](torch.zeros(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32),
                                            torch.zeros(3, dtype=torch.int32))
    finally:
        triton.set_race_mode("error")
    lost, locked = rec.launches
    assert lost.race and lost.race_on == ("out_ptr",) and lost.order_on == "out_ptr"
    assert lost.race_kind == "atomic load" and locked.race_kind is None
    assert locked.race is None and locked.race_on == () and locked.order_on == "lock_ptr"
    assert lost.as_dict()["race_on"] == ["out_ptr"] and locked.as_dict()["order_on"] == "lock_ptr"


@triton.jit
def atomics_and_a_store_masked_off(out_ptr, N, BLOCK: tl.constexpr):
    """Each program adds into one shared row with atomics, and reads it back; program 0 stores into it under a mask
    that is false in every lane (a store that moves nothing)."""
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    tl.atomic_add(out_ptr + cols, 1, mask=mask)
    seen = tl.load(out_ptr + cols, mask=mask, other=0)
    if tl.program_id(0) == 0:
        tl.store(out_ptr + cols, seen, mask=mask & (cols < 0))


def test_a_store_whose_every_lane_is_masked_off_is_no_write_to_the_race_check():
    """The check found the store's lanes empty and failed inside itself (an IndexError, charged to the kernel); with
    no lane stored, what remains is the plain load of what other programs change with atomics: that race."""
    with pytest.raises(triton.DataRaceError, match=r"reads out_ptr\[0\] .* changes it with an atomic"):
        atomics_and_a_store_masked_off[(4,)](torch.zeros(8, dtype=torch.int32), 8, BLOCK=8)


@triton.jit
def add_by_max_then_xchg_one_program_at_a_time(out_ptr, x_ptr, NP: tl.constexpr, N: tl.constexpr):
    """Each program adds its row into one shared row, reading it with atomic_max(-inf) and writing the sum with
    atomic_xchg, the programs taking turns (``if i == pid``): on a GPU they run at once and lose updates."""
    pid = tl.program_id(0)
    cols = tl.arange(0, N)
    for i in range(NP):
        if i == pid:
            old = tl.atomic_max(out_ptr + cols, float("-inf"))
            tl.atomic_xchg(out_ptr + cols, old + tl.load(x_ptr + pid * N + cols))


def test_programs_that_exchange_different_values_into_one_element_depend_on_their_order():
    with pytest.warns(triton.OrderDependenceWarning, match="tl.atomic_xchg of different values into one element"):
        add_by_max_then_xchg_one_program_at_a_time[(8,)](torch.zeros(8), torch.ones(8, 8), NP=8, N=8)


@triton.jit
def last_program_sums_rows_others_took_with_cas(part_ptr, out_ptr, NP: tl.constexpr, N: tl.constexpr):
    """Each program writes its row of partial sums with atomic_xchg, then runs a cas on it that never succeeds
    (NaN equals nothing); the last program reads every row with plain loads, waiting for no one: a race."""
    pid = tl.program_id(0)
    cols = tl.arange(0, N)
    tl.atomic_xchg(part_ptr + pid * N + cols, tl.full([N], 1.0, tl.float32))
    tl.atomic_cas(part_ptr + pid * N + cols, tl.full([N], float("nan"), tl.float32), tl.full([N], 0.0, tl.float32))
    if pid == NP - 1:
        acc = tl.zeros([N], dtype=tl.float32)
        for i in range(NP):
            acc += tl.load(part_ptr + i * N + cols)
        tl.store(out_ptr + cols, acc)


def test_a_cas_by_the_writers_does_not_excuse_another_programs_plain_read():
    """The plain access a cas excuses is its own program's (a lock word it releases, a cas loop's read): another
    program's plain read of elements the writers cas'd still races with their atomics."""
    with pytest.raises(triton.DataRaceError, match="atomic"):
        last_program_sums_rows_others_took_with_cas[(4,)](torch.zeros(4, 8), torch.zeros(8), NP=4, N=8)


@triton.jit
def add_rows(out_ptr, x_ptr, N: tl.constexpr, SHARED: tl.constexpr):
    """Each program atomic_adds its row of x into its own row of out, or (SHARED) all into row 0."""
    pid = tl.program_id(0)
    cols = tl.arange(0, N)
    tl.atomic_add(out_ptr + (0 if SHARED else pid) * N + cols, tl.load(x_ptr + pid * N + cols))


@pytest.mark.parametrize("shared", [False, True])
def test_a_float_atomic_add_depends_on_program_order_only_where_two_programs_add_into_one_element(shared):
    """One add per element (each program its own row of partial sums) arrives in one order only: deterministic,
    and no warning; several programs adding into one row is the order-dependent sum."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        add_rows[(8,)](torch.zeros(8, 16), torch.rand(8, 16), N=16, SHARED=shared)
    assert any(issubclass(w.category, triton.OrderDependenceWarning) for w in seen) == shared, \
        [str(w.message) for w in seen]


@triton.jit
def count_visits_released_by_a_store(count_ptr, lock_ptr, seen_ptr):
    """count_visits_under_a_lock, its lock given back by a plain store, as much lock code does."""
    while tl.atomic_cas(lock_ptr, 0, 1) == 1:
        pass
    count = tl.load(count_ptr)
    tl.store(seen_ptr + tl.program_id(0), count)
    tl.store(count_ptr, count + 1)
    tl.store(lock_ptr, 0)


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
def test_a_lock_given_back_by_a_plain_store_is_no_race():
    count, seen = torch.zeros(1, dtype=torch.int32), torch.full((5,), -1, dtype=torch.int32)
    count_visits_released_by_a_store[(5,)](count, torch.zeros(1, dtype=torch.int32), seen)
    assert int(count) == 5 and sorted(seen.tolist()) == [0, 1, 2, 3, 4]


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
def test_plain_and_atomic_accesses_under_one_lock_do_not_race():
    count, seen = torch.zeros(1, dtype=torch.int32), torch.full((5,), -1, dtype=torch.int32)
    count_visits_under_a_lock[(5,)](count, torch.zeros(1, dtype=torch.int32), seen)
    assert int(count) == 5 and sorted(seen.tolist()) == [0, 1, 2, 3, 4]


def test_race_mode_warn_reports_without_raising():
    x, out = torch.randn(4, 10), torch.zeros(10)
    triton.set_race_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            racy_column_sum[(4,)](x, out, 10, BLOCK=16)
        assert any(issubclass(i.category, triton.DataRaceWarning) for i in w)
    finally:
        triton.set_race_mode("error")


def test_same_program_load_then_store_is_not_a_race():
    @triton.jit
    def inplace_double(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)
    x = torch.randn(1000)
    ref = x * 2
    inplace_double[(8,)](x, 1000, BLOCK=128)
    torch.testing.assert_close(x, ref)


@pytest.mark.parametrize("M,N", [(37, 100), (64, 64)])
def test_correct_kernels_raise_no_false_alarm(M, N):
    x, g, dy = torch.randn(M, N), torch.randn(N), torch.randn(M, N)
    y, r = torch.empty(M, N), torch.empty(M)
    K.row_rmsnorm_fwd[(M,)](x, g, y, r, N, x.stride(0), 1e-5, BLOCK=triton.next_power_of_2(N))
    dx, dgp = torch.empty(M, N), torch.empty(M, N)
    K.row_rmsnorm_bwd[(M,)](x, g, dy, r, dx, dgp, N, x.stride(0), BLOCK=triton.next_power_of_2(N))
    out = torch.empty(M)
    K.persistent_rows_kernel[(5,)](x, out, M, N, BLOCK=triton.next_power_of_2(N))


# -- device_assert, overflow, unsupported features ----------------------------------
def test_device_assert_is_enforced_and_names_the_program():
    @triton.jit
    def k(x_ptr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.device_assert(tl.load(x_ptr + offs) >= 0, "x must be non-negative")
    x = torch.ones(64)
    k[(4,)](x, BLOCK=16)
    x[37] = -1
    with pytest.raises(triton.DeviceAssertionError, match=r"program 2, lane \[5\]: x must be non-negative"):
        k[(4,)](x, BLOCK=16)


def test_int32_offset_overflow_is_caught():
    @triton.jit
    def k(x_ptr, stride, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        tl.load(x_ptr + pid * stride + tl.arange(0, BLOCK))
    with pytest.raises(triton.Int32OverflowError, match="int32.*overflow.*int64"):
        k[(3,)](torch.empty(16), 2**30, BLOCK=16)


def test_unsupported_features_name_themselves():
    with pytest.raises(NotImplementedError, match="tl.make_block_ptr"):
        tl.make_block_ptr
    with pytest.raises(NotImplementedError, match=r"\*\*"):
        @triton.jit
        def k(x_ptr, BLOCK: tl.constexpr):
            tl.load(x_ptr + tl.arange(0, BLOCK)) ** 2
        k[(1,)](torch.ones(16), BLOCK=16)


def test_calling_a_kernel_without_a_grid_explains_the_launch_syntax():
    with pytest.raises(triton.CompilationError, match=r"add_kernel\[grid\]"):
        K.add_kernel(torch.ones(4), torch.ones(4), torch.ones(4), 4, BLOCK=4)


def test_cuda_or_non_tensor_arguments_are_rejected_clearly():
    with pytest.raises(TypeError, match="argument x_ptr has unsupported type list"):
        K.add_kernel[(1,)]([1.0], torch.ones(4), torch.ones(4), 4, BLOCK=4)


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
def test_accesses_under_one_lock_do_not_race_but_without_the_lock_they_do():
    x, locks = torch.randn(37, 100), torch.zeros(3, dtype=torch.int32)
    partial = torch.zeros(3, 100)
    K.locked_partial_sum_kernel[(37,)](x, partial, locks, 100, GROUPS=3, BLOCK=128)
    torch.testing.assert_close(partial, torch.stack([x[g::3].sum(0) for g in range(3)]))
    with pytest.raises(triton.DataRaceError, match=r"unlocked_partial_sum_kernel: programs 0 and 3 both write "
                                                   r"partial_ptr\[0, 0\]"):
        K.unlocked_partial_sum_kernel[(37,)](x, torch.zeros(3, 100), locks, 100, GROUPS=3, BLOCK=128)


def _column_sums(seed):
    """A float atomic_add of 64 rows into 256 columns, the simulator's schedule seeded."""
    from mini_triton import runtime
    runtime._GEN.manual_seed(seed)

    @triton.jit
    def atomic_column_sum(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        tl.atomic_add(out_ptr + cols, tl.load(x_ptr + tl.program_id(0) * N + cols))
    torch.manual_seed(0)
    x, out = torch.randn(64, 256), torch.zeros(256)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with triton.record() as rec:
            atomic_column_sum[(64,)](x, out, 256, BLOCK=256)
    return out, rec.launches[0], w


def test_float_atomic_sums_depend_on_the_order_programs_run_and_say_so():
    a, launch, w = _column_sums(1)
    b, _, _ = _column_sums(2)
    torch.testing.assert_close(a, b)                       # the same sums...
    assert not torch.equal(a, b)                           # ...but not the same last bits, as on a GPU
    assert launch.order_dependent.startswith("tl.atomic_add on out_ptr")
    assert any(issubclass(i.category, triton.OrderDependenceWarning) and "shuffled order" in str(i.message)
               for i in w)


def test_integer_atomics_and_plain_kernels_keep_program_order():
    x, out = torch.randint(0, 9, (1000,), dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    with triton.record() as rec:
        K.atomic_sum_kernel[(8,)](x, out, 1000, BLOCK=128)
    assert rec.launches[0].order_dependent is None and int(out) == int(x.sum())


@triton.jit
def exchange_into_one_element(out_ptr, SAME: tl.constexpr):
    pid = tl.program_id(0)
    value = 0 if SAME else pid + 1
    tl.atomic_xchg(out_ptr, value)


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
@pytest.mark.parametrize("same", [False, True])
def test_atomic_xchg_of_different_values_into_one_element_depends_on_the_order(same):
    """The last program to arrive wins: its value is whichever the order gives. Giving one value back (a lock's
    release) depends on nothing."""
    out = torch.zeros(1, dtype=torch.int32)
    with triton.record() as rec:
        exchange_into_one_element[(8,)](out, SAME=same)
    why = rec.launches[0].order_dependent
    assert (why is None) if same else why.startswith("tl.atomic_xchg of different values"), why


def test_a_block_larger_than_triton_allows_is_refused_with_the_limit():
    @triton.jit
    def outer(x_ptr, y_ptr, B: tl.constexpr):
        c = tl.arange(0, B)
        x = tl.load(x_ptr + c)
        tl.store(y_ptr + c, tl.sum(x[:, None] * x[None, :], axis=1))
    x = torch.randn(4096)
    with pytest.raises(triton.CompilationError, match=r"outer line \d+: a block of shape \[4096, 4096\] has "
                                                      r"16777216 elements; Triton's maximum is 1048576"):
        outer[(1,)](x, torch.empty(4096), B=4096)


@triton.jit
def _sum_of_squares(x_ptr, out_ptr, N, BLOCK: tl.constexpr, CONVERT: tl.constexpr):
    x = tl.load(x_ptr + tl.program_id(0) * N + tl.arange(0, BLOCK))
    if CONVERT:
        x = x.to(tl.float32)
    tl.store(out_ptr + tl.program_id(0), tl.sum(x * x, axis=0))


@pytest.mark.parametrize("n", [1024, 65536])
def test_a_bf16_sum_adds_in_bf16_as_on_a_gpu_and_loses_a_long_rows_small_terms(n):
    """Triton keeps tl.sum of bf16 in bf16: a long row's running sum swallows its small terms (the GPU
    gets 41% of y wrong at (64, 65536) from such a kernel; docs/perf.md). Converting first is exact."""
    x = torch.randn(4, n).to(torch.bfloat16)
    exact = x.double().pow(2).sum(1)
    bf16, fp32 = torch.empty(4, dtype=torch.bfloat16), torch.empty(4)
    _sum_of_squares[(4,)](x, bf16, n, BLOCK=n, CONVERT=False)
    _sum_of_squares[(4,)](x, fp32, n, BLOCK=n, CONVERT=True)
    torch.testing.assert_close(fp32.double(), exact, rtol=1e-5, atol=0)
    error = ((bf16.double() - exact) / exact).abs().max()
    assert (error > 0.05) if n == 65536 else (error < 0.02), float(error)


def test_a_bf16_cumsum_rounds_at_every_step():
    @triton.jit
    def k(x_ptr, out_ptr, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(out_ptr + o, tl.cumsum(tl.load(x_ptr + o), axis=0))
    out = torch.empty(512, dtype=torch.bfloat16)
    k[(1,)](torch.ones(512, dtype=torch.bfloat16), out, BLOCK=512)
    assert float(out[255]) == 256 and float(out[-1]) == 256          # 256 + 1 rounds back to 256 in bf16


# -- tracebacks end at the kernel's line ----------------------------------------------------------
def _frames(exc):
    tb, out = exc.__traceback__, []
    while tb is not None:
        out.append((tb.tb_frame.f_code.co_filename, tb.tb_frame.f_code.co_name, tb.tb_lineno))
        tb = tb.tb_next
    return out


def test_an_error_inside_a_kernel_ends_at_its_line_without_simulator_frames(monkeypatch):
    x, out = torch.randn(100), torch.empty(100)
    with pytest.raises(triton.OutOfBoundsError) as e:
        copy_unmasked[(1,)](x, out, 100, BLOCK=128)
    frames = _frames(e.value)
    assert frames[-1][:2] == (__file__, "copy_unmasked")
    inside = [f for f in frames if "/mini_triton/" in f[0]]
    assert [f[1] for f in inside] == ["run"]                 # the launcher's re-raise, hidden from pytest
    monkeypatch.setenv("MINI_TRITON_TRACEBACK", "full")
    with pytest.raises(triton.OutOfBoundsError) as e:
        copy_unmasked[(1,)](x, out, 100, BLOCK=128)
    assert len([f for f in _frames(e.value) if "/mini_triton/" in f[0]]) > 3


def test_a_race_found_after_the_launch_ends_at_the_racing_line():
    x, out = torch.randn(4, 10), torch.zeros(10)
    with pytest.raises(triton.DataRaceError) as e:
        racy_column_sum[(4,)](x, out, 10, BLOCK=16)
    filename, function, line = _frames(e.value)[-1]
    assert (filename, function) == (__file__, "racy_column_sum")
    assert "tl.store(out_ptr + cols, acc + x" in linecache.getline(filename, line)


# ---- Triton's compile rules that the CPU enforces too ----------------------------------------------------------
@triton.jit
def scalar_accumulator(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = 0.0
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + cols, mask=cols < n, other=0.0)     # a scalar made a block: Triton refuses
    tl.store(out_ptr + tl.arange(0, BLOCK), acc)


@triton.jit
def scalar_sum_accumulator(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    acc = 0.0
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.sum(tl.load(x_ptr + cols, mask=cols < n, other=0.0), axis=0)   # stays a scalar: fine
    tl.store(out_ptr, acc)


@triton.jit
def tile_through_row_pointers(x_ptr, out_ptr, BLOCK: tl.constexpr):
    rows = tl.arange(0, 2)[:, None]
    cols = tl.arange(0, BLOCK)
    tile = tl.load(x_ptr + rows * BLOCK + cols[None, :])
    tl.store(out_ptr + cols, tile)                                # a 2-D value through 1-D pointers


@triton.jit
def row_through_tile_pointers(x_ptr, out_ptr, BLOCK: tl.constexpr):
    rows = tl.arange(0, 2)[:, None]
    cols = tl.arange(0, BLOCK)
    tl.store(out_ptr + rows * BLOCK + cols[None, :], tl.load(x_ptr + cols))    # broadcast to the pointers: fine


@pytest.mark.parametrize("kernel, grid, args, words", [
    (scalar_accumulator, (1,), (64,), "the loop carries `acc`, which is a scalar before the loop and a block of "
                                      "shape [32] inside it"),
    (tile_through_row_pointers, (1,), (), "tl.store of a value of shape [2, 32] through pointers of shape [32]"),
    (copy_unmasked, 2, (64,), "the grid must be a tuple, such as (2,) for a 1-D grid"),
], ids=["loop_carried_scalar_made_a_block", "store_of_higher_rank", "int_grid"])
def test_what_triton_s_compiler_refuses_is_refused_on_the_cpu_with_its_line(kernel, grid, args, words):
    x, out = torch.randn(64), torch.zeros(64)
    with pytest.raises((triton.CompilationError, TypeError)) as e:
        kernel[grid](x, out, *args, BLOCK=32)
    assert words in str(e.value), str(e.value)


@pytest.mark.parametrize("kernel, args", [(scalar_sum_accumulator, (64,)), (row_through_tile_pointers, ())],
                         ids=["scalar_stays_scalar", "value_broadcast_to_pointers"])
def test_the_forms_triton_accepts_still_run(kernel, args):
    x, out = torch.randn(64), torch.zeros(64)
    kernel[(1,)](x, out, *args, BLOCK=32)
    assert bool(out.ne(0).any())


def test_tiles_of_a_2d_output_are_cleared_without_looking_at_each_element(monkeypatch):
    """Programs' ranges of a 2-D tiled output interleave, but their rows do not: the race sieve looks at each
    program's contiguous runs (masks and offsets used before included), so no element-by-element check runs; tiles
    that do overlap are still found."""
    from mini_triton import races

    @triton.jit
    def tiles(x_ptr, out_ptr, n, dim, SHIFT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
        rows = tl.program_id(0) * BM + tl.arange(0, BM) - SHIFT * tl.program_id(0)
        cols = tl.program_id(1) * BN + tl.arange(0, BN)
        mask = (rows < n)[:, None] & (cols < dim)[None, :]
        x = tl.load(x_ptr + rows[:, None] * dim + cols[None, :], mask=mask)
        tl.store(out_ptr + rows[:, None] * dim + cols[None, :], x * 2, mask=mask)

    exact = []
    real = races._exact
    monkeypatch.setattr(races, "_exact", lambda *a: exact.append(1) or real(*a))
    x = torch.randn(512, 256)
    out = torch.empty(512, 256)
    tiles[(16, 4)](x, out, 512, 256, SHIFT=0, BM=32, BN=64)
    assert torch.equal(out, x * 2) and not exact
    with pytest.raises(triton.DataRaceError, match="both write out_ptr"):
        tiles[(16, 4)](x, out, 512, 256, SHIFT=1, BM=32, BN=64)      # each tile's first row is the last one's
    assert exact
