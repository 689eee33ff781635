"""``triton.language.extra``: device libraries; the simulator has libdevice (``extra.libdevice``,
also as ``extra.cuda.libdevice``)."""
from . import cuda, libdevice
from ..unsupported import missing_name as _missing_name

__all__ = ["cuda", "libdevice"]
__getattr__ = _missing_name("tl.extra")
