"""Load tests/kernels_for_tests.py once per backend ("mini" or "interpret")."""
import importlib.util
import os
from pathlib import Path

_CACHE = {}


def kernels(backend: str):
    if backend not in _CACHE:
        if backend == "interpret":
            os.environ["TRITON_INTERPRET"] = "1"
        path = Path(__file__).with_name("kernels_for_tests.py")
        spec = importlib.util.spec_from_file_location(f"kernels_for_tests_{backend}", path)
        mod = importlib.util.module_from_spec(spec)
        mod.BACKEND = backend
        spec.loader.exec_module(mod)
        _CACHE[backend] = mod
    return _CACHE[backend]


def triton_available() -> bool:
    try:
        import triton  # noqa: F401
        import numpy  # noqa: F401
        return True
    except ImportError:
        return False
