"""The grader's code in the submission's process, as it was before rmsnorm.py was imported, and whether it still is.

What this side reports to the judge (the host ops item 7 weighs, a task's recipe) is recorded by code that lives in
the submission's own process: the simulator's recorder (``mini_triton.record``), the kit, this package, and the
torch modes they record with. A file that rebinds one of them (``functools.update_wrapper(triton, holder,
updated=("__dict__",))`` puts a recorder of its own in the simulator's module) would make the report its own. The
handout forbids touching the simulator's own modules, and the scan refuses the direct ways; this is the check of
the result, whatever the way: every function, class and module those modules hold, with each function's code and
each of their classes' methods, is noted before the import (:func:`take`), and compared after every request
(:func:`broken`). A change ends the grading as the scan's refusal does (host.py, judge/remote.py).
"""
from __future__ import annotations

import sys
import types

# the modules whose code records what this side reports (and the torch modes they record with)
WATCHED = ("mini_triton", "rmsnorm_testkit", "autograder.job", "torch.utils._python_dispatch", "torch.overrides")
_CODE = (types.FunctionType, type, types.ModuleType, types.BuiltinFunctionType)


def _watched(name: str) -> bool:
    return any(name == w or name.startswith(w + ".") for w in WATCHED)


def _code(value):
    """What must not change of one value: the value itself, and a function's code."""
    return value, getattr(value, "__code__", None) if isinstance(value, types.FunctionType) else None


def _noted(module: types.ModuleType) -> dict:
    out = {}
    for key, value in list(vars(module).items()):
        if not isinstance(value, _CODE):
            continue                           # data (a launch in flight, a cache) changes as the code runs
        out[key] = _code(value)
        if isinstance(value, type) and value.__module__ == module.__name__:
            for k, v in list(vars(value).items()):
                if isinstance(v, types.FunctionType):
                    out[f"{key}.{k}"] = _code(v)
    return out


def take() -> dict:
    """{module name: (the module, {name: (value, code)})} of every watched module imported now."""
    return {name: (mod, _noted(mod)) for name, mod in list(sys.modules.items())
            if _watched(name) and isinstance(mod, types.ModuleType)}


def broken(snapshot: dict) -> list[str]:
    """The watched names that changed since ``snapshot`` ("mini_triton.record"), first few; [] when none did."""
    changed = []
    for name, (mod, noted) in snapshot.items():
        if sys.modules.get(name) is not mod:
            changed.append(f"sys.modules[{name!r}]")
            continue
        now = vars(mod)
        for key, (value, code) in noted.items():
            owner, _, attr = key.rpartition(".")
            held = now.get(key) if not owner else vars(now[owner]).get(attr) if owner in now and \
                isinstance(now[owner], type) else None
            if held is not value or (code is not None and getattr(held, "__code__", None) is not code):
                changed.append(f"{name}.{key}")
        if len(changed) >= 4:
            break
    return changed[:4]


def message(changed: list[str]) -> str:
    return (f"rmsnorm.py changed the grader's own code in its process ({', '.join(changed)}), which records what "
            f"your file does: the assignment forbids touching it (handout, section 10), so nothing your file did "
            f"can be graded. Remove that code and resubmit")
