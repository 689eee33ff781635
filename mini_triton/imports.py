"""Triton's import paths, answered by the simulator: ``import triton`` in a file run on mini_triton.

Kernel files are written against Triton: ``import triton``, ``import triton.language as tl``, ``from
triton.language.extra.libdevice import rsqrt``, ``from triton import cdiv, jit``. Inside ``as_triton()``
each of those imports gets the simulator's module of the same path (``triton.language`` is
``mini_triton.language``), whether or not Triton itself is installed; a path the simulator does not
have fails at the line that imports it, with its name. Outside the block, ``triton`` is whatever it was
before: Triton's own, if it is installed, so that one process can load a file on both backends.
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import sys
import types

# Triton's public modules the simulator answers: the package itself, and these with their submodules;
# ``triton.runtime`` and the rest are Triton's machinery, which the simulator does not model.
PUBLIC = ("triton", "triton.language", "triton.testing")


def simulator_module(name: str) -> types.ModuleType:
    """The simulator's module for Triton's module ``name`` (``triton.language.extra.libdevice``), or an
    ImportError that names what the simulator lacks."""
    if name != "triton" and not any(name == p or name.startswith(p + ".") for p in PUBLIC[1:]):
        raise ImportError(f"mini_triton, the simulator, has no {name}: kernel files may import triton, "
                          f"triton.language (its extra and math modules too) and triton.testing", name=name)
    own = "mini_triton" + name[len("triton"):]
    try:
        return importlib.import_module(own)
    except ModuleNotFoundError:
        parent, _, last = own.rpartition(".")
        found = getattr(importlib.import_module(parent), last, None)      # a module held as an attribute
        if isinstance(found, types.ModuleType):
            return found
        raise ImportError(f"mini_triton, the simulator, has no {name}", name=name) from None


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``triton`` and its submodules as the simulator's modules."""

    def find_spec(self, name, path=None, target=None):
        if name != "triton" and not name.startswith("triton."):
            return None
        module = simulator_module(name)
        return importlib.machinery.ModuleSpec(name, self, is_package=hasattr(module, "__path__"),
                                              loader_state=(module, module.__spec__))

    def create_module(self, spec):
        return spec.loader_state[0]

    def exec_module(self, module):
        """The simulator's module is already loaded: only give it back its own spec, which the import system
        replaced with this one (``importlib.reload`` of the module would look for it as ``triton...``)."""
        module.__spec__ = module.__spec__.loader_state[1]


@contextlib.contextmanager
def as_triton():
    """Within the block, ``import triton...`` gives the simulator's modules; afterwards sys.modules holds
    what it held before (a file imported within keeps the modules it bound)."""
    saved = {k: v for k, v in sys.modules.items() if k == "triton" or k.startswith("triton.")}
    for k in saved:
        del sys.modules[k]
    finder = _Finder()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
        for k in [k for k in sys.modules if k == "triton" or k.startswith("triton.")]:
            del sys.modules[k]
        sys.modules.update(saved)
