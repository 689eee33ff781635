import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import torch

# Triton's own library functions (tl.sum...) are themselves @triton.jit functions, built
# when triton is first imported: the interpreter must be chosen before that, once per
# process. Without a GPU the tests compare mini_triton with Triton's interpreter; with
# one, they run real Triton instead.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
    # `make check` runs two workers on two cores: torch's intra-op threads would only wait for a core (and spin
    # while they wait, about a fifth of the simulator's CPU). One thread per process, here and in every process the
    # tests start (the warm server, the gradings' children), unless the environment says otherwise. (A GPU machine
    # keeps torch's default: its measured host times were taken with it.)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

# A CPU grading predicts item 10 (about 1.5 s of CPU a grading); the tests that read the prediction
# (test_autograder_grade.py, test_autograder_zip.py) ask for it, the many gradings of other tests make none.
os.environ.setdefault("RMSNORM_PREDICT", "off")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "starter" / "tests"))      # the public tests (test_part_a...), which some tests call

import autograder  # noqa: E402 -- first: it makes rmsnorm_testkit importable (autograder/__init__.py)
from autograder import accounts  # noqa: E402


@pytest.fixture(scope="session")
def sandbox_accounts():
    """As root, the grader runs submissions as sandbox accounts: `make check` creates them first
    (`make sandbox-accounts`); a direct `pytest tests` as root gets them here, once, for the first
    test that grades through the sandbox (its module says so: pytestmark = usefixtures)."""
    if os.geteuid() == 0 and not accounts.existing():
        accounts.create()


@pytest.fixture
def grader_copy():
    """The grader, the simulator and the test kit, copied where other users can read them (a TA's
    own checkout: grading as root takes other users' rights off this one's folders)."""
    d = Path(tempfile.mkdtemp(prefix="rmsnorm-grader-copy-"))
    ignore = shutil.ignore_patterns("__pycache__")
    for folder in ("autograder", "mini_triton"):
        shutil.copytree(ROOT / folder, d / folder, ignore=ignore)
    shutil.copytree(autograder.TESTKIT, d / "starter" / "rmsnorm_testkit", ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", d)
    for path in (d, *d.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    yield d
    shutil.rmtree(d, ignore_errors=True)
