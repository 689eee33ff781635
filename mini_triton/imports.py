"""Triton's import paths, answered by the simulator: ``import triton`` in a file run on mini_triton.

Kernel files are written against Triton: ``import triton``, ``import triton.language as tl``, ``from
triton.language.extra.libdevice import rsqrt``, ``from triton import cdiv, jit``. Inside ``as_triton()``
each of those imports gets the simulator's module of the same path (``triton.language`` is
``mini_triton.language``), whether or not Triton itself is installed; a path the simulator does not
have fails at the line that imports it, with its name. Outside the block, ``triton`` is whatever it was
before: Triton's own, if it is installed, so that one process can load a file on both backends.

Only the kernel file and what it imports get the simulator. PyTorch looks for Triton on its own, to decide
what ``torch.compile`` and its code generator may use (``import triton.backends.compiler``, ``from
triton.runtime.autotuner import ...``): torch's modules see what they would see outside the block, Triton's
own if it is installed and nothing if not, as on any machine without a GPU. So a file that compiles a helper
of its own with ``torch.compile`` at import loads here as it does there.
"""
from __future__ import annotations

import builtins
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import sys
import types

# Triton's public modules the simulator answers: the package itself, and these with their submodules;
# ``triton.runtime`` and the rest are Triton's machinery, which the simulator does not model.
PUBLIC = ("triton", "triton.language", "triton.testing")
# Of Triton's machinery, its driver alone (the device's figures, which Triton's tutorials read): ``from triton.runtime
# import driver`` and ``from triton.runtime.driver import driver`` give the simulator's (driver.py).
DRIVER = ("triton.runtime", "triton.runtime.driver")
# Whose imports of Triton see the world outside ``as_triton()``: torch, which looks for Triton itself, and Triton's
# own modules, which torch may load there (the simulator's modules are named mini_triton...).
LOOKS_FOR_TRITON = ("torch", "functorch", "triton")


def simulator_module(name: str) -> types.ModuleType:
    """The simulator's module for Triton's module ``name`` (``triton.language.extra.libdevice``), or an
    ImportError that names what the simulator lacks."""
    if name in DRIVER:
        return importlib.import_module("mini_triton.driver")
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
        return importlib.machinery.ModuleSpec(name, self, is_package=hasattr(module, "__path__") or name == DRIVER[0],
                                              loader_state=(module, module.__spec__))

    def create_module(self, spec):
        return spec.loader_state[0]

    def exec_module(self, module):
        """The simulator's module is already loaded: only give it back its own spec, which the import system
        replaced with this one (``importlib.reload`` of the module would look for it as ``triton...``)."""
        module.__spec__ = module.__spec__.loader_state[1]


def _is_triton(name: str) -> bool:
    return name == "triton" or name.startswith("triton.")


def _take_triton_modules() -> dict:
    """Remove ``triton`` and its submodules from sys.modules, and give them back."""
    return {k: sys.modules.pop(k) for k in [k for k in sys.modules if _is_triton(k)]}


class _TwoWorlds:
    """``import`` while the block is open: the simulator's Triton for the kernel file, the world outside the block
    for torch's own modules (``LOOKS_FOR_TRITON``). Whatever torch loads of Triton's own is kept for the world
    outside, which sys.modules holds again when the block ends."""

    def __init__(self, outside: dict, finder):
        self.outside, self.finder, self.depth = outside, finder, 0
        self.builtin = builtins.__import__

    def __call__(self, name, globals=None, locals=None, fromlist=(), level=0):
        importer = (globals or {}).get("__name__") or ""
        target = name if level == 0 else (globals or {}).get("__package__") or ""    # from .jit import ...
        if _is_triton(target) and not self.depth and importer.split(".")[0] in LOOKS_FOR_TRITON:
            return self.from_outside(name, globals, locals, fromlist, level)
        try:
            return self.builtin(name, globals, locals, fromlist, level)
        finally:
            _keep_own_runtime()

    def from_outside(self, *args):
        simulated = _take_triton_modules()
        sys.modules.update(self.outside)
        sys.meta_path.remove(self.finder)
        self.depth += 1
        try:
            return self.builtin(*args)
        finally:
            self.depth -= 1
            self.outside.update(_take_triton_modules())
            sys.modules.update(simulated)
            sys.meta_path.insert(0, self.finder)


def _keep_own_runtime():
    """Importing ``triton.runtime`` and ``triton.runtime.driver`` (both the simulator's driver module, DRIVER) binds
    that module as ``runtime`` of mini_triton (the parent package ``triton`` is) and as ``driver`` of itself: give
    each back what it held (mini_triton's own runtime module; Triton's ``driver`` object), or a later ``from
    mini_triton import runtime`` gets the driver's module, and ``from triton.runtime.driver import driver`` a module
    with no ``active``."""
    package, own, drv = (sys.modules.get(n) for n in ("mini_triton", "mini_triton.runtime", "mini_triton.driver"))
    if package is None or own is None:
        return
    if package.__dict__.get("runtime") is not own:
        package.runtime = own
    if drv is not None and isinstance(drv.__dict__.get("driver"), types.ModuleType):
        drv.driver = own.driver


_OPEN = []                   # the as_triton() blocks open now, and install_as_triton()'s for good


def _enter() -> tuple:
    saved = _take_triton_modules()
    finder = _Finder()
    sys.meta_path.insert(0, finder)
    importer = _TwoWorlds(saved, finder)
    builtins.__import__ = importer
    _OPEN.append(importer)
    return saved, finder, importer


@contextlib.contextmanager
def as_triton():
    """Within the block, ``import triton...`` gives the simulator's modules, except to torch's own modules (see the
    module's docstring); afterwards sys.modules holds what it held before, and what torch loaded of Triton's own
    meanwhile (a file imported within keeps the modules it bound)."""
    saved, finder, importer = _enter()
    try:
        yield
    finally:
        _OPEN.remove(importer)
        builtins.__import__ = importer.builtin
        sys.meta_path.remove(finder)
        _take_triton_modules()
        sys.modules.update(saved)
        _keep_own_runtime()


def install_as_triton():
    """From here on, in this process, ``import triton...`` gives the simulator's modules, as within ``as_triton()``
    (torch's own imports excepted). A kernel file's backend block calls it when the file runs on the simulator, so
    that ``python rmsnorm.py`` imports as the tests and the grader do; where they load the file (an ``as_triton()``
    block), or once done, it does nothing."""
    if not _OPEN:
        _enter()
