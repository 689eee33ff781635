"""``triton.language.extra.cuda``: the same libdevice as ``triton.language.extra.libdevice``."""
from .. import libdevice  # noqa: F401
