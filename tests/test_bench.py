"""`make bench` on the CPU: the simulator's traffic table and its plot."""
import re
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "starter"))
import bench  # noqa: E402
from benchmark import measure, plots, schedule, tables, traffic  # noqa: E402
from rmsnorm_testkit import timing  # noqa: E402
from fake_gpu import FakeGPU  # noqa: E402


def test_traffic_table_and_plot_on_the_simulator(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MINI_TRITON", "1")                              # the simulator's table, GPU or not
    assert bench.main(["--impl", str(ROOT / "solution" / "rmsnorm.py"), "--shapes", "64x128", "2x32768",
                       "--out", str(tmp_path)]) == 0
    rows = sim_rows(capsys.readouterr().out)
    assert rows[("64x128", "forward", "yours")][0] == "1.00" and rows[("64x128", "backward", "yours")][0] == "1.00"
    assert float(rows[("2x32768", "forward", "yours")][0]) == 1.5       # N > 16384: x read twice, as allowed
    # eager PyTorch, from the simulator's host-op log: pow (2 passes over M·N), mean (1), mul (2), mul (2):
    # 7 passes where the fused minimum is 2; its backward, 8 times the minimum
    assert rows[("64x128", "forward", "eager")][0] == "3.50" and rows[("64x128", "backward", "eager")][0] == "8.00"
    assert (tmp_path / "bench_sim.png").stat().st_size > 10_000


def sim_rows(out):
    """{(shape, pass, who): [ratio, other bytes, launches]} from the simulator's table."""
    rows, shape, kind = {}, None, None
    for ln in out.splitlines():
        words = ln.split()
        if len(words) == 8 and words[2] in ("yours", "eager"):
            shape, kind = words[0], words[1]
            rows[(shape, kind, words[2])] = words[5:]
        elif len(words) == 6 and words[0] == "eager" and shape:
            rows[(shape, kind, "eager")] = words[3:]
    return rows


def test_lecture_style_partial_buffer_shows_as_extra_backward_traffic(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MINI_TRITON", "1")
    src = (ROOT / "tests" / "corpus" / "simple.py").read_text()
    (tmp_path / "rmsnorm.py").write_text(src)
    (tmp_path / "mini_triton").symlink_to(ROOT / "mini_triton")
    bench.main(["--impl", str(tmp_path / "rmsnorm.py"), "--shapes", "64x128", "--out", str(tmp_path)])
    rows = sim_rows(capsys.readouterr().out)
    assert rows[("64x128", "forward", "yours")][0] == "1.00"
    assert float(rows[("64x128", "backward", "yours")][0]) > 1.3       # the M x N dg buffer, written once


def test_gpu_providers_include_the_references():
    import torch

    class Impl:
        rmsnorm = staticmethod(lambda x, g: x)
        rmsnorm_forward = staticmethod(lambda x, g: (x, None))
    names = measure.providers(Impl)
    assert {"yours", "eager", "torch.compile", "F.rms_norm"} <= set(names)
    x, g = torch.randn(4, 8), torch.rand(8)
    torch.testing.assert_close(names["F.rms_norm"][0](x, g), names["eager"][0](x, g))


def test_gpu_tables_and_plot_from_measurements(tmp_path, capsys):
    M, N = 1024, 4096
    copy = 0.0084                                  # ms for 2·M·N fp32 elements: 3995 GB/s
    row = {"copy": copy, "providers": {
        "yours": {"fwd": 3 * copy, "fwd_gpu": copy, "fwd_kernels": 0.9 * copy, "fwdbwd": 10 * copy,
                  "fwdbwd_gpu": 2.5 * copy, "fwdbwd_kernels": 2.4 * copy},
        "F.rms_norm": {"fwd": 2 * copy, "fwd_gpu": 2 * copy, "fwdbwd": 12 * copy,
                       "fwdbwd_gpu_error": "RuntimeError: operation not permitted when stream is capturing",
                       "fwdbwd_kernels_error": "RuntimeError: CUPTI unavailable"},
        "Liger": {"error": "RuntimeError: boom"}}}
    rows = [("fp32", M, N, row)]
    tables.print_gpu_tables(rows)
    out = capsys.readouterr().out
    lines = {ln.split("|")[0].split()[-1]: ln.split() for ln in out.splitlines()
             if ln.strip().startswith(f"{M}x{N}") and "|" in ln}
    # fwd: GPU ms, % of copy, kernels ms, wall ms | step: GPU ms, % of copy (5·M·N elements in 2.5 copies),
    # kernels, wall, host ms
    assert lines["yours"][-11:] == ["|", "0.008", "100", "0.008", "0.025", "|", "0.021", "100", "0.020",
                                    "0.084", "0.063"], lines
    assert lines["F.rms_norm"][-8:] == ["50", "-", "0.017", "|", "no", "graph", "-", "0.101"], lines
    assert "fwdbwd: no CUDA graph: RuntimeError: operation not permitted" in out
    assert "fwdbwd: no profile: RuntimeError: CUPTI unavailable" in out
    assert "RuntimeError: boom" in out
    plots.plot_gpu(rows * 1 + [("bf16", 2 * M, N, row)], tmp_path / "gpu.png")
    assert (tmp_path / "gpu.png").stat().st_size > 10_000



def test_the_handouts_traffic_example_is_what_the_solution_prints(tmp_path, capsys):
    """Section 7 shows `make bench`'s simulator table at 32x4096: it must be the solution's own output."""
    traffic.sim_report(ROOT / "solution" / "rmsnorm.py", [(32, 4096)], tmp_path)
    printed = [ln.split() for ln in capsys.readouterr().out.splitlines()
               if ln.split()[:1] in (["32x4096"], ["eager"])]
    for handout in ("README.md", "README.zh-CN.md"):
        text = (ROOT / "handout" / handout).read_text(encoding="utf-8")
        block = next(b for b in re.findall(r"^```text\n(.*?)^```", text, flags=re.M | re.S) if "M·N bytes" in b)
        shown = [ln.split() for ln in block.splitlines() if ln.split()[:1] in (["32x4096"], ["eager"])]
        assert shown == printed, f"handout/{handout}'s traffic table differs from `make bench`'s: update it"


def test_kernel_ms_is_the_median_of_the_profiled_calls_sums(monkeypatch):
    """measure.kernel_ms on the fake GPU: each profiled call follows a warm-up call (timing.kernel_times)."""
    gpu = FakeGPU()
    monkeypatch.setattr(timing, "CUDA", gpu.table)
    costs = iter([9.0, 1.0, 9.0, 3.0, 9.0, 2.0, 9.0, 5.0, 9.0, 4.0])      # warm-up, profiled, warm-up, ...

    def step():
        ms = next(costs)
        gpu.launch(lambda: None, ms=ms / 2)
        gpu.launch(lambda: None, name="copy_kernel", ms=ms / 2)
    assert measure.kernel_ms(step, reps=5) == 3.0


def test_gpu_report_prints_each_shape_as_it_is_measured_and_starts_the_next_job_ahead(tmp_path, capsys, monkeypatch):
    """make bench's scheduling without a GPU: each job's rows print in order as soon as it is done, the next
    job of a GPU is started (importing) before the current one is timed, and the progress line says which."""
    M, N = 64, 128
    shape_result = {"copy": 0.01, "wrong": None, "providers": {"yours": {"fwd": 0.03, "fwd_gpu": 0.01,
                                                                          "fwdbwd": 0.1, "fwdbwd_gpu": 0.025}}}
    model_result = {"default": {"yours": {"wall": 1.0, "gpu": 0.5}, "F.rms_norm": {"error": "RuntimeError: boom"}}}
    events = []

    class FakeJob:
        def __init__(self, impl_path, what, gpu):
            self.what, self.label = what, f"{what[1]} {what[2]}x{what[3]}"
            events.append(("start", what, gpu))

        def run(self, progress_line):
            events.append(("run", self.what))
            progress_line(self.label, "yours forward")
            return model_result if self.what[0] == "model" else shape_result
    monkeypatch.setattr(schedule, "Job", FakeJob)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    bench.gpu_report("impl.py", [(M, N), (2 * M, N)], tmp_path, model_shapes=[(256, 512)])
    jobs = schedule.gpu_jobs([(M, N), (2 * M, N)], [(256, 512)])
    assert len(jobs) == 5 and jobs[-1] == ("model", "bf16", 256, 512)
    # job i+1 is started before job i runs (one GPU): it imports while job i is timed
    for i in range(len(jobs) - 1):
        assert events.index(("start", jobs[i + 1], "0")) < events.index(("run", jobs[i])), events
    out, err = capsys.readouterr()
    assert "[1/5, " in err and "fp32 64x128: yours forward" in err
    shapes = [ln.split()[0] for ln in out.splitlines() if ln.strip().startswith(("64x128", "128x128"))]
    assert shapes == ["64x128", "128x128", "64x128", "128x128"]            # fp32's two shapes, then bf16's
    assert out.index("fp32: GPU time") < out.index("bf16: GPU time") < out.index("The model")
    assert "256x512" in out and "F.rms_norm: RuntimeError: boom" in out and "5 measurements in" in out
    assert len((tmp_path / "bench_gpu.jsonl").read_text().splitlines()) == 5


def test_the_handouts_prediction_example_is_what_the_solution_prints(capsys):
    """Section 7 shows `make bench`'s prediction for the reference solution: it must be the solution's own."""
    from rmsnorm_testkit.compare import load_impl
    traffic.print_prediction(load_impl(ROOT / "solution" / "rmsnorm.py", backend="mini_triton"))
    printed = [ln.strip() for ln in capsys.readouterr().out.splitlines()
               if ln.strip().startswith(("forward ", "where "))]
    assert len(printed) == 4, printed
    for handout in ("README.md", "README.zh-CN.md"):
        text = (ROOT / "handout" / handout).read_text(encoding="utf-8")
        block = next(b for b in re.findall(r"^```text\n(.*?)^```", text, flags=re.M | re.S) if "≈" in b)
        assert [ln.strip() for ln in block.splitlines() if ln.strip()] == printed, f"update handout/{handout}"


def test_a_backward_not_written_yet_still_shows_the_forwards_rows_and_prediction(tmp_path, capsys, monkeypatch):
    """Parts (a) and (c) answered, (b) not: the forward's traffic and predicted speed, and the backward named as not
    run with its TODO, instead of a traceback."""
    import subprocess
    monkeypatch.setenv("MINI_TRITON", "1")
    path = tmp_path / "rmsnorm.py"
    subprocess.run([sys.executable, str(ROOT / "starter" / "generate.py"), "--parts", "ac", "--out", str(path)],
                   check=True, capture_output=True)
    (tmp_path / "mini_triton").symlink_to(ROOT / "mini_triton")
    assert bench.main(["--impl", str(path), "--shapes", "32x4096", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert sim_rows(out)[("32x4096", "forward", "yours")][0] == "1.00"
    assert re.search(r"backward +yours +not run: NotImplementedError: TODO: Part \(b\)", out), out
    assert "forward fp32 ≈ " in out and "forward+backward ≈ n/a" in out and "is not predicted" in out
