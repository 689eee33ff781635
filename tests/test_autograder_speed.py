"""Item 10's trusted side, checked on the CPU: the references at sampled rows and the verdicts."""
import pytest
import torch
from rmsnorm_testkit import scan

from autograder import speed
from autograder.judge import speed as verdict
from rmsnorm_testkit.compare import reference
from autograder.job.wire import protocol
from autograder.job.submission import host
from conftest import ROOT

timing = speed.timing                   # rmsnorm_testkit.timing, as the grader and the job import it


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


@pytest.mark.parametrize("what, elements", [("rmsnorm_fwd_kernel", 2), ("rmsnorm_bwd_kernel", 3), ("fwd", 2),
                                             ("fwdbwd", 5)])
def test_each_kernel_s_least_traffic_gives_the_elements_a_step_moves(what, elements):
    assert timing.least_elements(what) == elements
    assert timing.least_copies(what) == elements / 2              # a copy reads and writes each element once
    assert timing.least_bytes(what, (3, 8), "bfloat16") == elements * 3 * 8 * 2


def test_the_grader_s_figures_of_copies_and_bytes_are_derived_from_the_traffic_model():
    assert verdict.OWN_KERNELS == {"rmsnorm_fwd_kernel": 1.0, "rmsnorm_bwd_kernel": 1.5}
    assert verdict.LEAST_COPIES == {"fwd": (1.0, "read x, write y"),
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
        "sync": lambda: None, "empty": lambda *a, **k: torch.empty(1), "zero_": torch.Tensor.zero_})
    ms = timing.time_cuda(fn, warmup_ms=0.0, rep_ms=50.0, min_reps=5, rounds=3)
    assert ms == 2.0
    calls = next(clock)
    assert calls >= 3 * 5


# -- the verdicts on a timed step (the timing itself: tests/test_job_timed.py) ---------------------------------
SHAPE = (16, 32)


@pytest.mark.parametrize("info, says", [
    ({"fwd_graph_error": "RuntimeError: CUDA error: operation not permitted when stream is capturing"},
     "makes Python wait for the GPU"),
    ({"fwd_torch_work": [{"op": "pow", "reads": 512, "where": ""}]}, "ran torch's pow over 512 elements"),
    ({"fwd_inputs_changed": ["x"], "fwd_replays_wrong": 3}, "changed its input x while it was timed"),
    ({"fwd_replays_wrong": 2, "fwd_replays_checked": 9}, "2 of the 9 timed replays of your forward gave wrong"),
    ({"fwd_replay_error": "Stale: a launch of k with the grid ()"}, "the grader could not run your forward again"),
], ids=["not captured", "torch's work", "inputs changed", "wrong replays", "not replayed"])
def test_a_timing_that_cannot_be_graded_earns_nothing_and_says_why(info, says):
    refused = verdict.refusal("fwd", {"fwd_graph_ms": 1.0, **info})
    assert refused is not None and says in refused, refused
    ok, msg = verdict.gpu_verdict("fwd", "float32", SHAPE, {"fwd_graph_ms": 0.9, **info}, {"copy": 1.0, "fwd": 9.0},
                                  75, None)
    assert not ok and says in msg


def test_kernels_the_file_does_not_define_are_refused_and_pytorch_s_are_not():
    info = {"fwd_graph_ms": 1.0, "fwd_kernels": [["_rms_norm_forward_kernel", 0.6], ["void at::native::x<4>(y)", 0.4]]}
    refused = verdict.refusal("fwd", info, own={"rmsnorm_fwd_kernel", "rmsnorm_forward"})
    assert "ran kernels that your file does not define (_rms_norm_forward_kernel)" in refused, refused
    info["fwd_kernels"][0][0] = "rmsnorm_fwd_kernel"
    assert verdict.refusal("fwd", info, own={"rmsnorm_fwd_kernel", "rmsnorm_forward"}) is None
    assert scan.function_names("import triton\n@triton.jit\ndef k(x):\n    pass\ndef f():\n    def g():\n"
                               "        pass\n") == {"k", "f", "g"}


def test_a_tensor_subclass_is_refused_before_any_of_its_code_runs():
    touched = []

    class Lazy(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            touched.append(func)
            return super().__torch_function__(func, types, args, kwargs or {})

    class Mod:
        @staticmethod
        def rmsnorm_forward(x, g):
            return torch.zeros(2, 3).as_subclass(Lazy), None
    touched.clear()
    with pytest.raises(TypeError, match="y from rmsnorm_forward is Lazy, a subclass of torch.Tensor: return a plain"):
        host.recorded_step(Mod, "fwd", None, None, None)
    tensors, info = protocol.plain({"y": Mod.rmsnorm_forward(None, None)[0], "r": torch.ones(2)}, {})
    assert touched == [] and list(tensors) == ["r"] and "subclass of torch.Tensor" in info["not_tensors"]["y"]


def test_gpu_verdict_grades_percent_of_copy_and_names_kernels_and_host_time():
    shape = (16384, 4096)
    base = {"copy": 0.15, "fwd": 1.0, "fwd_graph": 0.9}            # copy: 2 * 256 MB in 0.15 ms
    info = {"fwd_graph_ms": 0.16,
            "fwd_kernels": [["rmsnorm_fwd_kernel", 0.155], ["void at::native::reduce_kernel<512, 1>(x)", 0.005]]}
    ok, msg = verdict.gpu_verdict("fwd", "float32", shape, info, base, 75, None)
    assert ok and "the GPU ran your forward in 0.160 ms (replayed from a CUDA graph)" in msg and "94% of copy" in msg
    assert "75% needed" in msg and "5.62x as fast as eager PyTorch's kernels" in msg
    assert "rmsnorm_fwd_kernel 0.155 ms (1.0 copies)" in msg and "at least 1 copy (" in msg
    assert "at::native::reduce_kernel (PyTorch) 0.005 ms" in msg
    assert "To go faster" not in msg
    from autograder.calibrate import GPU, KX
    m, k = GPU.search(msg), KX.search(msg)
    assert m["how"] == "replayed" and int(m["pct"]) == 94 and float(k["x"]) == 5.62

    ok, msg = verdict.gpu_verdict("fwd", "float32", shape, dict(info, fwd_graph_ms=0.3), base, 75, None)
    assert not ok and "50% of copy" in msg

    ok, msg = verdict.gpu_verdict("fwd", "float32", shape, dict(info, fwd_graph_ms=0.01), base, 75, None)
    assert not ok and "faster than copying the data" in msg and "not used" in msg


@pytest.mark.parametrize("kernels, says", [
    ([["rmsnorm_fwd_kernel", 0.15], ["void at::native::elementwise_kernel<4>(x)", 0.3]],
     "67% of this GPU time is PyTorch operations"),
    ([["rmsnorm_fwd_kernel", 0.225]], "rmsnorm_fwd_kernel takes as long as 1.5 copies of x where 1 is the least"),
    ([["my_kernel", 0.3]], "move fewer bytes: read x (and dy) once"),
], ids=["pytorch ops", "slow own kernel", "unknown kernel"])
def test_a_failing_part_says_where_the_time_went_and_what_to_try(kernels, says):
    base = {"copy": 0.15, "fwd": 1.0}
    info = {"fwd_graph_ms": sum(ms for _, ms in kernels), "fwd_kernels": kernels}
    ok, msg = verdict.gpu_verdict("fwd", "float32", (16384, 4096), info, base, 75, None)
    assert not ok and "To go faster: " in msg and says in msg and "`make bench`" in msg, msg


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


class _NoDg(torch.autograd.Function):
    """RMSNorm whose backward returns dx and no dg (as a backward that drops g's gradient does)."""

    @staticmethod
    def forward(ctx, x, g):
        ctx.save_for_backward(x, g)
        return reference(x, g)[0].to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        x, g = ctx.saved_tensors
        return torch.zeros_like(x), None


def test_a_backward_without_dg_costs_the_forward_backward_parts_and_not_the_forward_s():
    """The forward is timed on its own: a backward that fails (here, no dg) leaves 10.1 and 10.2 graded, and
    10.3 and 10.4 say the forward+backward was not timed and that item 3 charges the missing dg."""
    import types
    mod = types.SimpleNamespace(rmsnorm_forward=lambda x, g: reference(x, g)[:2], rmsnorm=_NoDg.apply)
    x, g, dy = timing.speed_inputs((8, 16), "float32", 1)
    assert set(host.recorded_step(mod, "fwd", x, g, dy)) == {"y"}
    with pytest.raises(host.NoDg) as error:
        host.recorded_step(mod, "fwdbwd", x, g, dy)
    message = verdict.not_timed("x of shape (8, 16) fp32", f"TypeError: {error.value}", "no_dg_backward")
    assert "returned no dg" in str(error.value) and "was not timed" in message
    assert "item 3 charges the missing dg" in message
