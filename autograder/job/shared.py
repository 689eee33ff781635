"""The files of ``starter/tests/`` that the public tests, the grader and its job share, loaded by their paths.

They sit two folders above this package, in ``starter/tests/``, in a checkout, in the Gradescope zip and
in the runtime folder alike (runtime.copy_into). Each is loaded once, under its own name, after the ones
it imports (each imports only those before it in FILES, by name), so that neither the grader nor a job
depends on what is on sys.path. ``rmsnorm_text`` imports nothing: the grader's own process, which never
imports torch, reads it (``text``); the others import torch and are loaded where they are used.
"""
import importlib.util
import sys
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[2] / "starter" / "tests"
# Names and message lengths; comparisons; GPU timing; whether a loop that ran out of time progressed; the known
# mistakes; the diagnosis of a wrong output; the static scan of a submission.
FILES = ("rmsnorm_text", "rmsnorm_check", "rmsnorm_timing", "rmsnorm_watch", "rmsnorm_causes", "rmsnorm_diagnose",
         "rmsnorm_scan")
FOR_JOBS = FILES[:4]                         # what a job reads: the runtime folder holds these


def load(name: str):
    """The shared module ``name`` (starter/tests/<name>.py), loaded on first use, after those before it."""
    for each in FILES[:FILES.index(name) + 1]:
        if each not in sys.modules:
            spec = importlib.util.spec_from_file_location(each, FOLDER / f"{each}.py")
            module = importlib.util.module_from_spec(spec)
            sys.modules[each] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[each]
                raise
    return sys.modules[name]


text = load("rmsnorm_text")
