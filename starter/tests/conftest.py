import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from rmsnorm_check import load_impl  # noqa: E402


def _impl_path():
    return Path(os.environ.get("RMSNORM_IMPL", HERE.parent / "rmsnorm.py"))


@pytest.fixture(scope="session")
def impl():
    """Your rmsnorm.py, on the backend it picks (a GPU if there is one, else mini_triton)."""
    return load_impl(_impl_path())


@pytest.fixture(scope="session")
def sim_impl():
    """Your rmsnorm.py on the mini_triton simulator, which counts memory traffic."""
    return load_impl(_impl_path(), backend="mini_triton")
