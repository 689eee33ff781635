"""The runtime folder: what a submission's process may read, and nothing else.

A job runs the package ``autograder/job``, which imports only itself, ``mini_triton`` and the six modules
of ``rmsnorm_testkit`` it shares with the public tests (``FOR_JOBS``: the messages' words, the comparisons,
GPU timing, the watch on endless loops, the course GPU as item 10's prediction shows it to the file, the
prediction; all are in the student bundle), as a sandbox account.
So those are all that account needs, besides the Python it runs, laid out as in the checkout. On Gradescope,
setup.sh makes this folder (``python -m autograder.runtime FOLDER``) out of the grader's private folder and sets
RMSNORM_RUNTIME.
Grading from a checkout, ``grade.grade`` makes a fresh copy for each grading; any other process that
runs jobs (the preflight, the project's tests) gets one copy of its own, made on first use. The
checkout itself is never the runtime: its solution and hidden tests must not be on a submission's
import path, and as root the checkout is closed to other users (``grade.keep_checkout_private``).
"""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path

from . import TESTKIT
from .config import ROOT, RUNTIME_VAR

ENTRY = Path("autograder") / "job" / "__main__.py"      # what a job runs, relative to the runtime folder
# The modules of rmsnorm_testkit a job imports, each importing only those before it
FOR_JOBS = ("text", "compare", "dataflow", "timing", "watch", "gpu_view", "predict")


def copy_into(folder: Path) -> Path:
    """Copy the job, mini_triton and the test kit's modules it uses into ``folder`` (made world-readable); return it."""
    ignore = shutil.ignore_patterns("__pycache__")
    (folder / "autograder").mkdir(parents=True)
    shutil.copy(ROOT / "autograder" / "__init__.py", folder / "autograder" / "__init__.py")
    shutil.copytree(ROOT / "autograder" / "job", folder / "autograder" / "job", ignore=ignore)
    shutil.copytree(ROOT / "mini_triton", folder / "mini_triton", ignore=ignore)
    kit = folder / TESTKIT.relative_to(ROOT)
    kit.mkdir(parents=True)
    for name in ("__init__", *FOR_JOBS):
        shutil.copy(TESTKIT / f"{name}.py", kit / f"{name}.py")
    for path in (folder, *folder.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return folder


@functools.lru_cache(maxsize=None)
def _own_copy() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="rmsnorm-runtime-"))
    atexit.register(shutil.rmtree, folder, True)
    return copy_into(folder)


def root() -> Path:
    """The runtime of this process: RMSNORM_RUNTIME when set, else a copy made for this process."""
    preset = os.environ.get(RUNTIME_VAR)
    return Path(preset) if preset else _own_copy()


if __name__ == "__main__":
    if len(sys.argv) != 2 or Path(sys.argv[1]).exists():
        sys.exit("usage: python -m autograder.runtime FOLDER (a folder that does not exist yet)")
    print(copy_into(Path(sys.argv[1])))
