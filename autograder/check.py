"""The comparison and diagnosis helpers the public tests and the grader share: one float64 reference, one
tolerance rule, one message format (starter/tests/rmsnorm_check.py), and the diagnosis that names the cause
of a wrong output (starter/tests/rmsnorm_diagnose.py) from the known mistakes (rmsnorm_causes.py). Students
get these files.

The grader loads them by their paths, once, as the modules ``rmsnorm_check``, ``rmsnorm_causes`` and
``rmsnorm_diagnose``:
importing any part of the grader never depends on what is on sys.path.
"""
import importlib.util
import sys

from .config import ROOT

TESTS = ROOT / "starter" / "tests"


def _load(name):
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, TESTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


rmsnorm_check = _load("rmsnorm_check")
causes = _load("rmsnorm_causes")
diagnosis = _load("rmsnorm_diagnose")
PATH = TESTS / "rmsnorm_check.py"
DTYPE_NAMES = rmsnorm_check.DTYPE_NAMES
compare = rmsnorm_check.compare
describe = rmsnorm_check.describe
eager = rmsnorm_check.eager
host_work_problem = rmsnorm_check.host_work_problem
reference = rmsnorm_check.reference
SLOW_HINT = rmsnorm_check.SLOW_HINT
timed_out = rmsnorm_check.timed_out
