"""The errors mini_triton raises, and where in the kernel they happened.

On a GPU most kernel bugs are silent: an out-of-bounds load reads whatever
lies past the tensor, two programs writing one address leave whichever value
lands last. The simulator turns each of these into an exception that says
*which kernel, which program, which source line, which argument, which
offsets* -- the facts you need to fix it.
"""
from __future__ import annotations

import linecache
import os
import sys
import sysconfig
import types


class MiniTritonError(Exception):
    """Base class of every error a kernel can trigger in the simulator."""


class CompilationError(MiniTritonError):
    """Something real Triton would reject when it compiles the kernel."""


class OutOfResources(MiniTritonError):
    """A launch asks for more of a GPU's resources than a program may have (Triton's ``OutOfResources``): the
    shared memory of a pipelined loop's loads (pipeline.py)."""


class OutOfBoundsError(MiniTritonError, IndexError):
    """An active lane of a load, store or atomic fell outside its tensor."""


class DataRaceError(MiniTritonError):
    """Two programs of one launch touched the same address, at least one storing."""


class DataRaceWarning(UserWarning):
    """The warning form of :class:`DataRaceError` (``set_race_mode("warn")``)."""


class OrderDependenceWarning(UserWarning):
    """A float atomic_add, or a sum built under a lock: its result depends on the order programs run."""


class BlockTruthError(MiniTritonError, TypeError):
    """Python ``if``/``and``/``while`` on a block with more than one element."""


class DeviceAssertionError(MiniTritonError, AssertionError):
    """A ``tl.device_assert`` failed in some program."""


class Int32OverflowError(MiniTritonError, OverflowError):
    """An int32 computation left the int32 range (it would wrap on a GPU)."""


def describe_program(pid_tuple, grid) -> str:
    if len(grid) == 1:
        return f"program {pid_tuple[0]}"
    return "program (" + ", ".join(str(p) for p in pid_tuple[:len(grid)]) + ")"


def kernel_site(codes, depth=1):
    """(function name, line, file) of the innermost frame running kernel code, or ('', 0, '')."""
    f = sys._getframe(depth)
    while f is not None:
        if f.f_code in codes:
            return f.f_code.co_name, f.f_lineno, f.f_code.co_filename
        f = f.f_back
    return "", 0, ""


def raised_at(exc, site):
    """``exc``, its traceback ending at ``site`` = (function, line, file): a line of a kernel that has
    finished running. A data race is found after the launch, when no frame of the kernel is left;
    this gives the error the last traceback entry it would have had, so that pytest and Python show
    the kernel's line (a one-line code object compiled under the kernel's file name raises it)."""
    function, line, filename = site
    if not line or not filename:
        return exc
    text = linecache.getline(filename, line).rstrip()
    indent = len(text) - len(text.lstrip())
    # "raise (__exc   )" as wide as the kernel's line, so that tracebacks underline all of it or none
    statement = "raise (__exc" + " " * max(0, len(text) - indent - 13) + ")"
    code = compile("\n" * (line - 2) + "if 1:\n" + " " * indent + statement if line > 1 and indent
                   else "\n" * (line - 1) + statement, filename, "exec")
    code = code.replace(co_name=function, **({"co_qualname": function} if hasattr(code, "co_qualname") else {}))
    try:
        exec(code, {"__exc": exc})
    except BaseException as e:              # noqa: BLE001 -- it is exc, with its new traceback
        return e.with_traceback(e.__traceback__.tb_next)
    return exc


def format_offsets(values) -> str:
    """Short text for a sorted list of offending offsets: '100–127' or '3, 9, 40'."""
    values = sorted(set(int(v) for v in values))
    if not values:
        return ""
    if values[-1] - values[0] + 1 == len(values) and len(values) > 2:
        return f"{values[0]}–{values[-1]}"
    shown = ", ".join(str(v) for v in values[:8])
    return shown + (f", … ({len(values)} in all)" if len(values) > 8 else "")


# -- tracebacks that end at the kernel's line --------------------------------
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LIBRARIES = tuple({os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "purelib", "platlib")})


def student_traceback(tb):
    """``tb`` without the simulator's own frames, so that an error ends at the kernel's line.

    A traceback through mini_triton shows how the simulator works, not what the kernel did:
    its frames are dropped, and so are library frames (torch, numpy) called from inside it.
    The frames before the launch (your test, your wrapper) and the kernel's own frames (the
    kernel, its @jit helpers) stay. ``MINI_TRITON_TRACEBACK=full`` keeps every frame.
    """
    if os.environ.get("MINI_TRITON_TRACEBACK") == "full":
        return tb
    kept, inside = [], False
    while tb is not None:
        name = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if name.startswith(_PACKAGE):
            inside = True
        elif not (inside and (name.startswith(_LIBRARIES) or name.startswith("<"))):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out
