"""mini_triton: a CPU simulator of Triton that checks kernels and counts memory traffic.

Use it exactly like Triton::

    import mini_triton as triton
    tl = triton.language

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    add_kernel[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK=128)

Kernels run on CPU tensors. Out-of-bounds accesses, data races, Python
branches on blocks and non-constexpr shapes raise errors that name the
kernel, program, line and offsets; ``get_stats()`` / ``record()`` report
how many elements each kernel loaded and stored.
"""
from . import heap  # noqa: F401 -- imported for its effect: glibc keeps freed memory for reuse
from . import arithmetic, shapes  # noqa: F401 -- imported for their effect: blocks' operators and shape methods
from . import language, testing
from .autotune import Config, autotune, heuristics
from .errors import (BlockTruthError, CompilationError, DataRaceError, DataRaceWarning, DeviceAssertionError,
                     Int32OverflowError, MiniTritonError, OrderDependenceWarning, OutOfBoundsError, OutOfResources)
from .launcher import JITFunction, jit
from .races import get_race_mode, set_race_mode
from .runtime import get_batching, set_batching, set_rule_mode, unrecorded
from .memory import set_undefined_float
from .stats import get_stats, plan, record, reset_stats
from .imports import install_as_triton

# The version of Triton whose language the simulator models: a kernel file's version shim reads it as Triton's.
__version__ = "3.6.0"
IS_MINI_TRITON = True


def cdiv(x, y):
    """Ceiling division: the number of blocks of size y that cover x."""
    return (x + y - 1) // y


def next_power_of_2(n: int) -> int:
    """The smallest power of 2 that is ≥ n (1 for n ≤ 1)."""
    n = int(n)
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


__all__ = ["jit", "JITFunction", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "language",
           "testing", "get_stats", "reset_stats", "record", "plan", "set_race_mode", "get_race_mode",
           "set_batching", "get_batching", "set_rule_mode", "set_undefined_float", "unrecorded", "install_as_triton",
           "MiniTritonError", "CompilationError", "OutOfBoundsError", "DataRaceError", "DataRaceWarning",
           "BlockTruthError", "DeviceAssertionError", "Int32OverflowError", "OrderDependenceWarning", "OutOfResources"]
