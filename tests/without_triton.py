"""Scripts the tests run in a process of their own, with or without Triton importable there.

A student's laptop and Gradescope have no Triton; this machine may. ``script(code, "absent")`` is ``code`` run where
``import triton`` (and any of its submodules) fails as it does when Triton is not installed, whatever is installed.
"""
NO_TRITON = '''import importlib.abc as _abc
import sys as _sys


class _NoTriton(_abc.MetaPathFinder):
    """Triton cannot be imported in this process, as where it is not installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "triton" or name.startswith("triton."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)


_sys.meta_path.insert(0, _NoTriton())
'''


def script(code: str, triton: str) -> str:
    """``code`` as a script, with Triton "installed" (as this machine has it) or "absent"."""
    assert triton in ("installed", "absent"), triton
    return (NO_TRITON if triton == "absent" else "") + code
