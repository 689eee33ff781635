"""What works in the public tests works where a student runs the file otherwise: ``python rmsnorm.py`` and `make
bench` import it as the tests do (Triton's import paths give the simulator), and ``TRITON_INTERPRET=1`` runs
Triton's own interpreter where Triton is installed, as the bundle's README offers, or says how to install it."""
import importlib.util
import os
import subprocess
import sys

import pytest
import without_triton

from conftest import ROOT

# The solution with Triton's libdevice import (as Liger and Triton 3's tutorials write it) and a smoke test of its
# own under __main__, as a student adds one.
LIBDEVICE = ("import triton.language as tl\n", "import triton.language as tl\n"
             "from triton.language.extra.libdevice import rsqrt\n")
SMOKE = '''

if __name__ == "__main__":
    x, g = torch.randn(4, 64, device=DEVICE), torch.rand(64, device=DEVICE)
    y, r = rmsnorm_forward(x, g)
    want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * g
    print("backend", BACKEND, triton.__name__, "max error", float((y - want).abs().max()))
'''
# Run a file as `python rmsnorm.py` would (with or without Triton: without_triton.script).
AS_SCRIPT = '''
import runpy, sys
sys.argv = [sys.argv[1]]
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def _student_file(tmp_path):
    source = (ROOT / "solution" / "rmsnorm.py").read_text()
    assert source.count(LIBDEVICE[0]) == 1 and source.count("r = tl.rsqrt(") == 2
    path = tmp_path / "rmsnorm.py"
    path.write_text(source.replace(*LIBDEVICE).replace("r = tl.rsqrt(", "r = rsqrt(") + SMOKE)
    return path


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "MINI_TRITON")}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


@pytest.mark.parametrize("triton_installed", ["installed", "absent"])
def test_python_rmsnorm_py_imports_triton_s_paths_as_the_tests_do(tmp_path, triton_installed):
    path = _student_file(tmp_path)
    (tmp_path / "as_script.py").write_text(without_triton.script(AS_SCRIPT, triton_installed))
    run = subprocess.run([sys.executable, str(tmp_path / "as_script.py"), str(path)],
                         capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "backend mini_triton mini_triton max error 0.0" in run.stdout, run.stdout


def test_make_bench_on_the_cpu_loads_it_as_the_tests_do(tmp_path):
    path = _student_file(tmp_path)
    run = subprocess.run([sys.executable, str(ROOT / "starter" / "bench.py")], capture_output=True, text=True,
                         cwd=tmp_path, env=_env(RMSNORM_IMPL=str(path), BENCH_OUT=str(tmp_path)), timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "predicted on an H200" in run.stdout, run.stdout[-2000:]


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="Triton is not installed here")
def test_triton_interpret_runs_the_public_tests_on_triton_s_interpreter(tmp_path):
    """`TRITON_INTERPRET=1 make test` (the bundle's README offers it as a cross-check): the public tests' ``impl`` is
    the file on Triton's interpreter, not on the simulator."""
    check = tmp_path / "test_which_backend.py"
    check.write_text("def test_backend(impl):\n    print('BACKEND', impl.BACKEND, impl.triton.__name__)\n")
    conftest = ROOT / "starter" / "tests" / "conftest.py"
    (tmp_path / "conftest.py").write_text(conftest.read_text())
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", str(check)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env=_env(TRITON_INTERPRET="1", RMSNORM_IMPL=str(ROOT / "solution" / "rmsnorm.py"),
                                  PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'starter'}"))
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "BACKEND interpreter triton" in run.stdout, run.stdout


def test_triton_interpret_without_triton_says_how_to_install_it(tmp_path):
    script = tmp_path / "load.py"
    script.write_text(without_triton.script("import sys\nfrom rmsnorm_testkit.compare import load_impl\n"
                                            "try:\n    load_impl(sys.argv[1])\nexcept ImportError as e:\n"
                                            "    print('REFUSED', e)\n", "absent"))
    run = subprocess.run([sys.executable, str(script), str(ROOT / "solution" / "rmsnorm.py")],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         env=_env(TRITON_INTERPRET="1", PYTHONPATH=f"{ROOT}{os.pathsep}{ROOT / 'starter'}"))
    assert "REFUSED TRITON_INTERPRET=1 asks for Triton's own interpreter, and Triton is not installed here: " \
           "`make setup TRITON=1` installs it" in run.stdout, run.stdout + run.stderr[-2000:]


def test_make_test_fails_a_file_that_imports_a_module_beside_it_which_the_grader_will_not_have(tmp_path):
    """A helpers module of the student's own beside rmsnorm.py works in the public tests, and fails to import on the
    autograder, which receives rmsnorm.py alone: `make test` says so first, and fails the run."""
    source = (ROOT / "solution" / "rmsnorm.py").read_text()
    (tmp_path / "rmsnorm.py").write_text(source.replace("import torch\n", "import torch\nfrom my_helpers import EPS  "
                                                                          "# noqa: F401\n", 1))
    (tmp_path / "my_helpers.py").write_text("EPS = 1e-5\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(ROOT / "starter" / "tests" / "test_part_a.py"), "-k", "one_row_per_program"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300,
                         env=_env(RMSNORM_IMPL=str(tmp_path / "rmsnorm.py"), PYTHONPATH=str(tmp_path)))
    assert run.returncode == 1 and " passed" in run.stdout, run.stdout[-3000:]
    assert "line 21: my_helpers is a file beside rmsnorm.py; the autograder receives rmsnorm.py alone" in run.stdout, \
        run.stdout[-3000:]
