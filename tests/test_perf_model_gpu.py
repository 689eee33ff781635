"""On a GPU: the performance model's prediction of item 10 against this GPU's measurement, design by design.

Each design of tests/perf_designs.py is timed as item 10 times it (tests/perf_model_gpu.py ``measure``: a CUDA
graph's replay at 16384 x 4096, as a share of a copy's bandwidth) and predicted from the simulator
(rmsnorm_testkit/predict.py, the course GPU in the wrappers' view, so a grid picked by device is the GPU's). A share
of a design already measured on the H200 (``DESIGNS``) more than 15 points from this GPU's fails: the model has
drifted from the GPU (a new Triton, a new driver), and its parameters (mini_triton/perf.py) need measuring again.
The further designs (``MORE``) are measured in the same run, for the record.
Skips without CUDA, and on a GPU the model has no parameters for. ``PERF_MEASURED=FILE`` takes the
measurements from a ``measure`` run just made on this machine instead of measuring again.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests"))
import perf_designs  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="measures a GPU: needs CUDA")
TOLERANCE = 15


def _model_name():
    from mini_triton import perf
    name = torch.cuda.get_device_name()
    return next((g for g in perf.GPUS if g.replace(" ", "").lower() in name.replace(" ", "").lower()), None)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    if _model_name() is None:
        pytest.skip(f"the model has no parameters for {torch.cuda.get_device_name()}")
    if os.environ.get("PERF_MEASURED"):                   # a measure run of this machine, just made
        return json.loads(Path(os.environ["PERF_MEASURED"]).read_text())
    out = tmp_path_factory.mktemp("perf") / "measured.json"
    p = subprocess.run([sys.executable, str(ROOT / "tests" / "perf_model_gpu.py"), "measure", str(out)],
                       capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.filterwarnings("ignore::mini_triton.OrderDependenceWarning")
@pytest.mark.parametrize("name", list(perf_designs.DESIGNS))
def test_on_this_gpu_each_design_is_predicted_within_15_points(measured, name, tmp_path):
    from rmsnorm_testkit import predict
    from rmsnorm_testkit.compare import load_impl
    path = tmp_path / f"{name}.py"
    path.write_text(perf_designs.DESIGNS[name][1]())
    impl = load_impl(path, backend="mini_triton")
    for dtype in ("fp32", "bf16"):
        got = predict.item_10(impl, dtype, gpu=_model_name())
        for kind in ("fwd", "fwdbwd"):
            m = measured["designs"][name][dtype].get(f"{kind}_share")
            assert m is not None, measured["designs"][name][dtype]
            assert abs(got.shares[kind] - m) <= TOLERANCE, (name, dtype, kind, round(got.shares[kind], 1), round(m, 1))
