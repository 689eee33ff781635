"""Traffic statistics: the contract the seed lecture and the autograder rely on."""
import collections
import contextlib

import pytest
import torch

import mini_triton as triton
from backends import kernels

tl = triton.language
K = kernels("mini")


def fwd(M, N, x=None):
    x = torch.randn(M, N) if x is None else x
    g = torch.randn(N)
    y, r = torch.empty(M, N), torch.empty(M)
    K.row_rmsnorm_fwd[(M,)](x, g, y, r, N, x.stride(0), 1e-5, BLOCK=triton.next_power_of_2(N))
    return x, g, y, r


@pytest.mark.parametrize("M,N", [(256, 1024), (37, 100), (1, 1), (3, 513)])
def test_seed_forward_counts(M, N):
    triton.reset_stats()
    fwd(M, N)
    s = triton.get_stats()
    assert s["loaded"] == 2 * M * N            # x, plus g once per row
    assert s["stored"] == M * N + M            # y and r
    assert s["loaded_bytes"] == 4 * 2 * M * N and s["stored_bytes"] == 4 * (M * N + M)
    assert s["launches"] == 1 and s["programs"] == M


@pytest.mark.parametrize("M,N", [(256, 1024), (37, 100)])
def test_seed_backward_counts(M, N):
    x, g, y, r = fwd(M, N)
    dy, dx, dgp = torch.randn(M, N), torch.empty(M, N), torch.empty(M, N)
    triton.reset_stats()
    K.row_rmsnorm_bwd[(M,)](x, g, dy, r, dx, dgp, N, x.stride(0), BLOCK=triton.next_power_of_2(N))
    s = triton.get_stats()
    assert s["loaded"] == 3 * M * N + M
    assert s["stored"] == 2 * M * N


def test_masked_off_lanes_are_not_counted():
    triton.reset_stats()
    x, y, out = torch.randn(100), torch.randn(100), torch.empty(100)
    K.add_kernel[(1,)](x, y, out, 100, BLOCK=128)
    assert triton.get_stats()["loaded"] == 200 and triton.get_stats()["stored"] == 100


def test_record_breaks_traffic_down_per_launch_and_argument():
    M, N = 37, 100
    with triton.record() as rec:
        x, g, y, r = fwd(M, N)
    (launch,) = rec.launches
    assert launch.kernel == "row_rmsnorm_fwd" and launch.programs == M and launch.grid == (M, 1, 1)
    a = launch.args
    assert (a["x_ptr"].loaded, a["x_ptr"].stored, a["x_ptr"].distinct()) == (M * N, 0, M * N)
    assert (a["g_ptr"].loaded, a["g_ptr"].distinct()) == (M * N, N)       # g re-read by every row
    assert (a["y_ptr"].stored, a["y_ptr"].loaded_bytes, a["y_ptr"].stored_bytes) == (M * N, 0, 4 * M * N)
    assert a["r_ptr"].stored == M and a["r_ptr"].distinct_stored == M
    assert rec.totals()["loaded"] == 2 * M * N
    assert "row_rmsnorm_fwd" in rec.table()


def test_distinct_counts_gathered_and_overlapping_accesses_exactly():
    @triton.jit
    def gather(x_ptr, idx_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        i = tl.load(idx_ptr + offs)
        tl.store(out_ptr + offs, tl.load(x_ptr + i))
        tl.store(out_ptr + offs, tl.load(x_ptr + offs // 2))
    x, idx, out = torch.randn(64), torch.tensor([3, 3, 5, 7] * 4), torch.empty(16)
    with triton.record() as rec:
        gather[(1,)](x, idx, out, BLOCK=16)
    a = rec.launches[0].args["x_ptr"]
    assert a.loaded == 32
    assert a.distinct_loaded == len({3, 5, 7} | set(range(8)))


@pytest.mark.parametrize("M,N,stride", [(37, 100, 100), (600, 64, 64), (40, 64, 128), (3, 513, 1000)])
def test_distinct_counts_merge_program_ranges_the_same_in_python_and_in_torch(M, N, stride, monkeypatch):
    """Few programs' ranges are merged in Python (torch's fixed cost per op is larger), many in torch: the counts
    agree, for rows adjacent and apart, and for ranges every program shares (g)."""
    from mini_triton import stats
    x, y = (torch.randn(M * stride).as_strided((M, N), (stride, 1)) for _ in range(2))
    counts = {}
    for small in (stats.FEW, 0):
        monkeypatch.setattr(stats, "FEW", small)
        with triton.record() as rec:
            K.row_rmsnorm_fwd[(M,)](x, torch.randn(N), y, torch.empty(M), N, stride, 1e-5,
                                    BLOCK=triton.next_power_of_2(N))
        counts[small] = {k: (a.distinct("load"), a.distinct("store"), a.distinct())
                         for k, a in rec.launches[0].args.items()}
    assert counts[stats.FEW] == counts[0]
    assert counts[0]["x_ptr"] == (M * N, 0, M * N) and counts[0]["y_ptr"] == (0, M * N, M * N)
    assert counts[0]["g_ptr"] == (N, 0, N) and counts[0]["r_ptr"] == (0, M, M)


def test_merged_ranges_count_each_element_once():
    from mini_triton.stats import _merged_length
    assert _merged_length([(8, 9), (0, 4), (2, 6), (10, 10), (3, 3)]) == 7 + 3
    assert _merged_length([]) == 0 and _merged_length([(5, 5), (5, 5)]) == 1


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
def test_atomics_count_as_load_and_store():
    x, out = torch.ones(256), torch.zeros(1)
    with triton.record() as rec:
        K.atomic_sum_kernel[(2,)](x, out, 256, BLOCK=128)
    a = rec.launches[0].args["out_ptr"]
    assert (a.atomics, a.loaded, a.stored) == (2, 2, 2)
    assert float(out) == 256.0


@triton.jit
def _read_by_xchg(x_ptr, out_ptr, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.atomic_xchg(x_ptr + cols, 0.0)          # reads x (and writes 0 there)
    tl.atomic_xchg(x_ptr + cols, v)                 # and puts it back
    tl.store(out_ptr + cols, v * 2)


def test_an_atomic_xchg_counts_as_a_load_too():
    """The old value an xchg hands back is a read of memory: a kernel that reads x through two xchgs (taking each
    value and putting it back) has read x twice, as a fused forward may not."""
    x, out = torch.arange(128.0), torch.zeros(128)
    with triton.record() as rec:
        _read_by_xchg[(2,)](x, out, BLOCK=64)
    a = rec.launches[0].args["x_ptr"]
    assert (a.atomics, a.loaded, a.stored) == (256, 256, 256)
    assert torch.equal(out, torch.arange(128.0) * 2) and torch.equal(x, torch.arange(128.0))


def test_nested_records_and_host_ops():
    x = torch.randn(8, 16)
    with triton.record() as outer:
        fwd(8, 16, x)
        with triton.record(host_ops=True) as inner:
            z = x * 2                                   # host-side work, outside any kernel
            fwd(8, 16, z)
    assert len(outer.launches) == 2 and len(inner.launches) == 1
    names = [op.name for op in inner.host_ops]
    assert "mul" in names
    mul = inner.host_ops[names.index("mul")]
    assert mul.where.startswith("test_mini_triton_stats.py line ") and "(`z = x * 2" in mul.where, mul.where
    big = [op for op in inner.host_ops if op.reads >= 8 * 16]
    assert big, "the host op reading an 8x16 activation is visible"
    assert all(op.name not in ("rsqrt",) for op in inner.host_ops), "kernel internals are not host ops"


@torch.library.custom_op("mini_triton_tests::scaled_copy", mutates_args=())
def _scaled_copy(x: torch.Tensor) -> torch.Tensor:
    """A kernel wrapped in a torch.library custom op, as code that keeps torch.compile out of its kernels does."""
    y = fwd(*x.shape, x.contiguous())[2]
    return y.to(torch.float16)


@pytest.mark.parametrize("outer", [False, True], ids=["alone", "under_another_recorder"])
def test_a_custom_ops_body_is_recorded_op_by_op_as_the_callers_code_would_be(outer):
    """The torch ops and launches inside a custom op are its caller's host ops and launches (as without the
    wrapper), also when another recorder's mode is active beneath (the grader's recipe)."""
    x = torch.randn(8, 32)[:, ::2]
    with triton.record() if outer else contextlib.nullcontext():
        with triton.record(host_ops=True) as rec:
            _scaled_copy(x)
    names = [op.name for op in rec.host_ops]
    assert "scaled_copy" not in names, names
    assert {"clone", "empty", "_to_copy"} <= set(names), names             # .to(dtype) as the copy it is
    assert len(rec.launches) == 1


def test_a_host_op_the_standard_library_runs_is_its_callers():
    """``collections.Counter(map(torch.Tensor.float, [x]))`` runs .float() from collections' own frame: the op
    is the line that called it, so a grader that keeps the student's file's ops sees it."""
    x = torch.randn(8, 16, dtype=torch.bfloat16)
    with triton.record(host_ops=True) as rec:
        next(iter(collections.Counter(map(torch.Tensor.float, [x]))))
    ops = [op for op in rec.host_ops if op.reads >= 8 * 16]
    assert ops and ops[0].where.startswith("test_mini_triton_stats.py line "), [op.where for op in ops]


def test_failed_launch_adds_nothing():
    triton.reset_stats()
    with pytest.raises(triton.OutOfBoundsError):
        K.add_kernel[(1,)](torch.ones(4), torch.ones(4), torch.ones(4), 8, BLOCK=8)
    assert triton.get_stats()["loaded"] == 0 and triton.get_stats()["launches"] == 0


# -- what the grader and the public tests ask a recording ------------------------------------------------

@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + o, tl.load(x_ptr + o, mask=o < n), mask=o < n)


def test_stored_mask_says_which_elements_kernels_wrote_through_any_view():
    x, base = torch.randn(10, 30), torch.full((10, 40), 7.0)
    with triton.record() as rec:
        _copy_kernel[(2,)](x, base, 300, BLOCK=128)        # two programs of 128: 256 of the 300 elements
    written = rec.stored_mask(base)
    assert written.shape == (10, 40) and int(written.sum()) == 256
    assert int(rec.stored_mask(base[:, :30]).sum()) == 196       # a view of the same memory


def test_a_masked_load_without_other_names_its_line_in_the_statistics():
    x, y = torch.randn(100), torch.empty(100)
    with triton.record() as rec:
        _copy_kernel[(1,)](x, y, 100, BLOCK=128)
    assert "_copy_kernel line" in rec.launches[0].undefined_lanes
    with triton.record() as rec:
        _copy_kernel[(1,)](torch.randn(128), torch.empty(128), 128, BLOCK=128)   # nothing masked off
    assert rec.launches[0].undefined_lanes is None


def test_poison_fills_what_torch_empty_allocates_in_the_block_with_nan():
    with triton.record(host_ops=True, poison=True):
        e, z = torch.empty(8), torch.zeros(8)
    assert bool(torch.isnan(e).all()) and bool((z == 0).all())


def test_race_mode_record_notes_the_race_and_keeps_going():
    @triton.jit
    def racy(out_ptr, BLOCK: tl.constexpr):
        tl.store(out_ptr + tl.arange(0, BLOCK), tl.zeros((BLOCK,), tl.float32) + tl.program_id(0))

    out = torch.empty(8)
    old = triton.get_race_mode()
    triton.set_race_mode("record")
    try:
        with triton.record() as rec:
            racy[(4,)](out, BLOCK=8)
    finally:
        triton.set_race_mode(old)
    assert "data race in racy" in rec.launches[0].race
    with pytest.raises(triton.DataRaceError):
        racy[(4,)](out, BLOCK=8)


@triton.jit
def _rows_unmasked(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    tl.store(y_ptr + row * n_cols + cols, tl.load(x_ptr + row * n_cols + cols))     # no mask: past each row


@triton.jit
def _all_into_row_0(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + tl.program_id(0) * n_cols + cols, mask=mask)
    tl.store(out_ptr + cols, x, mask=mask)                          # every program: the same row


def test_a_race_is_drawn_in_red_with_the_programs_that_stored_it(tmp_path):
    from mini_triton import viz
    x, out = torch.randn(3, 12), torch.zeros(2, 12)
    mode = triton.get_race_mode()
    triton.set_race_mode("record")
    try:
        with triton.record() as rec:
            _all_into_row_0[(3,)](x, out, 12, BLOCK=16)
    finally:
        triton.set_race_mode(mode)
    (L,) = rec.launches
    assert L.race and "programs 0 and 1 both write" in L.race
    shared, programs = viz.raced(L.args["out_ptr"])
    assert shared[:12].all() and not shared[12:].any() and programs == [0, 1, 2]
    assert not viz.raced(L.args["x_ptr"])[0].any()
    png = rec.draw(tmp_path / "race.png")
    assert png.read_bytes().startswith(b"\x89PNG")


def test_an_out_of_bounds_picture_holds_every_program_whose_lanes_left_their_row(tmp_path):
    from mini_triton import viz
    x, y = torch.randn(6, 12), torch.zeros(6, 12)
    with pytest.raises(triton.OutOfBoundsError) as e:
        _rows_unmasked[(6,)](x, y, 12, BLOCK=16)
    err = e.value
    assert err.program == 5 and err.cells == [(5, c) for c in range(12, 16)]
    # programs 0-4 read columns 12-15 of their row, which are the next row's first four: silent, but drawn
    assert sorted(err.cells_by_program) == [0, 1, 2, 3, 4, 5]
    assert err.cells_by_program[2] == [(2, c) for c in range(12, 16)]
    png = viz.draw_out_of_bounds(err, tmp_path / "oob.png")
    assert png.read_bytes().startswith(b"\x89PNG")


def test_a_record_keeps_each_launchs_tensors_memory_until_the_block_ends():
    """A storage address names one tensor for the whole record: a temporary passed to a launch and then dropped
    (a host copy inside a wrapper) keeps its memory until the block ends, so that no tensor made later in the
    block (autograd's x.grad, say) takes its address and passes for an argument of that launch."""
    with triton.record() as rec:
        tmp = torch.randn(64)
        address = tmp.untyped_storage().data_ptr()
        K.add_kernel[(1,)](tmp, tmp, torch.empty(64), 64, BLOCK=64)
        del tmp
        assert address in [s.data_ptr() for s in rec.alive]
    assert rec.alive == [] and rec.launches[0].args


def test_set_undefined_float_sets_what_masked_off_lanes_without_other_hold_and_returns_the_old_value():
    tl = triton.language

    @triton.jit
    def copy_masked(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n))

    x, y = torch.ones(8), torch.empty(8)
    copy_masked[(1,)](x, y, 5, BLOCK=8)
    assert torch.isnan(y[5:]).all()
    old = triton.set_undefined_float(0.0)
    try:
        copy_masked[(1,)](x, y, 5, BLOCK=8)
        assert torch.equal(y, torch.tensor([1.0] * 5 + [0.0] * 3))
    finally:
        assert triton.set_undefined_float(old) == 0.0
    assert old != old                                   # NaN, the default


def test_torch_ops_in_unrecorded_are_not_host_ops_of_the_recording():
    x = torch.ones(4)
    with triton.record(host_ops=True) as rec:
        x + 1
        with triton.unrecorded():
            x * 3
    names = [op.name for op in rec.host_ops]
    assert any("add" in n for n in names) and not any("mul" in n for n in names), names
