"""The runtime folder: what a submission's process may read, and nothing else.

A job runs ``worker.py``, which imports only itself and ``mini_triton``, as a sandbox account. So
those two are all that account needs, besides the Python it runs. On Gradescope, setup.sh copies
them out of the grader's private folder into a world-readable folder and sets RMSNORM_RUNTIME.
Grading from a checkout, ``grade.grade`` makes a fresh copy for each grading; any other process
that runs jobs (the preflight, the project's tests) gets one copy of its own, made on first use. The
checkout itself is never the runtime: its solution and hidden tests must not be on a submission's
import path, and as root the checkout is closed to other users (``grade.keep_checkout_private``).
"""
from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from pathlib import Path

from .config import ROOT, RUNTIME_VAR


def copy_into(folder: Path) -> Path:
    """Copy worker.py and mini_triton into ``folder`` (made world-readable); return ``folder``."""
    (folder / "autograder").mkdir(parents=True)
    shutil.copy(ROOT / "autograder" / "worker.py", folder / "autograder" / "worker.py")
    shutil.copytree(ROOT / "mini_triton", folder / "mini_triton", ignore=shutil.ignore_patterns("__pycache__"))
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
