import os
import sys

import torch

# Triton's own library functions (tl.sum...) are themselves @triton.jit functions, built
# when triton is first imported: the interpreter must be chosen before that, once per
# process. Without a GPU the tests compare mini_triton with Triton's interpreter; with
# one, they run real Triton instead.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "starter" / "tests"))      # rmsnorm_check: shared comparison helpers

# As root, the grader runs submissions as sandbox accounts: `make check` creates them first
# (`make sandbox-accounts`); a direct `pytest tests` as root gets them here.
if os.geteuid() == 0:
    from autograder import accounts
    if not accounts.existing():
        accounts.create()
