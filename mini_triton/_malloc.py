"""Keep freed memory for reuse (glibc only).

The simulator allocates and frees megabyte-sized blocks thousands of times a
second. By default glibc hands each such block back to the kernel when it is
freed, and the next allocation pays for fresh, zeroed pages: that alone can
double a launch's run time. Raising glibc's mmap and trim thresholds keeps the
memory in the process for reuse. Set MINI_TRITON_MALLOC=0 to leave malloc alone.
"""
import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def tune():
    if os.environ.get("MINI_TRITON_MALLOC", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, 32 * 1024 * 1024)
        ok &= libc.mallopt(_M_TRIM_THRESHOLD, 512 * 1024 * 1024)
        return bool(ok)
    except (OSError, AttributeError):
        return False


TUNED = tune()
