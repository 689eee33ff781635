"""Item 10's trusted side, checked on the CPU: the references at sampled rows and the verdicts."""
import pytest
import torch

from autograder import speed
from autograder.check import compare, reference
from autograder.job import speed as job_speed
from conftest import ROOT
from fake_gpu import FakeGPU

timing = speed.timing                   # rmsnorm_timing, as the grader and the job load it


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_reference_at_sampled_rows_is_the_full_reference_at_those_rows(dtype):
    shape, rows = (64, 48), [0, 5, 63]
    xs, ref = speed.reference_at_rows(shape, dtype, 7, rows, device="cpu")
    x, g, dy = timing.speed_inputs(shape, dtype, 7)
    y, _, dx, dg = reference(x, g, dy)
    assert torch.equal(xs, x[rows])
    for name, full in (("y", y[rows]), ("dx", dx[rows]), ("dg", dg)):
        assert torch.equal(ref[name], full), name


def test_speed_inputs_are_the_same_for_grader_and_submission():
    a, b = timing.speed_inputs((8, 16), "bfloat16", 3), timing.speed_inputs((8, 16), "bfloat16", 3)
    assert all(torch.equal(p, q) for p, q in zip(a, b)) and a[0].dtype == torch.bfloat16


def test_verdict_reports_bandwidth_and_rejects_faster_than_copy():
    shape = (16384, 4096)
    base = {"fwd": 1.0, "fwdbwd": 3.0, "copy": 0.15}             # copy: 2 * 256 MB in 0.15 ms = 3579 GB/s
    ok, msg = speed.verdict("fwd", "float32", shape, 0.16, base, 2.5)
    assert ok and "GB/s" in msg and "% of copy bandwidth" in msg and "6.25x PyTorch eager" in msg
    ok, msg = speed.verdict("fwd", "float32", shape, 0.5, base, 2.5)
    assert not ok and "2.00x PyTorch eager" in msg
    ok, msg = speed.verdict("fwd", "float32", shape, 0.01, base, 2.5)
    assert not ok and "faster than copying" in msg
    assert speed.traffic_bytes("fwdbwd", shape, "bfloat16") == 5 * 16384 * 4096 * 2


@pytest.mark.parametrize("what, elements", [("rmsnorm_fwd_kernel", 2), ("rmsnorm_bwd_kernel", 3), ("fwd", 2),
                                             ("fwdbwd", 5)])
def test_each_kernel_s_least_traffic_gives_the_elements_a_step_moves(what, elements):
    assert timing.least_elements(what) == elements
    assert timing.least_copies(what) == elements / 2              # a copy reads and writes each element once
    assert timing.least_bytes(what, (3, 8), "bfloat16") == elements * 3 * 8 * 2


def test_the_grader_s_figures_of_copies_and_bytes_are_derived_from_the_traffic_model():
    assert speed.OWN_KERNELS == {"rmsnorm_fwd_kernel": 1.0, "rmsnorm_bwd_kernel": 1.5}
    assert speed.LEAST_COPIES == {"fwd": (1.0, "read x, write y"),
                                  "fwdbwd": (2.5, "forward 1; backward 1.5: read x and dy, write dx")}
    assert speed.traffic_bytes("fwd", (16, 32), "float32") == timing.copy_bytes((16, 32), "float32") == 2 * 16 * 32 * 4


def test_time_cuda_takes_the_best_median_of_its_rounds(monkeypatch):
    """time_cuda's logic with CPU stand-ins for CUDA events: each round's median, then the best round."""
    import itertools
    clock = itertools.count()
    durations = iter([5.0] * 6 + [2.0] * 10_000)          # a slow start, then steady 2 ms calls

    class Event:
        def __init__(self, enable_timing=True):
            self.t = None
    now = {"t": 0.0}

    def fn():
        now["t"] += next(durations)
        next(clock)
    monkeypatch.setattr(timing, "CUDA", {
        "event": Event, "record": lambda ev: setattr(ev, "t", now["t"]), "elapsed": lambda a, b: b.t - a.t,
        "sync": lambda: None, "empty": lambda *a, **k: torch.empty(1)})
    ms = timing.time_cuda(fn, warmup_ms=0.0, rep_ms=50.0, min_reps=5, rounds=3)
    assert ms == 2.0
    calls = next(clock)
    assert calls >= 3 * 5


# -- kernels timed alone: a CUDA graph's replay, or the profiler, with CPU stand-ins --------------------
SHAPE, SEED = (16, 32), 5


def stand_in(gpu, cheat=None, sync=False):
    """A submission's rmsnorm_forward on the fake GPU. cheat="capture": while a graph is captured, its
    kernel copies the y of its last call instead of computing; cheat="profiler": while profiled, it
    launches a copy of its last y; sync: it reads a value back to the host (not capturable)."""
    class Mod:
        last = None

        @staticmethod
        def rmsnorm_forward(x, g):
            if sync and gpu.capturing is not None:
                raise RuntimeError("CUDA error: operation not permitted when stream is capturing")
            y = torch.empty_like(x)
            lazy = ((cheat == "capture" and gpu.capturing is not None)
                    or (cheat == "profiler" and gpu.profiling is not None))
            if lazy and Mod.last is not None:
                last = Mod.last
                gpu.launch(lambda: y.copy_(last), name="copy_kernel")
            else:
                gpu.launch(lambda: y.copy_(reference(x, g)[0].to(x.dtype)))
            Mod.last = y
            return y, None
    return Mod


def timed(gpu, mod, monkeypatch):
    """The job's gpu_timed, forward, on the CPU: (info, outputs of the graded run, the reference they need)."""
    monkeypatch.setattr(timing, "CUDA", gpu.table)
    info, rows = {"fwd_ms": 9.0}, torch.tensor([0, 3, 15])
    task = {"shape": SHAPE, "dtype": "float32", "seed": SEED, "device": "cpu"}
    got = job_speed.gpu_timed(mod, "fwd", ("y",), task, rows, info)
    seed = SEED + (job_speed.GRAPH_SEED if "fwd_graph_ms" in info else job_speed.PROFILE_SEED)
    x, ref = speed.reference_at_rows(SHAPE, "float32", seed, rows.tolist(), device="cpu")
    return info, got, compare("y", got["y"], ref["y"], x) if "y" in got else "no y"


def test_graph_replay_times_the_kernels_on_inputs_never_seen_before(monkeypatch):
    gpu = FakeGPU()
    info, got, wrong = timed(gpu, stand_in(gpu), monkeypatch)
    assert info["fwd_graph_ms"] == 1.0 and wrong is None          # one kernel per replay, right outputs
    assert info["fwd_kernels"] == [["rmsnorm_fwd_kernel", 1.0]] and "fwd_profiled_ms" not in info


def test_a_captured_step_that_copies_earlier_outputs_is_caught(monkeypatch):
    gpu = FakeGPU()
    info, got, wrong = timed(gpu, stand_in(gpu, cheat="capture"), monkeypatch)
    assert info["fwd_graph_ms"] == 1.0 and wrong is not None      # as fast as honest work, but stale y
    ok, msg = speed.gpu_verdict("fwd", "float32", SHAPE, info, {"copy": 1.0, "fwd": 9.0}, 75, wrong, 3.2)
    assert not ok and "gave wrong outputs" in msg and "under a CUDA graph or the profiler" in msg


def test_a_step_that_cannot_be_captured_is_timed_by_the_profiler(monkeypatch):
    gpu = FakeGPU()
    info, got, wrong = timed(gpu, stand_in(gpu, sync=True), monkeypatch)
    assert "operation not permitted when stream is capturing" in info["fwd_graph_error"]
    assert info["fwd_profiled_ms"] == 1.0 and wrong is None
    ok, msg = speed.gpu_verdict("fwd", "float32", SHAPE, info, {"copy": 1.0, "fwd": 9.0}, 75, wrong, 3.2)
    assert ok and "the profiler's sum of the kernels' durations" in msg and "makes Python wait for the GPU" in msg


def test_a_profiled_step_that_copies_earlier_outputs_is_caught(monkeypatch):
    gpu = FakeGPU()
    mod = stand_in(gpu, sync=True, cheat="profiler")
    info, got, wrong = timed(gpu, mod, monkeypatch)
    assert info["fwd_kernels"] == [["copy_kernel", 1.0]] and wrong is not None


def test_gpu_verdict_grades_percent_of_copy_and_names_kernels_and_host_time():
    shape = (16384, 4096)
    base = {"copy": 0.15, "fwd": 1.0, "fwd_graph": 0.9}            # copy: 2 * 256 MB in 0.15 ms
    info = {"fwd_ms": 0.5, "fwd_graph_ms": 0.16,
            "fwd_kernels": [["rmsnorm_fwd_kernel", 0.155], ["void at::native::reduce_kernel<512, 1>(x)", 0.005]]}
    ok, msg = speed.gpu_verdict("fwd", "float32", shape, info, base, 75, None, 3.2)
    assert ok and "the GPU ran your forward in 0.160 ms (replayed from a CUDA graph)" in msg and "94% of copy" in msg
    assert "75% needed" in msg and "5.62x as fast as eager PyTorch's kernels" in msg
    assert "rmsnorm_fwd_kernel 0.155 ms (1.0 copies)" in msg and "at least 1 copy (" in msg
    assert "at::native::reduce_kernel (PyTorch) 0.005 ms" in msg
    assert "0.340 ms of it is host time" in msg and "not graded" in msg and "To go faster" not in msg
    from autograder.calibrate import GPU, KX, WALL
    m, k, w = GPU.search(msg), KX.search(msg), WALL.search(msg)
    assert m["how"] == "replayed" and int(m["pct"]) == 94 and float(k["x"]) == 5.62 and float(w["x"]) == 2.0

    ok, msg = speed.gpu_verdict("fwd", "float32", shape, dict(info, fwd_graph_ms=0.3, fwd_ms=0.3), base, 75, None,
                                3.2)
    assert not ok and "50% of copy" in msg and "the host's work (Python, autograd, launches) overlapped" in msg

    ok, msg = speed.gpu_verdict("fwd", "float32", shape, dict(info, fwd_graph_ms=0.01), base, 75, None, 3.2)
    assert not ok and "faster than copying the data" in msg and "not used" in msg


@pytest.mark.parametrize("kernels, says", [
    ([["rmsnorm_fwd_kernel", 0.15], ["void at::native::elementwise_kernel<4>(x)", 0.3]],
     "67% of this GPU time is PyTorch operations"),
    ([["rmsnorm_fwd_kernel", 0.225]], "rmsnorm_fwd_kernel takes as long as 1.5 copies of x where 1 is the least"),
    ([["my_kernel", 0.3]], "move fewer bytes: read x (and dy) once"),
], ids=["pytorch ops", "slow own kernel", "unknown kernel"])
def test_a_failing_part_says_where_the_time_went_and_what_to_try(kernels, says):
    base = {"copy": 0.15, "fwd": 1.0}
    info = {"fwd_ms": 0.5, "fwd_graph_ms": sum(ms for _, ms in kernels), "fwd_kernels": kernels}
    ok, msg = speed.gpu_verdict("fwd", "float32", (16384, 4096), info, base, 75, None, 3.2)
    assert not ok and "To go faster: " in msg and says in msg and "`make bench`" in msg, msg


def test_without_any_gpu_time_the_wall_time_is_graded():
    shape = (16384, 4096)
    base = {"copy": 0.15, "fwd": 1.0}
    info = {"fwd_ms": 0.25, "fwd_graph_error": "RuntimeError: x", "fwd_profile_error": "RuntimeError: no CUPTI"}
    ok, msg = speed.gpu_verdict("fwd", "float32", shape, info, base, 75, None, 3.2)
    assert ok and "4.00x PyTorch eager" in msg and "the wall time was graded" in msg
    ok, msg = speed.gpu_verdict("fwd", "float32", shape, dict(info, fwd_ms=0.5), base, 75, None, 3.2)
    assert not ok and "2.00x PyTorch eager" in msg


def test_a_failed_capture_names_the_first_error_and_the_submissions_line(tmp_path):
    """A sync under capture raises inside torch, called from the submission's line; the capture then fails
    again as it ends, with the first error as its context. The message gives the first error and the line."""
    from pathlib import Path
    ns = {}
    torch_side = ("def item():\n    raise RuntimeError('CUDA error: operation not permitted when stream is "
                  "capturing\\nCUDA kernel errors might be asynchronously reported')\n")
    exec(compile(torch_side, str(Path(torch.__file__).parent / "_fake_sync.py"), "exec"), ns)
    sub = tmp_path / "rmsnorm.py"
    sub.write_text("def forward(item):\n    if item():\n        raise ValueError('nan')\n")
    exec(compile(sub.read_text(), str(sub), "exec"), ns)
    with pytest.raises(RuntimeError) as info:
        try:
            ns["forward"](ns["item"])
        except RuntimeError:
            raise RuntimeError("CUDA error: operation failed due to a previous error during capture")
    msg = timing.capture_failure(info.value)
    assert msg.startswith("RuntimeError: CUDA error: operation not permitted when stream is capturing"), msg
    assert "asynchronously" not in msg and msg.endswith("raised at rmsnorm.py line 2: if item():"), msg


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only message")
def test_calibrate_without_a_gpu_says_it_needs_one_instead_of_grading(capsys):
    from autograder import calibrate
    assert calibrate.main([str(ROOT / "solution" / "rmsnorm.py"), "--runs", "1"]) == 2
    assert "needs a CUDA GPU and none is visible here" in capsys.readouterr().err
