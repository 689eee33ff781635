"""The rubric, the static scan, and the lengths messages are cut to."""
import os
import re
import sys

import pytest
from rmsnorm_testkit import scan

from autograder import rubric
from conftest import ROOT


def test_rubric_totals_100_points_plus_extra_credit():
    assert rubric.total() == 100
    assert rubric.total(include_extra_credit=True) == 105
    assert len({i.number for i in rubric.ITEMS}) == len(rubric.ITEMS)


def test_the_solution_and_the_starter_pass_the_scan():
    for path in (ROOT / "solution" / "rmsnorm.py", ROOT / "starter" / "rmsnorm.py"):
        assert scan.scan(path.read_text()) == ([], []), path


@pytest.mark.parametrize("code,expect", [
    ("import subprocess\n", "importing subprocess is not allowed"),
    ("import importlib.util\n", "importing importlib.util is not allowed"),
    ("import ctypes\n", "importing ctypes"),
    ("import socket\n", "importing socket"),
    ("import os\nos.system('ls')\n", "os.system is not allowed"),
    ("from os import system\n", "from os import"),
    ("import sys\nsys.modules['torch'] = None\n", "sys.modules must not be touched"),
    ("import mini_triton as triton\ntriton.reset_stats()\n", "triton.reset_stats belongs to the grader"),
    ("from mini_triton.stats import _GLOBAL\n", "mini_triton.stats is the simulator's own"),
    ("from mini_triton import stats as S\n", "mini_triton.stats is the simulator's own"),
    ("from mini_triton import observers as o\n", "mini_triton.observers is the simulator's own"),
    ("from triton import races\n", "triton.races is the simulator's own"),
    ("import mini_triton as triton\nx = triton.observers._OBSERVERS\n", "triton.observers is the simulator's own"),
    ("import triton.language as tl\nx = tl.core._semantic\n", "tl.core._semantic is the simulator's own"),
    ("import triton\nd = triton.runtime.Chunk\n", "triton.runtime is the simulator's own"),
    ("from torch.serialization import os as tos\n", "importing the os module from torch.serialization"),
    ("import torch\ntorch.serialization.os.listdir('/')\n", ".os reaches the os module through another one"),
    ("import torch\ntorch.serialization.sys.modules.clear()\n", ".sys reaches the sys module"),
    ("exec('1')\n", "exec() is not allowed"),
    ("def f(:\n", "does not parse"),
    ("x = __builtins__['open']\n", "__builtins__ reaches into the interpreter"),
    ("import os\ngetattr(os, '_exit')(0)\n", "os._exit is not allowed"),
    ("import torch\nn = '_C'\nC = getattr(torch, n)\n", "getattr with a name made at run time"),
    ("import torch\nC = getattr(torch, '_C', None)\n", "torch._C is a library's private name"),
    ("def f(x):\n    return getattr(x, '__dict__')\n", ".__dict__ reaches into the interpreter"),
    ("import torch\nT = torch\n", "the module torch used as a value"),
    ("import torch\nimport triton\ntorch = triton\n", "torch, bound by an import, is bound again"),
    ("import triton\nT = triton\nT.jit = None\n", "changing T.jit may patch a library object"),
    ("import triton.language as tl\n\n\ndef f(m):\n    m.sum = None\n\n\nf(tl)\n", "changing the attributes of tl"),
    ("def f(e):\n    return e.__traceback__.tb_frame\n", ".tb_frame reaches into the interpreter"),
    ("def f(fn):\n    return fn.__closure__\n", ".__closure__ reaches into the interpreter"),
    ("import torch\ntorch.save(1, 'x')\n", ".save reads or writes files"),
    ("from pathlib import Path\n", "importing pathlib is not allowed"),
    ("import atexit\n", "importing atexit is not allowed"),
    ("import torch\nvars(torch)['allclose'] = 1\n", "vars reaches into the interpreter"),
    ("open('results.json', 'w')\n", "open() is not allowed"),
    ("import os as _o\n_o.popen('id').read()\n", "os.popen is not allowed"),
    ("import os as _o\n_o._exit(0)\n", "os._exit is not allowed"),
    ("import os\nmodule = os\n", "the os module may be used only as os.environ"),
    ("import os.path as p\np.exists('x')\n", "os.path.exists is not allowed"),
    ("import sys as s\ns.modules.clear()\n", "sys.modules must not be touched"),
    ("import numpy as n\nn.load('x')\n", ".load reads or writes files"),
    ("import numpy as np\nnp.genfromtxt('x')\n", ".genfromtxt reads or writes files"),
    ("import linecache\n", "importing linecache is not allowed"),
    ("import codecs\n", "importing codecs is not allowed"),
    ("import rmsnorm_testkit.timing\n", "importing rmsnorm_testkit.timing is not allowed"),     # the job's timing
    ("from autograder.job import protocol\n", "importing autograder.job is not allowed"),
])
def test_scan_flags_forbidden_constructs_by_name(code, expect):
    missing, problems = scan.scan(code)
    assert any(expect in p for p in problems), problems


def test_scan_lets_a_submission_use_triton_s_public_names():
    code = ("import os\nimport torch\nimport triton\nimport triton.language as tl\n"
            "from triton.language.extra import libdevice\nDEVICE = os.environ.get('X')\n"
            "a = triton.cdiv(3, 2) + triton.next_power_of_2(5)\nb = tl.math.rsqrt\nc = triton.testing.do_bench\n"
            "d = triton.autotune\ne = triton.Config\nf = torch.cuda.get_device_properties(0).multi_processor_count\n")
    assert scan.scan(code)[1] == []


@pytest.mark.parametrize("rule", list(scan.RULES))
def test_each_scan_rule_lets_its_allowed_example_through_and_refuses_its_refused_one(rule):
    example = scan.RULES[rule]
    assert scan.scan_rules(example.allowed)[1] == [], example.allowed
    assert [r for r, _ in scan.scan_rules(example.refused)[1]] == [rule], scan.scan_rules(example.refused)


def test_scan_lets_a_submission_write_os_environ():
    code = ("import os\nos.environ['MINI_TRITON'] = '1'\ndel os.environ['MINI_TRITON']\n"
            "os.environ.setdefault('A', 'b')\n")
    assert scan.scan(code)[1] == []


def test_scan_leaves_torchs_own_norms_to_the_job_which_sees_them_called():
    """F.rms_norm in a test helper of the student's own is fine; called on the graded path, the job names it
    (tests/test_autograder_corpus.py, "torch_rms_norm_forward")."""
    code = "import torch.nn.functional as F\n\n\ndef _check(x):\n    return F.rms_norm(x, (x.shape[-1],))\n"
    assert scan.scan(code)[1] == []


# Version shims as public kernel files write them: each reads Triton's modules as values, and runs on every GPU.
SHIMS = {
    "hasattr": "import triton.language as tl\ntl_math = tl.libdevice if hasattr(tl, 'libdevice') else tl.math\n",
    "named_getattr": "import triton.language as tl\nrsqrt = getattr(tl, 'rsqrt', None) or tl.math.rsqrt\n",
    "helper_given_tl": "import triton.language as tl\n\n\ndef acc_type(lang):\n    return lang.float32\n\n\n"
                       "ACC = acc_type(tl)\n",
    "import_rebound": "import triton.language as tl\nfrom triton.language.extra import libdevice\n"
                      "if hasattr(tl, 'libdevice'):\n    libdevice = tl.libdevice\n",
    "version": "import torch\nimport triton\nNEW = triton.__version__ >= '3.0' and torch.__version__ >= '2'\n",
    "triton_alias": "import triton\nT = triton\nn = T.cdiv(10, 4)\n",
    "attribute_of_ctx": "def f(ctx, eps):\n    return getattr(ctx, 'eps', eps)\n",
}


@pytest.mark.parametrize("name", sorted(SHIMS))
def test_scan_lets_a_version_shim_read_tritons_modules_as_values(name):
    assert scan.scan_rules(SHIMS[name])[1] == [], SHIMS[name]


@pytest.mark.parametrize("code", ["_NO_ARGS = ()\n", "def f(a):\n    return a\n\nf(())\n", "a, b = (), ()\n"])
def test_scan_reads_an_empty_tuple_as_a_value_like_any_other(code):
    """An empty tuple is no module: the scan passes it (it once crashed on it, and a crash was a zero)."""
    source = (ROOT / "solution" / "rmsnorm.py").read_text() + "\n" + code
    assert scan.scan(source) == ([], [])


def test_scan_lets_a_file_ask_tritons_driver_for_the_device_as_tritons_tutorials_do():
    """``triton.runtime.driver`` is Triton's public object, though ``runtime`` names one of the simulator's own
    modules: a file may read it (once a false zero); the rest of that module stays the simulator's."""
    ok = ("import triton\nfrom triton.runtime import driver\n"
          "DEVICE = triton.runtime.driver.active.get_active_torch_device()\n"
          "SMS = driver.active.utils.get_device_properties(DEVICE.index)['multiprocessor_count']\n")
    assert scan.scan_rules(ok)[1] == []
    for refused in ("import triton\nx = triton.runtime.Chunk\n", "from triton.runtime import driver, Chunk\n",
                    "import triton\nx = triton.runtime.driver._Active\n"):
        assert scan.scan_rules(refused)[1], refused


def test_scan_lets_a_variable_shadow_a_builtin_name():
    assert scan.scan("dir = 1\nvars = {}\n")[1] == []
    assert scan.scan("dir = 1\nprint(dir)\n")[1]             # reading it is still refused: it may be the builtin


def test_scan_names_each_missing_api():
    missing, _ = scan.scan("def rmsnorm_forward(x, g, eps=1e-5):\n    pass\n")
    assert "rmsnorm.py does not define rmsnorm_bwd_kernel" in missing
    assert not any("rmsnorm_forward" in m for m in missing)


def test_scan_reads_a_file_with_a_utf8_byte_order_mark_as_python_does():
    source = (ROOT / "solution" / "rmsnorm.py").read_text()
    assert scan.scan("\ufeff" + source) == ([], [])


def test_texts_are_cut_only_at_the_lengths_the_test_kit_names():
    """How much of a long text a message keeps is said once, with why (starter/rmsnorm_testkit/text.py): no
    text is cut at a number written in place (a slice like [:300] or [-1500:])."""
    cut = re.compile(r"\[:-?\d{3,}\]|\[-\d{3,}:\]")
    files = [*(ROOT / "autograder").rglob("*.py"), *(ROOT / "starter" / "tests").glob("*.py"),
             *(ROOT / "starter" / "rmsnorm_testkit").glob("*.py"), ROOT / "starter" / "bench.py"]
    assert cut.search("msg[:4000]") and cut.search("err[-1500:]") and not cut.search("rows[:3]")
    found = [f"{p.relative_to(ROOT)} line {n}: {ln.strip()}" for p in files
             for n, ln in enumerate(p.read_text().splitlines(), 1) if cut.search(ln)]
    assert not found, found


def test_scan_refuses_every_module_of_the_simulator_but_its_public_ones():
    modules = {p.stem for p in (ROOT / "mini_triton").glob("*.py")} - {"__init__"}
    for name in sorted(modules):
        _, problems = scan.scan(f"from mini_triton import {name}\n")
        assert bool(problems) == (name not in scan.PUBLIC_MODULES), (name, problems)
    assert "boolops" in modules and "language" not in modules          # a package, also public


def test_the_scan_refuses_the_package_the_grader_registers():
    import autograder
    assert scan.SHARED == autograder.TESTKIT.name == "rmsnorm_testkit"


@pytest.mark.parametrize("source, refused", [
    ("class R:\n    def __repr__(self):\n        return self.__class__.__name__\n", False),
    ("class R:\n    def __repr__(self):\n        return f'{type(self).__qualname__}()'\n", False),
    ("class R:\n    def f(self):\n        return self.__class__\n", True),
    ("class R:\n    def f(self):\n        return self.__class__.__bases__\n", True),
])
def test_a_class_s_name_is_fine_and_the_class_itself_is_not(source, refused):
    assert bool(scan.scan(source)[1]) == refused


def test_the_public_tests_say_what_the_scan_would_refuse_before_any_test(tmp_path):
    """`make test` (and `make submit`, which runs the public tests) prints the scan's refusals first."""
    import subprocess
    bad = tmp_path / "rmsnorm.py"
    bad.write_text((ROOT / "solution" / "rmsnorm.py").read_text() + "\nimport gc\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "--co", "-p", "no:cacheprovider", "tests"],
                         cwd=ROOT / "starter", env=dict(os.environ, RMSNORM_IMPL=str(bad)), capture_output=True,
                         text=True, timeout=120)
    first = run.stdout.splitlines()[:2]
    assert first[0].startswith("The autograder would refuse to run rmsnorm.py, and give it 0 points"), run.stdout
    assert "importing gc is not allowed (rule: imports)" in first[1], first


def test_a_file_the_scan_refuses_fails_the_public_run_and_missing_names_are_not_called_a_refusal(tmp_path):
    import subprocess

    def run(source):
        (tmp_path / "rmsnorm.py").write_text(source)
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_part_a.py"],
                              cwd=ROOT / "starter", env=dict(os.environ, RMSNORM_IMPL=str(tmp_path / "rmsnorm.py"),
                                                             MINI_TRITON="1"),
                              capture_output=True, text=True, timeout=300)
    solution = (ROOT / "solution" / "rmsnorm.py").read_text()
    refused = run(solution + "\nimport gc\n")
    assert refused.returncode == 1 and "passed" in refused.stdout and " failed" not in refused.stdout
    assert "the autograder would refuse this file, 0 points however the tests go" in refused.stdout
    renamed = run(solution.replace("def rmsnorm(x, g", "def rms_norm(x, g"))           # test 0's note, 0 points
    assert "lacks names the assignment asks for" in renamed.stdout and "would refuse" not in renamed.stdout


def test_feedback_that_quotes_a_line_the_self_test_submission_shares_is_not_withheld(tmp_path):
    """The zip carries a plain submission for setup.sh's self-test (autograder/selftest/rmsnorm.py). A student's
    line is often the same, and a message that quotes it (or advice such as ctx.save_for_backward(x, g, r)) was
    withheld on Gradescope as "quoting the grader's own files"; a line of the grader's code still is."""
    from autograder import plugin
    (tmp_path / "selftest").mkdir()
    (tmp_path / "selftest" / "rmsnorm.py").write_text("        ctx.save_for_backward(x, g, r)\n")
    (tmp_path / "judge.py").write_text("    secret = compare_against_the_hidden_reference(x)\n")
    hidden = plugin._hidden_lines(tmp_path)
    advice = "Save it: ctx.save_for_backward(x, g, r)"
    assert plugin.scrub(advice, hidden) == advice
    assert plugin.scrub("you wrote secret = compare_against_the_hidden_reference(x)", hidden) == plugin.WITHHELD


@pytest.mark.parametrize("keep", ["ctx.r = r", "ctx.kept = {'r': r}", "ctx.kept = [(r,)]",
                                  "ctx.kept = types.SimpleNamespace(r=r)"])
def test_a_tensor_kept_on_ctx_is_found_in_whatever_container_holds_it(keep):
    """4.6 charges tensors kept as ctx attributes instead of saved (ctx.save_for_backward): found inside a dict or a
    namespace as inside a list (a dict once hid r from the check)."""
    import types

    import torch
    from rmsnorm_testkit import compare
    scope = {"torch": torch, "types": types}
    exec("class Keeps(torch.autograd.Function):\n"
         "    @staticmethod\n"
         "    def forward(ctx, x):\n"
         "        r = x.sum(-1)\n"
         f"        {keep}\n"
         "        return x * 2\n"
         "    @staticmethod\n"
         "    def backward(ctx, dy):\n"
         "        return dy * 2\n", scope)
    y = scope["Keeps"].apply(torch.ones(4, 3, requires_grad=True))
    assert [k[1:] for k in compare.ctx_tensors(y)] == [[[4], "fp32"]]


@pytest.mark.parametrize("code", ["import triton\nwith triton.unrecorded():\n    pass\n",
                                  "from triton import unrecorded\n", "from mini_triton import record\n"])
def test_scan_refuses_the_simulators_recorder_switches_however_they_are_reached(code):
    """``unrecorded`` and ``record`` keep torch ops out of the host-op record that item 7 reads: the grader's."""
    assert [rule for rule, _ in scan.scan_rules(code)[1]] == ["simulator"], scan.scan_rules(code)
