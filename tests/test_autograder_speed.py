"""Item 10's trusted side, checked on the CPU: the references at sampled rows and the verdicts."""
import pytest
import torch

from autograder import speed
from autograder.check import reference


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_reference_at_sampled_rows_is_the_full_reference_at_those_rows(dtype):
    shape, rows = (64, 48), [0, 5, 63]
    xs, ref = speed.reference_at_rows(shape, dtype, 7, rows, device="cpu")
    x, g, dy = speed.speed_inputs(shape, dtype, 7)
    y, _, dx, dg = reference(x, g, dy)
    assert torch.equal(xs, x[rows])
    for name, full in (("y", y[rows]), ("dx", dx[rows]), ("dg", dg)):
        assert torch.equal(ref[name], full), name


def test_speed_inputs_are_the_same_for_grader_and_submission():
    a, b = speed.speed_inputs((8, 16), "bfloat16", 3), speed.speed_inputs((8, 16), "bfloat16", 3)
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


def test_time_cuda_takes_the_best_median_of_its_rounds(monkeypatch):
    """time_cuda's logic with CPU stand-ins for CUDA events: each round's median, then the best round."""
    import itertools
    from autograder import worker
    clock = itertools.count()
    durations = iter([5.0] * 6 + [2.0] * 10_000)          # a slow start, then steady 2 ms calls

    class Event:
        def __init__(self, enable_timing=True):
            self.t = None
    now = {"t": 0.0}

    def fn():
        now["t"] += next(durations)
        next(clock)
    monkeypatch.setattr(worker, "_CUDA", {
        "event": Event, "record": lambda ev: setattr(ev, "t", now["t"]), "elapsed": lambda a, b: b.t - a.t,
        "sync": lambda: None, "empty": lambda *a, **k: torch.empty(1)})
    ms = worker.time_cuda(fn, warmup_ms=0.0, rep_ms=50.0, min_reps=5, rounds=3)
    assert ms == 2.0
    calls = next(clock)
    assert calls >= 3 * 5
