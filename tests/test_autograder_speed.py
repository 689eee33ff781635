"""Item 10's trusted side, checked on the CPU: the references at sampled rows and the verdicts."""
import pytest
import torch
from rmsnorm_testkit import scan

from autograder import speed
from autograder.judge import speed as verdict
from rmsnorm_testkit.compare import compare, reference
from autograder.job.wire import protocol
from autograder.job.submission import speed as job_speed
from conftest import ROOT
from fake_gpu import FakeGPU

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


# -- kernels timed alone: a CUDA graph's replay, with CPU stand-ins (fake_gpu.py) --------------------------
SHAPE = (16, 32)


class _PassThrough(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _left_mode():
    mode = _PassThrough()
    mode.__enter__()
    return mode


def _left_patch():
    measured = timing.time_cuda
    timing.time_cuda = lambda fn, **kw: measured(fn, **kw) / 12
    return measured


# what a step leaves behind that could run its code while it is timed (undone by the test that made it)
LEFT_BEHIND = {"hook": lambda: __import__("sys").setprofile(lambda *a: None), "mode": _left_mode,
               "patch": _left_patch}


def _undo(cheat, left):
    if cheat == "hook":
        __import__("sys").setprofile(None)
    elif cheat == "mode":
        left[0].__exit__(None, None, None)
    elif cheat == "patch":
        timing.time_cuda = left[0]


def stand_in(gpu, cheat=None):
    """A submission's rmsnorm_forward on the fake GPU, honest unless ``cheat`` says:
    "capture": while captured, its kernel copies the y of its last call instead of computing;
    "sync": it reads a value back to the host (not capturable); "unjoined": it leaves work on a side stream;
    "torch": torch computes y on the host; "thread": it starts a thread that outlives the call;
    "inputs": its kernel also writes into x; "rows": it computes every other row only;
    "lazy": it returns a subclass of torch.Tensor; "hook", "mode", "patch": it leaves a profile hook, a torch
    function mode or a replaced timing function behind when it returns (``LEFT_BEHIND``)."""
    class Lazy(torch.Tensor):
        pass

    class Mod:
        last, calls, threads, left = None, [], [], []

        @staticmethod
        def rmsnorm_forward(x, g):
            Mod.calls.append("call")
            if gpu.capturing is not None and cheat in ("sync", "unjoined"):
                raise RuntimeError("CUDA error: operation not permitted when stream is capturing" if cheat == "sync"
                                   else "CUDA error: capturing stream has unjoined work")
            y = torch.empty_like(x)
            if cheat == "capture" and gpu.capturing is not None and Mod.last is not None:
                last = Mod.last
                gpu.launch(lambda: y.copy_(last), name="copy_kernel")
            elif cheat == "torch":
                y = (x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-5) * g).to(x.dtype)
                gpu.launch(lambda: None, name="at::native::elementwise_kernel")     # the GPU's side of it
            else:
                def kernel():
                    y.copy_(reference(x, g)[0].to(x.dtype))
                    if cheat == "rows":
                        y[1::2] = 0
                    if cheat == "inputs":
                        x.mul_(2)
                gpu.launch(kernel)
            if cheat in LEFT_BEHIND and gpu.capturing is not None and not Mod.left:
                Mod.left.append(LEFT_BEHIND[cheat]())     # installed while captured, never removed
            if cheat == "thread" and gpu.capturing is not None:
                import threading
                Mod.threads.append(threading.Thread(target=__import__("time").sleep, args=(0.5,), daemon=True))
                Mod.threads[-1].start()
            Mod.last = y
            return (y.as_subclass(Lazy) if cheat == "lazy" else y), None
    return Mod


def timed(gpu, mod, monkeypatch):
    """The job's gpu_timed, forward, on the CPU: (info, the replay's outputs, what is wrong with them, why the
    replay is not graded)."""
    monkeypatch.setattr(timing, "CUDA", gpu.table)
    monkeypatch.setattr(job_speed, "SEALED", {})
    job_speed.seal()                                  # as the job does before it imports the submission
    info = {"fwd_ms": 9.0, "seeds": {}, "threads": 0}
    got = job_speed.gpu_timed(mod, "fwd", ("y",), {"shape": SHAPE, "dtype": "float32", "device": "cpu"}, info)
    wrong = "no y"
    if "y" in got:
        x, ref = speed.full_reference(SHAPE, "float32", info["seeds"]["fwd"], device="cpu")
        wrong = compare("y", got["y"], ref["y"], x)
    return info, got, wrong, verdict.refusal("fwd", info)


def test_graph_replay_times_the_kernels_on_secret_inputs_and_returns_whole_outputs(monkeypatch):
    gpu = FakeGPU()
    info, got, wrong, refused = timed(gpu, stand_in(gpu), monkeypatch)
    assert info["fwd_graph_ms"] == 1.0 and wrong is None and refused is None  # one kernel per replay, right y
    assert got["y"].shape == SHAPE                                            # every row, not a sample
    assert info["fwd_kernels"] == [["rmsnorm_fwd_kernel", 1.0]]               # the profiler: feedback only
    assert info["fwd_torch_work"] == [] and info["fwd_inputs_changed"] == [] and info["threads"] == 0


def test_the_replayed_inputs_seed_is_drawn_after_the_capture_and_is_new_every_grading(monkeypatch):
    """The job draws every seed from the OS when it needs it; the replay's after the step's last call before
    the replay, so no code of the submission's has seen it when the replay runs."""
    gpu = FakeGPU()
    mod = stand_in(gpu)
    draws = []

    def urandom(n):
        draws.append(len(mod.calls))                  # how many calls of the submission came before the draw
        return __import__("os").urandom(n)
    monkeypatch.setattr(job_speed, "URANDOM", urandom)
    replays = []
    replay = gpu.table["replay"]
    gpu.table["replay"] = lambda g: (replays.append(len(mod.calls)), replay(g))
    info, *_ = timed(gpu, mod, monkeypatch)
    decoy, graph = draws[0], draws[1]
    capture_calls = 4                                 # 3 warm-up calls, then the captured one
    assert decoy == 0 and graph == capture_calls and set(replays) == {capture_calls}
    assert draws.count(capture_calls) >= 3 * 25      # new inputs before every timed replay (3 rounds of 25 at least)
    seeds = {timed(other, stand_in(other), monkeypatch)[0]["seeds"]["fwd"] for other in (FakeGPU() for _ in range(3))}
    assert len(seeds) == 3


@pytest.mark.parametrize("cheat", ["capture", "rows"])
def test_a_replay_whose_outputs_are_wrong_anywhere_is_caught(monkeypatch, cheat):
    """Outputs kept from an earlier call, and a forward that computes every other row: the replay's whole
    outputs are compared, so no row is left unchecked."""
    gpu = FakeGPU()
    info, got, wrong, refused = timed(gpu, stand_in(gpu, cheat=cheat), monkeypatch)
    assert info["fwd_graph_ms"] == 1.0 and wrong is not None and refused is None
    ok, msg = verdict.gpu_verdict("fwd", "float32", SHAPE, info, {"copy": 1.0, "fwd": 9.0}, 75, wrong)
    assert not ok and "gave wrong outputs" in msg and "keep outputs from an earlier call" in msg


@pytest.mark.parametrize("cheat, says", [
    ("sync", "makes Python wait for the GPU"),
    ("unjoined", "launches work on another CUDA stream and does not make the current stream wait for it"),
    ("torch", "ran torch's"),
    ("thread", "other Python threads were running"),
    ("inputs", "changed its input x while it was timed"),
    ("hook", "a profile or trace hook"),
    ("mode", "a torch function or dispatch mode"),
    ("patch", "a change to the grader's timing code (rmsnorm_testkit.timing.time_cuda)"),
])
def test_a_replay_that_cannot_be_graded_earns_nothing_and_says_why(monkeypatch, cheat, says):
    gpu = FakeGPU()
    mod = stand_in(gpu, cheat=cheat)
    try:
        info, got, wrong, refused = timed(gpu, mod, monkeypatch)
    finally:
        _undo(cheat, mod.left)
    for thread in mod.threads:
        thread.join()
    assert refused is not None and says in refused, refused
    ok, msg = verdict.gpu_verdict("fwd", "float32", SHAPE, dict(info, fwd_graph_ms=0.9), {"copy": 1.0, "fwd": 9.0},
                                75, None)
    assert not ok and says in msg
    if cheat in ("sync", "unjoined"):
        assert "earns no points here" in msg and "fwd_graph_ms" not in info


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
        job_speed.forward_step(Mod, None, None)()
    tensors, info = protocol.plain({"y": Mod.rmsnorm_forward(None, None)[0], "r": torch.ones(2)}, {})
    assert touched == [] and list(tensors) == ["r"] and "subclass of torch.Tensor" in info["not_tensors"]["y"]


def test_gpu_verdict_grades_percent_of_copy_and_names_kernels_and_host_time():
    shape = (16384, 4096)
    base = {"copy": 0.15, "fwd": 1.0, "fwd_graph": 0.9}            # copy: 2 * 256 MB in 0.15 ms
    info = {"fwd_ms": 0.5, "fwd_graph_ms": 0.16,
            "fwd_kernels": [["rmsnorm_fwd_kernel", 0.155], ["void at::native::reduce_kernel<512, 1>(x)", 0.005]]}
    ok, msg = verdict.gpu_verdict("fwd", "float32", shape, info, base, 75, None)
    assert ok and "the GPU ran your forward in 0.160 ms (replayed from a CUDA graph)" in msg and "94% of copy" in msg
    assert "75% needed" in msg and "5.62x as fast as eager PyTorch's kernels" in msg
    assert "rmsnorm_fwd_kernel 0.155 ms (1.0 copies)" in msg and "at least 1 copy (" in msg
    assert "at::native::reduce_kernel (PyTorch) 0.005 ms" in msg
    assert "0.340 ms of it is host time" in msg and "not graded" in msg and "To go faster" not in msg
    from autograder.calibrate import GPU, KX, WALL
    m, k, w = GPU.search(msg), KX.search(msg), WALL.search(msg)
    assert m["how"] == "replayed" and int(m["pct"]) == 94 and float(k["x"]) == 5.62 and float(w["x"]) == 2.0

    ok, msg = verdict.gpu_verdict("fwd", "float32", shape, dict(info, fwd_graph_ms=0.3, fwd_ms=0.3), base, 75, None)
    assert not ok and "50% of copy" in msg and "the host's work (Python, autograd, launches) overlapped" in msg

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
    info = {"fwd_ms": 0.5, "fwd_graph_ms": sum(ms for _, ms in kernels), "fwd_kernels": kernels}
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


def test_a_backward_without_dg_costs_the_forward_backward_parts_and_not_the_forward_s(monkeypatch):
    """The forward is timed on its own: a backward that fails (here, no dg) leaves 10.1 and 10.2 graded, and
    10.3 and 10.4 say the forward+backward was not timed and that item 3 charges the missing dg."""
    import types
    mod = types.SimpleNamespace(rmsnorm_forward=lambda x, g: reference(x, g)[:2], rmsnorm=_NoDg.apply)
    timed = []
    monkeypatch.setattr(timing, "time_cuda", lambda step, **kw: (step(), 1.0)[1])
    monkeypatch.setattr(job_speed, "gpu_timed", lambda mod, kind, names, task, info: timed.append(kind) or {})
    tensors, info = job_speed.run_speed(mod, {"shape": (8, 16), "dtype": "float32", "device": "cpu"})
    assert timed == ["fwd"] and info["fwd_ms"] == 1.0 and "fwdbwd_ms" not in info
    assert "y" in tensors and "dx" not in tensors and len(info["rows"]) >= 1
    assert job_speed.NO_DG in info["fwdbwd_error"], info
    message = verdict.not_timed("x of shape (8, 16) fp32", info["fwdbwd_error"])
    assert "was not timed" in message and "item 3 charges the missing dg" in message


@torch.library.custom_op("speed_tests::wrapped", mutates_args=())
def _wrapped(x: torch.Tensor, host_math: bool) -> torch.Tensor:
    """A step's work in a torch.library custom op: a stand-in kernel's copy, or torch's own math."""
    return x * 2 if host_math else x.clone()


@pytest.mark.parametrize("host_math", [False, True])
def test_the_torch_work_watch_looks_inside_a_custom_op(host_math):
    """A custom op is its body's work: kernels wrapped in one (to keep torch.compile out) are not torch's work, and
    torch math inside one is."""
    x = torch.randn(64, 64)
    with job_speed.TorchWork(limit=x.numel() // 4) as watch:
        _wrapped(x, host_math)
    assert [w["op"] for w in watch.found] == (["mul"] if host_math else [])
