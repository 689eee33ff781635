"""The performance model (mini_triton/perf.py) and item 10's prediction (rmsnorm_testkit/predict.py), on the CPU.

The model is held to what the H200 measured (tests/data/perf_h200.json, from ``tests/perf_model_gpu.py measure``;
tests/test_perf_model_gpu.py measures it again on a GPU): each design's predicted share of a copy's bandwidth
within 15 points of the measured one, and the microbenchmarks its parameters come from. A design that picks its
grid by device is predicted as the GPU runs it: within 2 points of the same design with the GPU's grid written
in. Then each of the model's terms alone (the arithmetic's issue rate too, and the operations the simulator
counts for it), the plan of a launch at a shape too large to simulate, and the prediction's notes.
"""
import dataclasses
import json
import re
import math
import sys
import warnings

import pytest
import torch

import mini_triton as triton
from mini_triton import perf
from rmsnorm_testkit import predict
from rmsnorm_testkit.compare import load_impl

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests"))
import perf_designs  # noqa: E402

tl = triton.language
MEASURED = json.loads((ROOT / "tests" / "data" / "perf_h200.json").read_text())
TOLERANCE = 15                      # points of a copy's bandwidth: the issue's and the handout's promise


@pytest.fixture(scope="module")
def designs(tmp_path_factory):
    return {p.stem: p for p in perf_designs.write_all(tmp_path_factory.mktemp("designs"))}


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
@pytest.mark.parametrize("name", list(perf_designs.DESIGNS))
def test_each_design_is_predicted_within_15_points_of_the_h200(designs, name):
    impl = load_impl(designs[name], backend="mini_triton")
    for dtype in ("fp32", "bf16"):
        got = predict.item_10(impl, dtype)
        for kind in ("fwd", "fwdbwd"):
            measured = MEASURED["designs"][name][dtype][f"{kind}_share"]
            assert abs(got.shares[kind] - measured) <= TOLERANCE, (name, dtype, kind, got.shares[kind], measured)


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
@pytest.mark.parametrize("name", list(perf_designs.ALL))
def test_a_design_is_predicted_as_with_the_gpus_grid_written_in(designs, name, tmp_path):
    """The wrappers see the course GPU while the prediction runs them: a grid picked by device (1, 8 or 16 programs
    off the GPU, a persistent grid) is the GPU's, and the prediction of the file as written is the model's
    prediction of the file with the H200's grid written in, within 2 points."""
    as_written = predict.item_10(load_impl(designs[name], backend="mini_triton"), "fp32"), \
        predict.item_10(load_impl(designs[name], backend="mini_triton"), "bf16")
    (tmp_path / "gpu_grid").mkdir()
    (tmp_path / "gpu_grid" / f"{name}.py").write_text(perf_designs.gpu_grid_source(name))
    impl = load_impl(tmp_path / "gpu_grid" / f"{name}.py", backend="mini_triton")
    for got, dtype in zip(as_written, ("fp32", "bf16")):
        twin = predict.item_10(impl, dtype)
        for kind in ("fwd", "fwdbwd"):
            assert got.shares[kind] is not None and abs(got.shares[kind] - twin.shares[kind]) <= 2, \
                (name, dtype, kind, got.shares[kind], twin.shares[kind], got.path.line())
    if name in perf_designs.GPU_GRID:       # the device chose: the path says so, and which launch it changed
        assert "saw an H200 (132 SMs) and launched as on it" in as_written[0].path.line(), as_written[0].path
        assert as_written[0].path.changed


def test_the_designs_include_grids_of_1_8_and_16_programs_off_the_gpu_and_a_persistent_one(designs):
    assert len(perf_designs.ALL) >= 12 and set(perf_designs.GPU_GRID) <= set(perf_designs.ALL)
    off = {}
    for name in perf_designs.GPU_GRID:
        path = predict.planned(load_impl(designs[name], backend="mini_triton"), "fp32")[1]
        off[name] = {cpu for _, gpu, cpu, _, _ in path.changed if gpu >= 132}
    assert {1, 8, 16} <= set().union(*off.values()), off
    assert 8 in off["persistent"] and {"_fwd_persistent", "_bwd_persistent"} <= {
        c[0] for c in predict.planned(load_impl(designs["persistent"], backend="mini_triton"), "fp32")[1].changed}


@triton.jit
def row_copy(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    pid, programs = tl.program_id(0), tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    for row in range(pid, n_rows, programs):
        tl.store(y_ptr + row * n_cols + cols, tl.load(x_ptr + row * n_cols + cols))


def _copy_work(programs: int):
    """A row copy of 16384 x 4096 fp32 with ``programs`` programs, as the microbenchmark ran it: simulated at 256
    rows, taken to 16384 by its plan."""
    x, y = torch.randn(256, 4096), torch.empty(256, 4096)
    with triton.record() as rec:
        row_copy[(min(programs, 256),)](x, y, 256, 4096, BLOCK=4096, num_warps=8)
    big = torch.empty(16384, 4096, device="meta")
    with triton.plan() as planned:
        row_copy[(programs,)](big, big, 16384, 4096, BLOCK=4096, num_warps=8)
    return perf.launch_work(rec.launches[0]).at(planned.launches[0])


@pytest.mark.parametrize("programs", [16, 33, 66, 132, 1056, 16384])
def test_a_copy_reaches_the_bandwidth_the_h200_measured_for_its_grid(programs):
    """Few programs leave the memory idle while each waits for its loads (the latency term); many reach the copy's
    bandwidth (the bandwidth term): within 15% of the row copy measured on the H200 at every grid."""
    gbs = 2 * 16384 * 4096 * 4 / perf.seconds(_copy_work(programs)) / 1e9
    measured = MEASURED["micro"]["row_copy_gbs_by_programs"][str(programs)]
    assert abs(gbs - measured) / measured <= 0.15, (programs, gbs, measured)


def test_the_terms_each_grow_with_what_they_model():
    base = perf.Work("k", programs=16384, rounds=16384.0, spans=(1e8,), first=(1e8,), again=(0.0,), touched=(1e8,))
    t = perf.seconds(base)
    assert math.isclose(t, 1e8 / (perf.H200.hbm_gbs * 1e9), rel_tol=0.08)       # bandwidth-bound
    reread = perf.Work("k", programs=16384, rounds=16384.0, spans=(1e8,), first=(1e8,), again=(1e8,),
                       touched=(2e8,))
    small = perf.Work("k", programs=16384, rounds=16384.0, spans=(1e6,), first=(1e6,), again=(1e8,), touched=(1.01e8,))
    assert perf.seconds(reread) > 1.9 * t                    # a large tensor read twice: from memory twice
    assert perf.seconds(small) < perf.seconds(reread) / 1.5  # a small one: the L2 serves the second reads
    few = perf.Work("k", programs=33, rounds=33 * 992.0, spans=(1e8,), first=(1e8,), again=(0.0,), touched=(1e8,))
    assert perf.seconds(few) > 3 * t                         # 33 programs each waiting 992 times
    atomic = perf.Work("k", programs=16384, rounds=16384.0, spans=(1e8,), first=(1e8,), again=(0.0,),
                       touched=(1e8,), atomics=67e6, contended=16384)
    assert perf.seconds(atomic) > 16384 * perf.H200.atomic_same_ns * 1e-9  # updates of one address wait in turn


def test_a_plan_notes_each_launch_at_a_shape_without_running_it():
    x = torch.empty(16384, 4096, device="meta")
    y = torch.empty_like(x)
    with triton.plan() as rec:
        row_copy[(132,)](x, y, 16384, 4096, BLOCK=4096, num_warps=8)
        z = (y * 2).sum(0)
    (launch,) = rec.launches
    assert (launch.kernel, launch.programs, launch.num_warps) == ("row_copy", 132, 8)
    assert launch.spans == {"x_ptr": 16384 * 4096 * 4, "y_ptr": 16384 * 4096 * 4}
    assert z.device.type == "meta" and {op.name for op in rec.host_ops} >= {"mul", "sum"}
    work = [perf.host_op_work(op) for op in rec.host_ops]
    assert sum(sum(w.first) for w in work if w) == (2 * 16384 * 4096 + 4096 + 16384 * 4096) * 4


def test_work_taken_to_a_planned_shape_grows_each_argument_with_its_span():
    w = perf.Work("k", programs=64, rounds=128.0, arg_names=("x", "g", "part"), spans=(8.0, 4.0, 2.0),
                  first=(8.0, 4.0, 2.0), again=(0.0, 12.0, 0.0), touched=(8.0, 16.0, 2.0), atomics=0.0)
    planned = type("Planned", (), {"kernel": "k", "programs": 528, "num_warps": 8,
                                   "spans": {"x": 128.0, "g": 4.0, "part": 16.0}})()
    big = w.at(planned)
    assert big.programs == 528 and big.warps == 8 and big.spans == (128.0, 4.0, 16.0)
    assert big.first == (128.0, 4.0, 16.0) and big.again == (0.0, 12.0, 0.0)
    assert big.rounds == pytest.approx(128.0 * (128 + 4 + 16) / 14)      # with the launch's distinct elements


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
def test_the_prediction_says_when_a_grid_leaves_the_gpu_idle_and_when_it_could_not_plan(designs, tmp_path):
    few = predict.item_10(load_impl(designs["few_programs"], backend="mini_triton"), "fp32")
    assert any("runs 33 programs, fewer than the H200's 132 SMs" in n for n in few.notes), few.notes
    # a forward that cannot run at item 10's shape without its data: grown with the rows, and said so
    src = (ROOT / "tests" / "corpus" / "simple.py").read_text().replace(
        "def rmsnorm_forward(x, g, eps=1e-5):\n",
        "def rmsnorm_forward(x, g, eps=1e-5):\n    if x.shape[0] > 4096 and not bool(x[0, 0] == 12345.0):\n"
        "        raise ValueError('refused')\n", 1)
    (tmp_path / "rmsnorm.py").write_text(src)
    (tmp_path / "mini_triton").symlink_to(ROOT / "mini_triton")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = predict.item_10(load_impl(tmp_path / "rmsnorm.py", backend="mini_triton"), "fp32")
    assert any("could not run at item 10's shape without its data" in n for n in got.notes), got.notes
    assert 80 < got.shares["fwd"] <= 101                     # still the lecture's forward, grown with the rows


def test_every_gpu_of_the_table_names_its_source():
    assert {"H200", "H100", "A100", "L4", "RTX 4090"} <= set(perf.GPUS)
    for gpu in perf.GPUS.values():
        assert gpu.source and gpu.hbm_gbs > 0 and gpu.sms > 0 and gpu.l2_bytes > 0
    assert perf.GPUS["A100"].hbm_gbs < perf.GPUS["H100"].hbm_gbs < perf.GPUS["H200"].hbm_gbs


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
def test_the_handouts_accuracy_table_is_the_models_beside_the_h200s(designs):
    """Part (e)'s table, in both handouts: per design, the forward+backward's predicted / measured share."""
    expected = []
    for name in perf_designs.DESIGNS:
        impl = load_impl(designs[name], backend="mini_triton")
        expected.append([f"{predict.item_10(impl, d).shares['fwdbwd']:.0f} / "
                         f"{MEASURED['designs'][name][d]['fwdbwd_share']:.0f}" for d in ("fp32", "bf16")])
    for handout in ("README.md", "README.zh-CN.md"):
        text = (ROOT / "handout" / handout).read_text(encoding="utf-8")
        rows = [[c.strip() for c in ln.strip("|").split("|")][1:] for ln in text.splitlines()
                if re.match(r"^\| [^|]+ \| \d+ / \d+ \| \d+ / \d+ \|$", ln)]
        assert rows == expected, f"handout/{handout}'s table of part (e) differs from the model's: update it"


@triton.jit
def _waiting_kernel(x_ptr, dy_ptr, r_ptr, out_ptr, n_rows, BLOCK: tl.constexpr):
    pid, programs = tl.program_id(0), tl.num_programs(0)
    cols = tl.arange(0, BLOCK)
    for row in range(pid, n_rows, programs):
        x = tl.load(x_ptr + row * BLOCK + cols)
        dy = tl.load(dy_ptr + row * BLOCK + cols)      # issued with x: the same wait
        r = tl.load(r_ptr + row)                       # one element: rides along
        dot = tl.sum(x * dy, axis=0)                   # its threads wait for each other: a wait of its own
        tl.store(out_ptr + row * BLOCK + cols, x * r - dot)


def test_the_waits_of_a_program_are_counted_as_the_kernel_runs():
    """Per row: one wait for the loads issued together (x and dy; r rides along) and one for the reduction, each
    counted over the programs, the loads keyed by their bytes per thread (1024 fp32 on 4 warps: 32)."""
    x, dy, r, out = torch.randn(12, 1024), torch.randn(12, 1024), torch.randn(12), torch.empty(12, 1024)
    with triton.record() as rec:
        _waiting_kernel[(4,)](x, dy, r, out, 12, BLOCK=1024, num_warps=4)
    (launch,) = rec.launches
    assert launch.rounds == {32.0: 12} and launch.waits == 12       # 4 programs x 3 rows each
    assert perf.launch_work(launch).rounds == 12 / perf.overlap(32.0) + 12
    torch.testing.assert_close(out, x * r[:, None] - (x * dy).sum(1, keepdim=True))


def test_a_kernel_takes_at_least_the_time_to_issue_its_arithmetic():
    """The H200 issues 4 warp instructions a clock on each of its 132 SMs (1.98 GHz: its datasheet's 67 TFLOPS of
    FP32 FMA): work of many operations per byte is bound by that, whatever its bytes; and a program alone on its
    SM, one warp to each scheduler, waits for its own arithmetic beside its loads."""
    launch, rate = perf.H200.launch_us * 1e-6, 132 * 4 * 1.98e9          # warp instructions a second
    small = dict(spans=(1e6,), first=(1e6,), again=(0.0,), touched=(1e6,))
    busy = perf.Work("k", programs=16384, warps=4, rounds=16384.0, issued=16384 * 8192.0, **small)
    assert math.isclose(perf.seconds(busy) - launch, busy.issued * busy.warps / rate, rel_tol=1e-6)
    alone = perf.Work("k", programs=33, warps=4, rounds=33 * 500.0, issued=33 * 1e6, **small)
    idle = dataclasses.replace(alone, issued=0.0)
    waits, own = 500 * perf.H200.load_us * 1e-6, 1e6 * 4 / (4 * 1.98e9)
    assert math.isclose(perf.seconds(idle) - launch, waits, rel_tol=0.01)
    assert math.isclose(perf.seconds(alone) - launch, waits + own, rel_tol=0.01)
    hidden = perf.Work("k", programs=16384, warps=4, rounds=16384.0, issued=16384 * 64.0, spans=(1e9,), first=(1e9,),
                       again=(0.0,), touched=(1e9,))
    assert perf.seconds(hidden) < 1.01 * perf.seconds(dataclasses.replace(hidden, issued=0.0))   # behind the bytes


@triton.jit
def _scaled(x_ptr, y_ptr, s, TWICE: tl.constexpr, INDEXED: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if INDEXED:
        cols = (cols * 3 - cols * 2) + 0                 # integer work on the offsets: not counted
    y = tl.load(x_ptr + cols) * s
    if TWICE:
        y = y * s                                        # one float operation more per element
    tl.store(y_ptr + cols, y)


def test_the_simulator_counts_each_float_operation_per_element_a_thread_holds():
    """1024 lanes on 4 warps (128 threads): 8 elements a thread, so one more float multiply is 8 more operations
    per program, over 3 programs; integer work on offsets and pointers is not counted."""
    x, y = torch.randn(3 * 1024), torch.empty(3 * 1024)
    issued = {}
    for twice, indexed in ((False, False), (True, False), (False, True)):
        with triton.record() as rec:
            _scaled[(3,)](x, y, 2.0, TWICE=twice, INDEXED=indexed, BLOCK=1024, num_warps=4)
        issued[twice, indexed] = rec.launches[0].issued
    assert issued[True, False] - issued[False, False] == 3 * 8
    assert issued[False, True] == issued[False, False] > 0
    assert perf.launch_work(rec.launches[0]).issued == issued[False, True]
    torch.testing.assert_close(y, x * 2.0)


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_the_issue_term_brings_the_row_loop_backward_to_its_measured_time(designs, dtype):
    """Liger's backward, one program of 4 warps per SM looping over 124 rows each: its arithmetic waits beside its
    loads (0.248 ms fp32, 0.182 ms bf16 on the H200); bytes and waits alone gave 0.240 and 0.163 ms."""
    got = predict.item_10(load_impl(designs["row_loop"], backend="mini_triton"), dtype)
    us = dict(got.steps["fwdbwd"].kernels)["_rms_norm_backward_kernel"]
    measured = 1000 * dict(MEASURED["designs"]["row_loop"][dtype]["fwdbwd_kernels"])["_rms_norm_backward_kernel"]
    assert abs(us - measured) <= 0.05 * measured, (us, measured)
