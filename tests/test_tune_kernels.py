"""Every launch configuration tests/tune_kernels.py sweeps gives correct results (on the simulator)."""
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests"))


def test_every_swept_configuration_is_correct(monkeypatch, capsys):
    monkeypatch.setenv("MINI_TRITON", "1")
    import tune_kernels
    rc = tune_kernels.main(["--shapes", "32x256", "3x9000", "--dtypes", "fp32", "bf16"])
    out = capsys.readouterr().out
    assert rc == 0 and "WRONG" not in out, out
    assert out.count("bwd+sum") >= 2 * (18 + 9) and out.count("fwd ") >= 2 * (9 + 3)
