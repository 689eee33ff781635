"""Global memory from a kernel: ``tl.load``, ``tl.store``, tensor descriptors and atomics.

The model itself (bounds checks, the record of each access that the race check and the traffic
statistics read) is mini_triton/memory.py; these are the names a kernel calls it by.
"""
from .. import descriptors, memory

__all__ = ["load", "store", "make_tensor_descriptor", "load_tensor_descriptor", "store_tensor_descriptor",
           "atomic_add", "atomic_max", "atomic_min", "atomic_xchg", "atomic_and", "atomic_or", "atomic_xor",
           "atomic_cas"]

load = memory.load
store = memory.store


def make_tensor_descriptor(base, shape, strides, block_shape, padding_option="zero"):
    """A descriptor of the tensor at ``base``: ``desc.load([i, j])`` reads the block of ``block_shape``
    at those offsets (zeros outside ``shape``), ``desc.store([i, j], value)`` writes its inside part."""
    return descriptors.TensorDescriptor(base, shape, strides, block_shape, padding_option)


def load_tensor_descriptor(desc, offsets):
    """``desc.load(offsets)``, as a function."""
    return desc.load(offsets)


def store_tensor_descriptor(desc, offsets, value):
    """``desc.store(offsets, value)``, as a function."""
    return desc.store(offsets, value)


def atomic_add(pointer, val, mask=None, sem=None, scope=None):
    """Atomically add ``val``; returns each lane's old value. Exempt from race checks."""
    return memory.atomic("add", pointer, val, mask)


def atomic_max(pointer, val, mask=None, sem=None, scope=None):
    return memory.atomic("max", pointer, val, mask)


def atomic_min(pointer, val, mask=None, sem=None, scope=None):
    return memory.atomic("min", pointer, val, mask)


def atomic_xchg(pointer, val, mask=None, sem=None, scope=None):
    return memory.atomic("xchg", pointer, val, mask)


def atomic_and(pointer, val, mask=None, sem=None, scope=None):
    return memory.atomic("and", pointer, val, mask)


def atomic_or(pointer, val, mask=None, sem=None, scope=None):
    return memory.atomic("or", pointer, val, mask)


def atomic_xor(pointer, val, mask=None, sem=None, scope=None):
    return memory.atomic("xor", pointer, val, mask)


def atomic_cas(pointer, cmp, val, sem=None, scope=None):
    """Compare-and-swap: store ``val`` where memory equals ``cmp``; returns the old value."""
    return memory.atomic("cas", pointer, val, None, cmp=cmp)
