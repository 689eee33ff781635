"""The hidden autograder (trusted side): rubric, sandboxed runs of submissions, comparisons.

Importing it makes ``rmsnorm_testkit`` importable: the package the grader shares with the public tests (the
float64 reference and the tolerance, the diagnosis and its known mistakes, GPU timing, the watch on endless
loops, the static scan, the words of the messages). It sits in ``starter/rmsnorm_testkit/`` beside this
folder's parent, in a checkout, in the Gradescope zip and in a job's runtime folder alike, and is registered
from that path: no part of the grader depends on what is on sys.path, and ``starter/`` (which holds the
starter's rmsnorm.py) is never put there. Every module of the grader then imports it as any package
(``from rmsnorm_testkit import text``); the package's ``__init__`` imports nothing, so a process imports torch
only when it uses a module that needs it.
"""
import importlib.util
import sys
from pathlib import Path

TESTKIT = Path(__file__).resolve().parents[1] / "starter" / "rmsnorm_testkit"


def _register_testkit():
    known = sys.modules.get("rmsnorm_testkit")
    if known is not None:
        if [Path(p).resolve() for p in getattr(known, "__path__", [])] != [TESTKIT]:
            raise ImportError(f"rmsnorm_testkit was imported from {list(getattr(known, '__path__', []))}, not from "
                              f"the grader's {TESTKIT}: import autograder before it")
        return
    spec = importlib.util.spec_from_file_location("rmsnorm_testkit", TESTKIT / "__init__.py",
                                                  submodule_search_locations=[str(TESTKIT)])
    package = importlib.util.module_from_spec(spec)
    sys.modules["rmsnorm_testkit"] = package
    try:
        spec.loader.exec_module(package)
    except BaseException:
        del sys.modules["rmsnorm_testkit"]
        raise


_register_testkit()
