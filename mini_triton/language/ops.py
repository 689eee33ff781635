"""The table of every ``tl`` operation: each module's ``__all__``, under Triton's names.

``tl`` exports this table, and ``tl.math`` the part of it Triton keeps in ``triton.language.math``
too (names.MATH): a function added to a module and its ``__all__`` is ``tl.<name>``, and also
``tl.math.<name>`` when Triton has it there. Element-wise math shared with libdevice is one table
of its own, in elementwise.py.
"""
from . import creation, debug, elementwise, matmul, memory_ops, reductions, shapes
from . import names

MODULES = (creation, memory_ops, elementwise, reductions, shapes, matmul, debug)
TL = {name: getattr(module, name) for module in MODULES for name in module.__all__}
MATH = {name: op for name, op in TL.items() if name in names.MATH}
