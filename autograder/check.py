"""The comparison and diagnosis helpers the public tests and the grader share: one float64 reference, one
tolerance rule, one message format (starter/tests/rmsnorm_check.py), and the diagnosis that names the cause
of a wrong output (starter/tests/rmsnorm_diagnose.py) from the known mistakes (rmsnorm_causes.py). Students
get these files.

The grader loads them by their paths, once, as the modules ``rmsnorm_check``, ``rmsnorm_causes`` and
``rmsnorm_diagnose``
(job/shared.py, as the job loads its own): importing any part of the grader never depends on what is on
sys.path.
"""
from .job.shared import load

rmsnorm_check = load("rmsnorm_check")
causes = load("rmsnorm_causes")
diagnosis = load("rmsnorm_diagnose")
DTYPE_NAMES = rmsnorm_check.DTYPE_NAMES
apply_view = rmsnorm_check.apply_view
compare = rmsnorm_check.compare
ctx_tensors_message = rmsnorm_check.ctx_tensors_message
describe = rmsnorm_check.describe
eager = rmsnorm_check.eager
host_work_problem = rmsnorm_check.host_work_problem
partial_dtype_problem = rmsnorm_check.partial_dtype_problem
reference = rmsnorm_check.reference
SLOW_HINT = rmsnorm_check.SLOW_HINT
GPU_SLOW_HINT = rmsnorm_check.GPU_SLOW_HINT
COMPILING_HINT = rmsnorm_check.COMPILING_HINT
timed_out = rmsnorm_check.timed_out
