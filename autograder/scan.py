"""The static scan the grader runs before any of a submission runs: starter/tests/rmsnorm_scan.py, which the
public tests and `make submit` run too (one scan, the same verdicts everywhere). Its names are this module's:
``scan.scan(source)``, ``scan.RULES``, ``scan.FORBIDDEN_MODULES``...
"""
from .job.shared import load

_scan = load("rmsnorm_scan")


def __getattr__(name):
    return getattr(_scan, name)
