"""Load a kernel module of tests/ (kernels_for_tests.py, library_kernels.py) once per backend ("mini" or
"interpret")."""
import importlib.util
import os
from pathlib import Path

_CACHE = {}


def kernels(backend: str, module: str = "kernels_for_tests"):
    if (backend, module) not in _CACHE:
        path = Path(__file__).with_name(f"{module}.py")
        spec = importlib.util.spec_from_file_location(f"{module}_{backend}", path)
        mod = importlib.util.module_from_spec(spec)
        mod.BACKEND = backend
        # @triton.jit picks the interpreter when TRITON_INTERPRET is set as it decorates
        old = os.environ.get("TRITON_INTERPRET")
        os.environ["TRITON_INTERPRET"] = "1" if backend == "interpret" else (old or "0")
        try:
            spec.loader.exec_module(mod)
        finally:
            if old is None:
                os.environ.pop("TRITON_INTERPRET", None)
            else:
                os.environ["TRITON_INTERPRET"] = old
        _CACHE[backend, module] = mod
    return _CACHE[backend, module]


def triton_available() -> bool:
    """Can Triton's interpreter run here (triton and numpy installed, interpreter chosen)?"""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    try:
        import triton  # noqa: F401
        import numpy  # noqa: F401
        return True
    except ImportError:
        return False
