"""``triton.language.extra``: device libraries; the simulator has libdevice (``extra.libdevice``,
also as ``extra.cuda.libdevice``)."""
from . import cuda, libdevice  # noqa: F401
