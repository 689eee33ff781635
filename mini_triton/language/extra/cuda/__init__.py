"""``triton.language.extra.cuda``: the same libdevice as ``triton.language.extra.libdevice``, and the
launch's thread counts."""
from .... import runtime as _runtime
from .. import libdevice
from ...unsupported import missing_name as _missing_name

__all__ = ["libdevice", "num_warps", "num_threads"]


def num_warps():
    """The warps of a program (the launch's ``num_warps``, 4 by default)."""
    return _runtime.current().launch.num_warps


def num_threads():
    """The threads of a program: 32 per warp."""
    return 32 * num_warps()


__getattr__ = _missing_name("tl.extra.cuda")
