"""What item 10's prediction tells the student: which GPU path the wrappers took, and no share above a copy's.

predict.py says which path the file's wrappers took with the course GPU in view (``GpuPath``), and reports a share
above a copy's bandwidth as implausible, never as a prediction; the grader's note and results.json's leaderboard
(autograder/judge/speed.py) and `make bench` (starter/benchmark/traffic.py) say both. The grader's own path
(job/remote.predict_item_10 asking the submission's process, job/submission/host.py) runs here in a job's two processes.
"""
import warnings

import pytest

from autograder.judge import speed                 # first: it registers rmsnorm_testkit (a spawned process too)
from autograder.rubric import COPY_NEEDED
from mini_triton import perf
from rmsnorm_testkit import predict, text
from rmsnorm_testkit.compare import load_impl
from rmsnorm_testkit.timing import SPEED_SHAPE

from conftest import ROOT

STYLES = ROOT / "tests" / "library_styles"


def _impl(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_impl(path, backend="mini_triton")


def test_a_share_above_a_copy_is_reported_as_implausible_never_as_a_prediction():
    """A forward that moves a tenth of the bytes it must (the model missed part of its work) comes out faster than
    a copy: no share, the step named implausible, and a note that says why."""
    M, N = SPEED_SHAPE
    tenth = 2 * M * N * 4 / 10
    fwd = perf.Work("k", programs=M, rounds=float(M), spans=(tenth,), first=(tenth,), again=(0.0,), touched=(tenth,))
    got = predict.from_runs({"fwd": [fwd]}, {}, "fp32", rows=M)
    assert got.shares["fwd"] is None and got.implausible["fwd"] > predict.PLAUSIBLE
    assert got.line().startswith("forward fp32 implausible (above a copy)"), got.line()
    assert any("faster than a copy" in n and "no prediction" in n for n in got.notes), got.notes


def test_the_note_and_the_leaderboard_call_a_share_above_a_copy_implausible():
    predicted = {"fp32": {"gpu": "H200", "shares": {"fwd": 130.0, "fwdbwd": 80.0}, "notes": []},
                 "bf16": {"gpu": "H200", "shares": {"fwd": None, "fwdbwd": 60.0}, "implausible": {"fwd": 104.0},
                          "notes": []}}
    note = speed.prediction_note(predicted, COPY_NEEDED)
    assert "130%" not in note and "104%" not in note, note
    assert note.count("implausible: above a copy's bandwidth, so not a prediction") == 2, note
    assert "forward+backward fp32 ≈ 80% of copy" in note
    board = {e["name"]: e["value"] for e in speed.predicted_leaderboard(predicted)}
    assert board["forward fp32, % of copy (predicted)"] == board["forward bf16, % of copy (predicted)"] == \
        "implausible (above a copy)"
    assert board["forward+backward fp32, % of copy (predicted)"] == 80.0


def test_the_note_and_the_leaderboard_say_which_gpu_path_the_wrappers_took():
    path = {"line": "the wrappers saw an H200 (132 SMs) and launched as on it: k with 132 programs (16 off the GPU)",
            "short": "H200 path: k 132 programs (16 off the GPU)"}
    predicted = {d: {"gpu": "H200", "shares": {"fwd": 90.0, "fwdbwd": 80.0}, "notes": [], "path": path}
                 for d in ("fp32", "bf16")}
    note = speed.prediction_note(predicted, COPY_NEEDED)
    assert f"The GPU's path: {path['line']}." in note, note
    assert {"name": speed.PATH_ENTRY, "value": path["short"]} in speed.predicted_leaderboard(predicted)


@pytest.mark.parametrize("name, says", [
    ("liger", "the wrappers saw an H200 (132 SMs) and launched as on it: _rms_norm_backward_kernel with 132 "
              "programs (16 off the GPU)"),
    ("liger_devices", "_rms_norm_backward_kernel with 132 programs (1 off the GPU)"),
    ("flaggems", "your file chose its launches without asking the device")])
def test_the_path_names_the_launch_the_device_chose_or_says_none_was_asked(name, says):
    steps, path = predict.planned(_impl(STYLES / f"{name}.py"), "fp32")
    assert says in path.line() and path.level == "tensors", path


def test_a_file_that_refuses_cuda_tensors_still_sees_the_gpu_through_torch_cuda(tmp_path):
    """The starter checks that x is on the simulator's device (chosen at import): with cuda:0 tensors it raises, so
    its tensors keep their device and x.is_cuda and torch.cuda speak of the GPU; a grid taken from the SM count
    where torch.cuda is available (8 programs' worth without it) is then the GPU's."""
    src = (ROOT / "solution" / "rmsnorm.py").read_text()
    for old, new in (('    if device.type != "cuda":\n        return COURSE_GPU_SMS\n',
                      "    if not torch.cuda.is_available():\n        return 8\n"),
                     ("@functools.lru_cache\ndef _sm_count(", "def _sm_count("),
                     ("@functools.lru_cache\ndef _num_programs_bwd(", "def _num_programs_bwd(")):
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    (tmp_path / "rmsnorm.py").write_text(src)
    (tmp_path / "mini_triton").symlink_to(ROOT / "mini_triton")
    got = predict.item_10(_impl(tmp_path / "rmsnorm.py"), "fp32")
    line = got.path.line()
    assert got.path.level == "cuda" and "x.device staying the CPU's" in line and "x is on cuda:0" in line, line
    assert "rmsnorm_bwd_kernel with 132 programs (8 off the GPU)" in line, line
    assert got.shares["fwdbwd"] > 80, got.shares


def test_the_judge_reads_the_path_from_the_recipes_and_keeps_only_known_words():
    """The path comes from the two recipes the submission's process recorded (with the GPU in view and without):
    the judge compares their launches itself and keeps only the words it knows of what the file asked."""
    from autograder.job.judge import remote
    from autograder.job.judge.launches import Kernels
    kernels = Kernels("rmsnorm.py", "def k(x_ptr, n, BLOCK):\n    pass\n")
    ref = {"b": 0, "n": 4096, "o": 0, "s": [1024], "st": [1], "d": "float32"}

    def recipe(programs, level="cuda", refused=None):
        launch = {"kernel": {"name": "k", "line": 1}, "grid": [programs], "at": 0,
                  "args": [{"ref": ref}, {"value": 1024}], "kwargs": {"BLOCK": {"constexpr": {"value": 1024}}}}
        return {"ops": [], "launches": [launch], "outputs": {}, "level": level, "refused": refused}
    on = {"recipes": {"fwd": recipe(132, refused="E" * 1000)}, "asked": ["x.is_cuda", "<script>", 7]}
    off = {"recipes": {"fwd": recipe(16)}, "asked": []}
    plans = {"fwd": remote.planned(on["recipes"]["fwd"], kernels)}
    path = remote.gpu_path(plans, on, off, kernels)
    assert plans["fwd"][0][0].spans == {"x_ptr": 4096} and plans["fwd"][0][0].programs == 132
    assert path.asked == ["x.is_cuda"] and path.changed == [["k", 132, 16, 4, 4]] and path.level == "cuda"
    assert len(path.refused) == text.ERROR_LINE_CHARS
    assert remote.planned({"launches": [{"kernel": {"name": "k", "line": 1}, "grid": "many"}]}, kernels) is None


def test_make_bench_prints_the_path(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "starter"))
    from benchmark import traffic
    traffic.print_prediction(_impl(STYLES / "liger.py"))
    out = capsys.readouterr().out
    assert "the GPU's path: the wrappers saw an H200 (132 SMs) and launched as on it" in out, out


def test_a_cpu_grading_predicts_a_device_chosen_grid_as_the_gpu_runs_it():
    """Liger's backward grid is the SM count on CUDA, 16 off it: in the grader's prediction, too, its wrappers see
    the H200 (the submission's process shows it; the judge records the kernels), and the note and the leaderboard
    say so. The H200 measured this design's forward+backward at 83% (fp32) and 65% (bf16) of copy."""
    from grade_in_process import prediction
    got = prediction(STYLES / "liger.py")
    note, board = got["note"], {e["name"]: e["value"] for e in got["board"]}
    assert "The GPU's path: the wrappers saw an H200 (132 SMs) and launched as on it: _rms_norm_backward_kernel " \
           "with 132 programs (16 off the GPU)" in note, note
    assert board[speed.PATH_ENTRY] == "H200 path: _rms_norm_backward_kernel 132 programs (16 off the GPU)"
    assert 75 <= board["forward+backward fp32, % of copy (predicted)"] <= 90, board
    assert 55 <= board["forward+backward bf16, % of copy (predicted)"] <= 72, board
