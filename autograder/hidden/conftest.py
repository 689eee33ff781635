"""Fixtures of the hidden tests: one sandboxed run of the submission serves many tests."""
import os
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for p in (ROOT, ROOT / "starter" / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from autograder import runner, sandbox  # noqa: E402

SHAPES = {"a": (37, 100), "b": (4, 16, 64), "c": (2, 3, 513), "d": (256, 128)}


def make_inputs():
    gen = torch.Generator().manual_seed(1234)
    out = {}
    for k, shape in SHAPES.items():
        out[f"x_{k}"] = torch.randn(*shape, generator=gen)
        out[f"g_{k}"] = torch.rand(shape[-1], generator=gen) + 0.5
        out[f"dy_{k}"] = torch.randn(*shape, generator=gen)
    return out


def make_tasks():
    tasks = {}
    for k in SHAPES:
        t = {"x": f"x_{k}", "g": f"g_{k}", "dy": f"dy_{k}"}
        tasks[f"fwd_{k}"] = {"op": "forward", "tensors": {"x": t["x"], "g": t["g"]}, "host_ops": True}
        tasks[f"ag_{k}"] = {"op": "autograd", "tensors": t, "host_ops": True}
    return tasks


@pytest.fixture(scope="session")
def run():
    """(inputs, outcome) of the submission on every task, on the simulator."""
    submission = Path(os.environ["RMSNORM_SUBMISSION"])
    inputs = make_inputs()
    limits = sandbox.Limits(timeout_s=float(os.environ.get("RMSNORM_TIMEOUT", 120)))
    return inputs, runner.run_job(submission, make_tasks(), inputs, limits=limits)
