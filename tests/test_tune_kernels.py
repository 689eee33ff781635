"""Every launch configuration tests/tune_kernels.py sweeps gives correct results (on the simulator)."""
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tests"))


def test_every_swept_configuration_is_correct(monkeypatch, capsys):
    monkeypatch.setenv("MINI_TRITON", "1")
    import tune_kernels
    rc = tune_kernels.main(["--shapes", "32x256", "3x20000", "--dtypes", "fp32", "bf16"])
    out = capsys.readouterr().out
    assert rc == 0 and "WRONG" not in out, out
    grid, fwd = tune_kernels.SIM_BWD_GRID, tune_kernels.FWD_GRID
    per_pass = len(grid["per_sm"]) * len(grid["warps"]) * len(grid["stages"])
    # 32x256: one pass, every BLOCK_M; 3x20000: chunked (BLOCK_M=1) and single pass (every BLOCK_M).
    n_bm = len(grid["block_m"])
    assert out.count("bwd+sum") == 2 * per_pass * (n_bm + 1 + n_bm), out
    assert out.count("fwd ") == 2 * len(fwd["warps"]) * (len(fwd["block_m"]) + 1 + len(fwd["block_m"])), out


def test_warps_can_be_chosen_up_to_triton_s_32(monkeypatch, capsys):
    monkeypatch.setenv("MINI_TRITON", "1")
    import tune_kernels
    rc = tune_kernels.main(["--shapes", "8x256", "--dtypes", "fp32", "--warps", "32"])
    out = capsys.readouterr().out
    assert rc == 0 and "WRONG" not in out, out
    lines = [ln for ln in out.splitlines() if ln.strip().startswith(("fwd ", "bwd+sum"))]
    assert lines and all("warps=32" in ln for ln in lines), out


def test_block_m_programs_and_stages_can_be_chosen(monkeypatch, capsys):
    monkeypatch.setenv("MINI_TRITON", "1")
    import tune_kernels
    rc = tune_kernels.main(["--shapes", "64x128", "--dtypes", "fp32", "--kernels", "bwd", "--warps", "4",
                            "--block-m", "8", "16", "--per-sm", "4", "--stages", "2"])
    out = capsys.readouterr().out
    assert rc == 0 and "WRONG" not in out, out
    lines = [ln for ln in out.splitlines() if ln.strip().startswith("bwd+sum")]
    assert sorted(ln.split()[2] for ln in lines) == ["BLOCK_M=16", "BLOCK_M=8"], out
    assert all("programs=4xSM" in ln and "stages=2" in ln for ln in lines), out


def test_step_mode_times_the_whole_step_for_each_backward_configuration(monkeypatch, capsys):
    monkeypatch.setenv("MINI_TRITON", "1")
    import tune_kernels
    rc = tune_kernels.main(["--shapes", "40x256", "--dtypes", "bf16", "--kernels", "step", "--warps", "4", "8",
                            "--block-m", "1", "2", "--per-sm", "2"])
    out = capsys.readouterr().out
    assert rc == 0 and "WRONG" not in out, out
    lines = [ln for ln in out.splitlines() if ln.strip().startswith("step")]
    assert len(lines) == 4, out
    assert not any(ln.strip().startswith(("fwd ", "bwd+sum")) for ln in out.splitlines()), out


def test_step_mode_reports_a_wrong_configuration(monkeypatch, capsys):
    """A configuration whose step gives wrong gradients is marked WRONG, and the exit status says so."""
    monkeypatch.setenv("MINI_TRITON", "1")
    import tune_kernels
    impl = tune_kernels.load_impl(tune_kernels.ROOT / "solution" / "rmsnorm.py")
    monkeypatch.setattr(tune_kernels, "load_impl", lambda path: impl)
    real = impl.rmsnorm_backward
    monkeypatch.setattr(impl, "rmsnorm_backward", lambda *a, **k: tuple(t * 2 for t in real(*a, **k)))
    rc = tune_kernels.main(["--shapes", "8x128", "--dtypes", "fp32", "--kernels", "step", "--warps", "4",
                            "--block-m", "1", "--per-sm", "2"])
    out = capsys.readouterr().out
    assert rc == 1 and "WRONG" in out, out
