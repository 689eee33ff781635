"""The comparison helpers the public tests and the grader share: one float64 reference, one
tolerance rule, one message format (starter/tests/rmsnorm_check.py, which students also get).

The grader loads that file by its path, once, as the module ``rmsnorm_check``: importing any
part of the grader never depends on what is on sys.path.
"""
import importlib.util
import sys

from .config import ROOT

PATH = ROOT / "starter" / "tests" / "rmsnorm_check.py"


def _load():
    if "rmsnorm_check" not in sys.modules:
        spec = importlib.util.spec_from_file_location("rmsnorm_check", PATH)
        module = importlib.util.module_from_spec(spec)
        sys.modules["rmsnorm_check"] = module
        spec.loader.exec_module(module)
    return sys.modules["rmsnorm_check"]


rmsnorm_check = _load()
DTYPE_NAMES = rmsnorm_check.DTYPE_NAMES
compare = rmsnorm_check.compare
describe = rmsnorm_check.describe
eager = rmsnorm_check.eager
host_work_problem = rmsnorm_check.host_work_problem
reference = rmsnorm_check.reference
SLOW_HINT = rmsnorm_check.SLOW_HINT
timed_out = rmsnorm_check.timed_out
