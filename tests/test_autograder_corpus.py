"""Calibration: the hidden autograder on a corpus of buggy and hostile submissions.

Each case is tests/corpus/simple.py (a plain, correct, lecture-style submission) with one
change, or a hostile addition. Each gets the parts it must fail, with words its feedback
must contain, and the parts it must still pass; attacks must leave the grade untouched.
"""
import concurrent.futures
import json
import os
import resource
import sys
import time

import pytest
from rmsnorm_testkit import scan

from autograder import grade, isolation, warm
from conftest import ROOT
from grade_in_process import verdicts

pytestmark = pytest.mark.usefixtures("sandbox_accounts")      # grades through the sandbox (conftest.py)

CORPUS = ROOT / "tests" / "corpus"
sys.path.insert(0, str(CORPUS))
SIMPLE = (CORPUS / "simple.py").read_text()
AS_ROOT = os.geteuid() == 0
# what opening a grader's file by path says: the private file system has no such file, else no permission
DENIED = "No such file or directory" if isolation.available() else "Permission denied"
ALL_CPU = ["1", "2", "3", "4.1", "4.2", "4.3", "4.4", "4.5", "4.6", "4.7", "5", "6", "7", "8"]
BACKWARD = ["2", "3", "4.1", "4.2", "4.3", "4.4", "4.5", "4.6", "4.7", "6", "7", "8", "9"]
FORWARD_ONLY_TOO = ["4.1", "4.4", "4.6", "4.7", "7"]      # parts that also check the forward alone


def mutate(*edits, count=1):
    """simple.py with each (old, new) replaced; an edit that no longer applies fails loudly."""
    src = SIMPLE
    for old, new in edits:
        assert old in src, f"corpus edit no longer applies: {old!r}"
        src = src.replace(old, new, count)
    return src


def prepend(code):
    return code + "\n" + SIMPLE


FWD_X_LOAD = "x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)"
FWD_STORE_Y = "    tl.store(y_ptr + row * y_stride + cols, x * r * g, mask=mask)"
DX = "dx = dy * g * r - x * (r * r * r) * dot / N"
DG_STORE = "tl.store(dg_ptr + row * N + cols, dy * x * r, mask=mask)"
HOST_FORWARD = '''def rmsnorm_forward(x, g, eps=1e-5):
    r = torch.rsqrt(x.float().pow(2).mean(-1) + eps)
    return (x * r[..., None] * g).to(x.dtype), r.reshape(-1)


def _unused_forward(x, g, eps=1e-5):'''
TORCH_RMS_NORM_FORWARD = '''def rmsnorm_forward(x, g, eps=1e-5):
    y = torch.nn.functional.rms_norm(x, (x.shape[-1],), g, eps)
    return y, torch.rsqrt(x.float().pow(2).mean(-1) + eps).reshape(-1)


def _unused_forward(x, g, eps=1e-5):'''
LOOP_FOREVER = '''def rmsnorm_backward(dy, x, g, r):
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass


def _unused_backward(dy, x, g, r):'''
PURE_PYTORCH = (CORPUS / "pure_pytorch.py").read_text()
# The wrapper upcasts x to fp32 on the host; the kernel reads the copy, and y is cast back at the end.
UPCAST = ("    x2 = _matrix(x)\n    M, N = x2.shape\n    y = torch.empty((M, N), dtype=x.dtype, device=x.device)",
          "    x2 = _matrix(x).float()\n    M, N = x2.shape\n    y = torch.empty((M, N), dtype=torch.float32, "
          "device=x.device)")
UPCAST_RETURN = ("    return y.view(x.shape), r", "    return y.to(x.dtype).view(x.shape), r")
LOOP_FOREVER_FORWARD = '''def rmsnorm_forward(x, g, eps=1e-5):
    while True:
        pass


def _unused_forward(x, g, eps=1e-5):'''
SHORT_BUDGET = 8       # seconds of CPU a group of an endless loop gets here (RMSNORM_GROUP_CPU_S; 30 by default)
TIMED_OUT = f"timed out after {SHORT_BUDGET} s of CPU time while running "
HOST_DX = '''    return dx.view(x.shape), dg_partial.sum(0).to(g.dtype)'''
HOST_DX_NEW = '''    xf, dyf = x2.float(), dy2.float() * g.float()
    dot = (dyf * xf).sum(-1, keepdim=True)
    dx = dyf * r[:, None] - xf * (r[:, None] ** 3) * dot / N
    return dx.to(x.dtype).view(x.shape), dg_partial.sum(0).to(g.dtype)'''


# name: (source, {part: words its feedback must contain}, parts that must pass, extra checks)
CASES = {
    "simple": (SIMPLE, {"9": "partial dg buffer"}, ALL_CPU),
    # The solution (every part and item 9) is graded by test_autograder_grade.py, the lecture's M x N partial
    # buffer (full credit, no extra credit: `make partial PARTS=abc`) by test_partial_answers.py.
    "unfused_forward": ((CORPUS / "unfused_forward.py").read_text(),
                        {"1": "your forward returned y without any kernel storing it",
                         "5": "your forward's kernels stored none of the y it returned",
                         "7": "a host-side `mul` read all 32768 elements of x in your forward (fp32 x)"},
                        ["2", "3", "6", "8"]),
    "small_blocks": ((CORPUS / "small_blocks.py").read_text(),
                     {"5": "loaded x 2.0 times per element", "6": "loaded x 2.0 times per element"},
                     ["1", "2", "3", "4.4", "7", "8"]),
    "missing_mask": (mutate((FWD_X_LOAD, "x = tl.load(x_ptr + row * x_stride + cols).to(tl.float32)")),
                     {"1": "out-of-bounds load in rmsnorm_fwd_kernel"}, []),
    "wrong_dx": (mutate((DX, "dx = dy * g * r")),
                 {"2": "dx from rmsnorm_backward differs for x of shape (37, 100) fp32 (given the reference r): it "
                       "matches r·dy·g alone"},
                 ["1", "3", "5", "6", "7", "8"]),
    "wrong_dg": (mutate((DG_STORE, "tl.store(dg_ptr + row * N + cols, dy * x, mask=mask)")),
                 {"3": "dg from rmsnorm_backward differs for x of shape (37, 100) fp32 (given the reference r): it "
                       "matches sum over rows of dy·x: r is missing"},
                 ["1", "2", "5", "6", "7", "8"]),
    "ignored_eps": (mutate(("/ N + eps)", "/ N + 1e-5)")),
                    {"4.5": "differs for x of shape (16, 64) fp32 (eps = 0.01)"}, ["1", "2", "3", "5"]),
    "torch_forward": (mutate(("def rmsnorm_forward(x, g, eps=1e-5):", HOST_FORWARD)),
                      {"1": "without any kernel storing it", "5": "your forward launched no kernel",
                       "7": "launched no kernel"}, ["2", "3", "4.1"]),
    # torch's own rms_norm on the graded path: not refused, named, and its outputs earn nothing
    "torch_rms_norm_forward": (mutate(("def rmsnorm_forward(x, g, eps=1e-5):", TORCH_RMS_NORM_FORWARD)),
                               {"1": "it called torch's torch.nn.functional.rms_norm at rmsnorm.py line",
                                "5": "your forward launched no kernel"}, ["0", "2", "3"]),
    "x_loaded_twice": (mutate((FWD_STORE_Y, "    " + FWD_X_LOAD + "\n" + FWD_STORE_Y)),
                       {"5": "your forward loaded x 2.0 times per element"}, ["1", "2", "3", "6"]),
    "racy_dg": (mutate((DG_STORE, "tl.store(dg_ptr + cols, tl.load(dg_ptr + cols, mask=mask) + dy * x * r, "
                                  "mask=mask)"),
                       ("dg_partial = torch.empty((M, N)", "dg_partial = torch.zeros((1, N)")),
                {"8": "data race"}, ["1", "5"]),
    "ignored_strides": (mutate(("row * x_stride", "row * N"), ("row * dy_stride", "row * N"), count=2),
                        {"4.3": "differs"}, ["1", "2", "3", "5", "6"]),
    # one defect, one part: strided inputs refused by an assert cost 4.3, not 4.6 as well
    "contiguous_only": (mutate(("def _matrix(t):\n", "def _matrix(t):\n    assert t.is_contiguous(), "
                                                     "'Our pointer arithmetic will assume contiguous x'\n")),
                        {"4.3": "AssertionError: Our pointer arithmetic will assume contiguous x"},
                        [p for p in ALL_CPU if p != "4.3"]),
    # ... and a dg defect of the 16-bit path costs 4.1 only (an off-by-one in the rows it sums)
    "dg_16bit_defect": (mutate((HOST_DX, "    return dx.view(x.shape), dg_partial[: M - (x.dtype != torch.float32)]"
                                         ".sum(0).to(g.dtype)")),
                        {"4.1": "dg (g.grad) from your backward (TritonRMSNorm.backward) differs for x of shape "
                                "(33, 200) fp16"}, [p for p in ALL_CPU if p != "4.1"]),
    # tl.sum of bf16 squares left in bf16: r (fp32, held to fp32's tolerance) shows it in 4.1, which owns
    # 16-bit inputs; N = 65536 in bf16 (4.4) then keeps its points
    "bf16_sum_unconverted": (mutate((FWD_X_LOAD, "x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0)")),
                             {"4.1": "a sum of squares kept in fp16 rounds at every step"},
                             [p for p in ALL_CPU if p != "4.1"]),
    # dx computed again on the host after the kernel: item 2 charges it, item 7 names the line and keeps its points
    "dx_on_host": (mutate((HOST_DX, HOST_DX_NEW)),
                   {"2": "your backward returned dx without any kernel storing it"}, ["1", "3", "5", "6", "7"]),
    "dy_written_in_place": (mutate(("dx = torch.empty((M, N), dtype=x.dtype, device=x.device)",
                                    "dx = dy2 if dy2.is_contiguous() else torch.empty_like(dy2)")),
                            {"4.6": "modified dy"}, ["1", "5"]),
    "r_in_input_dtype": (mutate(("r = torch.empty(M, dtype=torch.float32, device=x.device)",
                                 "r = torch.empty(M, dtype=x.dtype, device=x.device)")),
                         {"4.6": "it must be float32"}, ["1", "2", "3", "5", "6", "7", "8"]),
    "syntax_error": (SIMPLE + "\ndef broken(:\n", {p: "SyntaxError" for p in ALL_CPU}, []),
    "import_error": (prepend("import not_a_module"), {p: "ModuleNotFoundError" for p in ("1", "2", "5")}, []),
    # the answer key is not on a submission's import path, even when grading from a checkout that has it
    "imports_the_answer_key": ("from solution.rmsnorm import *  # noqa\n",
                               {p: "No module named 'solution'" for p in ("1", "2", "5")}, []),
    "reads_files_through_an_os_alias": (prepend("import os as _o\n_o.popen('cat /etc/passwd').read()"),
                                        {"1": "os.popen is not allowed"}, []),
    # a backward that hangs: its time-out costs every part whose inputs reach the backward, and nothing
    # else (4.1, 4.4, 4.6, 4.7 and 7 keep their points on what they check of the forward alone)
    "loop_forever_in_backward": (mutate(("def rmsnorm_backward(dy, x, g, r):", LOOP_FOREVER)),
                                 {p: TIMED_OUT + "rmsnorm_backward on x of shape (37, 100) fp32: an infinite loop"
                                  for p in BACKWARD if p not in FORWARD_ONLY_TOO},
                                 ["1", *FORWARD_ONLY_TOO, "5"]),
    # no kernel launched at all: nothing but, at most, the static checks
    "pure_pytorch": (PURE_PYTORCH, {**{p: "without any kernel storing it" for p in ["1", "2", "3", "4.1", "4.2", "4.3",
                                                                                  "4.4", "4.5", "4.6", "4.7"]},
                                    "5": "launched no kernel", "6": "launched no kernel", "7": "launched no kernel",
                                    "9": "starts from a fused backward (item 6): your backward launched no kernel",
                                    "8": "no output of yours was stored by a kernel"}, []),
    "host_upcast": (mutate(UPCAST, UPCAST_RETURN),
                    {"7": "a host-side `to(float32)` read all 32768 elements of x in your forward (bf16 x)"},
                    ["1", "2", "3", "4.1", "4.2", "4.3", "4.4", "4.5", "4.6", "4.7", "5", "6", "8"]),
    "sigalrm_ignored": (prepend("import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)"),
                        {p: "importing signal is not allowed" for p in ALL_CPU}, []),
    "os_exit_at_import": (prepend("import os\nos._exit(0)"), {"1": "os._exit is not allowed"}, []),
    "os_exit_hidden_at_import": (prepend("import os\ngetattr(os, '_ex' + 'it')(0)"),
                                 {p: "the submission ended the process while importing" for p in ALL_CPU}, []),
    "monkeypatch_comparisons": (mutate((DX, "dx = dy * g * r")).replace(
        "import torch\n", "import torch\ntorch.allclose = lambda *a, **k: True\n"
                          "torch.testing.assert_close = lambda *a, **k: None\n", 1),
        {"1": "changing torch.allclose patches a library"}, []),
    "monkeypatch_comparisons_hidden": (mutate((DX, "dx = dy * g * r")).replace(
        "import torch\n", "import torch\nvars(torch)['allclose'] = lambda *a, **k: True\n"
                          "vars(torch.testing)['assert_close'] = lambda *a, **k: None\n", 1),
        {"2": "dx from rmsnorm_backward differs"}, ["1", "3"]),
    "memory_bomb_in_forward": (mutate(("def rmsnorm_forward(x, g, eps=1e-5):\n",
                                       "def rmsnorm_forward(x, g, eps=1e-5):\n"
                                       "    hoard = []\n"
                                       "    while True:\n"
                                       "        hoard.append(bytearray(100 * 1024 * 1024))\n")),
                               {"1": "MemoryError", "5": "MemoryError"}, []),
    "flood_20mb_of_output": (prepend("import sys\nfor _ in range(20 * 1024):\n    print('x' * 1023)"),
                             {}, ALL_CPU),
    "outputs_forged_at_exit": (prepend(
        "import atexit\n"
        "_o = __builtins__['open'] if isinstance(__builtins__, dict) else __builtins__.open\n"
        "def _forge():\n"
        "    _o('outputs.json', 'w').write('{\"fwd_a\": {\"ok\": true}}')\n"
        "atexit.register(_forge)"), {}, ALL_CPU),      # the submission's process never runs its exit hooks
    "forward_block_capped": (mutate(("eps, BLOCK=triton.next_power_of_2(N))",
                                     "eps, BLOCK=min(triton.next_power_of_2(N), 4096))")),
                             {"4.4": "y[0:3, 4096:16384] from rmsnorm (your TritonRMSNorm.forward) was never written "
                                     "by your kernels"},
                             ["1", "2", "3", "4.1", "4.2", "4.3", "4.5", "4.6", "4.7", "5", "6", "7", "8"]),
    "traffic_counts_edited": (prepend("from mini_triton import stats as _S"),
                              {p: "mini_triton.stats is the simulator's own" for p in ALL_CPU}, []),
    "race_check_removed": (prepend("from mini_triton import observers as _obs"),
                           {"8": "mini_triton.observers is the simulator's own"}, []),
    "os_through_torch": (prepend("from torch.serialization import os as _tos"),
                         {"1": "importing the os module from torch.serialization is not allowed"}, []),
    "reads_hidden_tests": (mutate(("def rmsnorm_forward(x, g, eps=1e-5):\n",
                                   "def rmsnorm_forward(x, g, eps=1e-5):\n"
                                   "    _o = __builtins__['open'] if isinstance(__builtins__, dict) "
                                   "else __builtins__.open\n"
                                   f"    raise RuntimeError(_o({str(ROOT / 'autograder/hidden/test_rubric.py')!r})"
                                   ".read())\n")),
                           {"1": DENIED if AS_ROOT else "withheld"}, []),
}
if AS_ROOT:
    # Grading as root from a checkout, the sandbox accounts cannot read it (grade.keep_checkout_private), and
    # where the machine allows, the job's private file system does not hold it at all (isolation.py): a
    # submission that runs the answer key from its path gets no further than that line.
    CASES["runs_the_answer_key"] = (
        "_o = __builtins__['open'] if isinstance(__builtins__, dict) else __builtins__.open\n"
        f"exec(_o({str(ROOT / 'solution' / 'rmsnorm.py')!r}).read())\n", {p: DENIED for p in ALL_CPU}, [])

# Plain mistakes of the math, the masks, the layout and the host's work: what decides them is the grader's jobs and
# judge, which tests/grade_in_process.py runs without the sandbox and the hidden tests' pytest (in half the time).
# The other cases need the sandbox, the pytest run or results.json, and are graded through them.
IN_PROCESS = frozenset({"unfused_forward", "small_blocks", "missing_mask", "wrong_dx", "wrong_dg", "ignored_eps",
                        "torch_forward", "x_loaded_twice", "racy_dg", "ignored_strides", "contiguous_only",
                        "dg_16bit_defect", "bf16_sum_unconverted", "dx_on_host", "dy_written_in_place",
                        "r_in_input_dtype", "host_upcast", "forward_block_capped"})

# Cases that get past the static scan only because it is switched off (RMSNORM_SCAN=off): they show
# that the sandbox alone stops them too. With the scan on, each is refused before it runs.
EVADES_SCAN = {"os_exit_hidden_at_import", "monkeypatch_comparisons_hidden", "reads_hidden_tests",
               "outputs_forged_at_exit", *({"runs_the_answer_key"} if AS_ROOT else ())}

# Attacks on results.json: the final file must be the grader's, whatever the submission wrote.
WRITE = ("_o = __builtins__['open'] if isinstance(__builtins__, dict) else __builtins__.open\n"
         "def _forge():\n"
         "    try:\n"
         "        with _o(RESULTS, 'w') as f:\n"
         "            f.write('{\"score\": 1000, \"tests\": [], \"output\": \"FORGED\"}')\n"
         "    except OSError:\n"
         "        pass\n")
RESULT_ATTACKS = {
    "results_written_directly": "_forge()\n",
    "results_written_at_exit": "import atexit\natexit.register(_forge)\n",
    "results_written_by_daemon": ("import os, time\n"
                                  "if getattr(os, 'fo' + 'rk')() == 0:\n"
                                  "    getattr(os, 'set' + 'sid')()\n"
                                  "    time.sleep(4)\n"
                                  "    _forge()\n"
                                  "    getattr(os, '_ex' + 'it')(0)\n"),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Grade every case, two at a time (each grading is a pytest process plus sandboxed jobs)."""
    d = tmp_path_factory.mktemp("corpus")
    jobs = {}
    for name, (source, *_rest) in CASES.items():
        if name not in IN_PROCESS:
            jobs[name] = (source, d / f"{name}.json")
    for name, attack in RESULT_ATTACKS.items():
        results = d / f"{name}.json"
        jobs[name] = (f"RESULTS = {str(results)!r}\n" + WRITE + attack + SIMPLE, results)
    env = dict(os.environ, RMSNORM_PREDICT="off")    # item 10's prediction: test_autograder_zip and _grade read it

    def run(item):
        name, (source, results) = item
        sub = d / name / "rmsnorm.py"
        sub.parent.mkdir()
        sub.write_text(source)
        off = name in EVADES_SCAN or name in RESULT_ATTACKS
        budget = {"RMSNORM_GROUP_CPU_S": str(SHORT_BUDGET)} if name.startswith("loop_forever") else {}
        res = grade.grade(sub, results, env=dict(env, **budget, **({"RMSNORM_SCAN": "off"} if off else {})))
        return name, res

    slow_first = sorted(jobs.items(), key=lambda kv: not kv[0].startswith("loop_forever"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        out = dict(pool.map(run, slow_first))
    time.sleep(5)                               # a surviving daemon would have forged the file by now
    return out, {name: results for name, (_, results) in jobs.items()}


@pytest.fixture(scope="module")
def graded_in_process(tmp_path_factory):
    """The verdicts of the IN_PROCESS cases, two at a time."""
    d = tmp_path_factory.mktemp("in_process")
    paths = {}
    for name in sorted(IN_PROCESS):
        paths[name] = d / name / "rmsnorm.py"
        paths[name].parent.mkdir()
        paths[name].write_text(CASES[name][0])
    return verdicts(paths, workers=2)


@pytest.mark.parametrize("name", list(CASES))
def test_corpus_case_gets_its_expected_grade_and_feedback(request, name):
    _, must_fail, must_pass = CASES[name]
    if name in IN_PROCESS:
        failed = request.getfixturevalue("graded_in_process")[name]["failed"]
        for part, words in must_fail.items():
            assert words in failed.get(part, "(passed)"), (part, failed.get(part))
        assert not set(must_pass) & set(failed), {p: failed[p] for p in set(must_pass) & set(failed)}
        return
    res = request.getfixturevalue("graded")[0][name]
    by_part = {t["number"]: t for t in res["tests"]}
    for part, words in must_fail.items():
        t = by_part[part]
        assert t["status"] == "failed" and t["score"] == 0, (part, t)
        assert words in t["output"], (part, t["output"])
    for part in must_pass:
        assert by_part[part]["status"] == "passed", (part, by_part[part]["output"])
    for t in res["tests"]:
        assert len(t["output"]) <= 4000 and "def test_" not in t["output"] and "Traceback" not in t["output"]


def test_pure_pytorch_scores_at_most_10_of_90(graded):
    res = graded[0]["pure_pytorch"]
    assert sum(t["score"] for t in res["tests"]) <= 10, res


ENDLESS_FORWARD = mutate(("def rmsnorm_forward(x, g, eps=1e-5):", LOOP_FOREVER_FORWARD))


def test_an_endless_loop_in_the_forward_costs_one_groups_budget_not_one_per_part(tmp_path):
    """A forward that never returns hangs the two groups of tasks that call it (the kernel-level one and the
    one through TritonRMSNorm), a budget of CPU time each (SHORT_BUDGET here, 30 s by default), and
    every part is charged with what hung. The time is counted in CPU seconds of the grading's processes, which a
    busy machine does not stretch: one budget per part would be 15 of them."""
    sub = tmp_path / "rmsnorm.py"
    sub.write_text(ENDLESS_FORWARD)

    def used():                         # this process's children, and those of the warm server (its pytest runs)
        u = resource.getrusage(resource.RUSAGE_CHILDREN)
        return u.ru_utime + u.ru_stime + warm.cpu_seconds()
    before = used()
    res = grade.grade(sub, tmp_path / "results.json", env=dict(os.environ, RMSNORM_GROUP_CPU_S=str(SHORT_BUDGET)))
    cpu = used() - before
    assert 2 * SHORT_BUDGET <= cpu <= 3 * SHORT_BUDGET + 15, cpu
    by_part = {t["number"]: t["output"] for t in res["tests"] if t["status"] == "failed"}
    assert sorted(by_part) == sorted(ALL_CPU + ["9"]), sorted(by_part)
    for part, output in by_part.items():
        through_module = part in ("2", "3", "4.1", "4.2", "4.3", "4.4", "4.5", "4.6", "6", "8", "9")
        shape = ("rmsnorm (the forward through TritonRMSNorm) on x of shape (256, 128)" if through_module
                 else "rmsnorm_forward on x of shape (37, 100) fp32")
        assert TIMED_OUT + shape in output, (part, output)


def test_a_group_budget_that_is_not_a_number_of_seconds_is_an_autograder_error(tmp_path):
    from autograder import config
    assert config.group_cpu_s({}) == config.SIM_LIMITS.group_cpu_s == 30
    assert config.group_cpu_s({"RMSNORM_GROUP_CPU_S": "60"}) == 60
    with pytest.raises(grade.GraderError, match="RMSNORM_GROUP_CPU_S='-5' is not a number of seconds") as e:
        grade.grade(CORPUS / "simple.py", tmp_path / "results.json", env=dict(os.environ, RMSNORM_GROUP_CPU_S="-5"))
    assert "unset RMSNORM_GROUP_CPU_S" in e.value.fix
    assert json.loads((tmp_path / "results.json").read_text())["extra_data"] == {"autograder_error": True}


@pytest.mark.parametrize("name", sorted(EVADES_SCAN))
def test_attacks_that_need_the_scan_off_are_refused_with_it_on(name):
    missing, problems = scan.scan(CASES[name][0])
    assert problems, name


@pytest.mark.parametrize("name", list(RESULT_ATTACKS))
def test_results_json_forged_by_the_submission_is_replaced_by_the_graders(graded, name):
    results, paths = graded
    on_disk = json.loads(paths[name].read_text())
    assert "FORGED" not in json.dumps(on_disk) and on_disk.get("score") != 1000
    assert on_disk == results[name]
    assert sum(t["score"] for t in on_disk["tests"]) == 90, on_disk      # the plain submission's real grade


def test_an_import_that_outlasts_a_later_groups_budget_costs_that_group_only(tmp_path):
    """The first group imports the file within its budget; a later group with less (item 10's prediction has 8 s)
    runs out of it while importing. That is the later group's own failure, its tasks' error, not the file's import
    error, which would zero every part (a red team's file that spends 10 s at import scored 10 of 90)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import grade_in_process
    slow = tmp_path / "rmsnorm.py"
    slow.write_text("import time\n_t = time.process_time()\nwhile time.process_time() - _t < 1.5:\n    pass\n"
                    + (ROOT / "solution" / "rmsnorm.py").read_text())
    results, error = grade_in_process.groups(slow, {"first": {}, "later": {"predict.float32": {"op": "predict"}}},
                                             {"first": 30, "later": 0.5})
    assert error is None, error
    assert "importing rmsnorm.py" in results["predict.float32"]["error"], results


def test_a_keyboard_interrupt_raised_by_the_file_costs_its_case_only(tmp_path):
    """A KeyboardInterrupt (or SystemExit) raised by the file in one task is that task's error: the other tasks of
    its group keep their results (it once ended the submission's process, and every part of the group was lost)."""
    sys.path.insert(0, str(ROOT / "tests"))
    import grade_in_process
    from hostile import SIMPLE, edit
    path = tmp_path / "rmsnorm.py"
    path.write_text(edit(SIMPLE, ("def rmsnorm(x, g, eps=1e-5):\n",
                                  "def rmsnorm(x, g, eps=1e-5):\n    if not (x.requires_grad or g.requires_grad):\n"
                                  "        raise KeyboardInterrupt\n")))
    got = grade_in_process.verdicts({"interrupt": path}, workers=1)["interrupt"]
    assert set(got["failed"]) == {"4.6", "9"}, got["failed"]          # (simple.py earns no extra credit)
    assert "KeyboardInterrupt" in got["failed"]["4.6"], got["failed"]["4.6"]
