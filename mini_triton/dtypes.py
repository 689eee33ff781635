"""Triton's scalar types, the pointer type, and the arithmetic promotion rules.

A GPU kernel never sees a ``torch.Tensor``: it sees a *pointer* to the tensor's
first element, typed by the element type (``pointer<fp32>``), plus scalar
arguments (``int32``, ``fp32``...).  Every value inside a kernel has one of
these types, and binary operators combine them by the rules in
:func:`binary_result_type` -- the same rules Triton applies when it compiles.
"""
from __future__ import annotations

import torch


class dtype:
    """A Triton scalar type such as ``tl.float32`` or ``tl.int1``."""

    def __init__(self, name: str, torch_dtype: torch.dtype | None, kind: str, bits: int):
        self.name = name            # Triton's spelling: fp32, bf16, int32, int1...
        self.torch = torch_dtype    # how the simulator stores values of this type
        self.kind = kind            # "bool", "uint", "int" or "float"
        self.primitive_bitwidth = bits

    # -- predicates used throughout the simulator (and by kernels) --------
    def is_ptr(self):
        return False

    def is_floating(self):
        return self.kind == "float"

    def is_int(self):
        return self.kind in ("int", "uint", "bool")

    def is_bool(self):
        return self.kind == "bool"

    def is_int_signed(self):
        return self.kind == "int"

    def is_fp16(self):
        return self.name == "fp16"

    def is_bf16(self):
        return self.name == "bf16"

    def is_fp32(self):
        return self.name == "fp32"

    def is_fp64(self):
        return self.name == "fp64"

    @property
    def scalar(self):
        return self

    def __repr__(self):
        return f"tl.{_PUBLIC_NAME.get(self.name, self.name)}"

    __str__ = __repr__

    def __call__(self, value):
        raise NotImplementedError(f"calling {self!r} as a constructor is not supported; use tl.full or .to()")


class pointer_type(dtype):
    """``pointer<element_ty>``: what a tensor argument becomes inside a kernel."""

    def __init__(self, element_ty: dtype):
        super().__init__(f"ptr<{element_ty.name}>", torch.int64, "ptr", 64)
        self.element_ty = element_ty

    def is_ptr(self):
        return True

    def is_floating(self):
        return False

    def is_int(self):
        return False

    def __eq__(self, other):
        return isinstance(other, pointer_type) and other.element_ty == self.element_ty

    def __hash__(self):
        return hash(("ptr", self.element_ty.name))

    def __repr__(self):
        return f"pointer<{self.element_ty!r}>"


int1 = dtype("int1", torch.bool, "bool", 1)
int8 = dtype("int8", torch.int8, "int", 8)
int16 = dtype("int16", torch.int16, "int", 16)
int32 = dtype("int32", torch.int32, "int", 32)
int64 = dtype("int64", torch.int64, "int", 64)
uint8 = dtype("uint8", torch.uint8, "uint", 8)
uint16 = dtype("uint16", torch.uint16, "uint", 16)
uint32 = dtype("uint32", torch.uint32, "uint", 32)
uint64 = dtype("uint64", torch.uint64, "uint", 64)
float16 = dtype("fp16", torch.float16, "float", 16)
bfloat16 = dtype("bf16", torch.bfloat16, "float", 16)
float32 = dtype("fp32", torch.float32, "float", 32)
float64 = dtype("fp64", torch.float64, "float", 64)

_PUBLIC_NAME = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64"}

ALL = [int1, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64]
_FROM_TORCH = {d.torch: d for d in ALL}
_INT_RANGE = {d: (int(torch.iinfo(d.torch).min), int(torch.iinfo(d.torch).max))
              for d in ALL if d.kind in ("int", "uint")}
_INT_RANGE[int1] = (0, 1)

# Integer values are computed in int64 (floats in their own precision): the
# simulator then checks that int32 results still fit (see ``check_int_range``).
COMPUTE_INT = torch.int64


def from_torch(t: torch.dtype) -> dtype:
    """The Triton type of a torch dtype, or a clear error for unsupported ones."""
    try:
        return _FROM_TORCH[t]
    except KeyError:
        raise TypeError(f"mini_triton does not support tensors of dtype {t}") from None


def int_range(d: dtype):
    return _INT_RANGE[d]


def storage_dtype(d: dtype) -> torch.dtype:
    """How a block of type ``d`` is held in the simulator: ints widen to int64."""
    if d.kind in ("int", "uint"):
        return COMPUTE_INT
    return d.torch


def of_python_scalar(v) -> dtype:
    """Triton's type for a Python literal: bool→int1, int→int32/int64, float→fp32."""
    if isinstance(v, bool):
        return int1
    if isinstance(v, int):
        if -2**31 <= v < 2**31:
            return int32
        if -2**63 <= v < 2**63:
            return int64
        raise OverflowError(f"integer {v} does not fit in 64 bits")
    if isinstance(v, float):
        return float32
    raise TypeError(f"unsupported scalar {v!r} of type {type(v).__name__}")


_KIND_ORDER = {"bool": 0, "uint": 1, "int": 2, "float": 3}


def _integer_promote(a: dtype, b: dtype) -> dtype:
    if a.is_bool() and b.is_bool():
        return int1
    # booleans take part in integer arithmetic as int8-wide unsigned-ish values
    a = int8 if a.is_bool() else a
    b = int8 if b.is_bool() else b
    if a.kind == b.kind:
        return a if a.primitive_bitwidth >= b.primitive_bitwidth else b
    signed, unsigned = (a, b) if a.kind == "int" else (b, a)
    return unsigned if unsigned.primitive_bitwidth >= signed.primitive_bitwidth else signed


def binary_result_type(a: dtype, a_is_literal: bool, b: dtype, b_is_literal: bool,
                       div_or_mod: bool = False) -> dtype:
    """The type two operands are converted to before an arithmetic operator.

    These are Triton's rules (``computation_type_impl``):

    0. a Python literal of the same or a lower kind (bool < uint < int < float)
       does not take part: ``bf16_block * 2.0`` stays bf16;
    1. fp64 wins, then 2. fp32;
    3. fp16 (``/`` and ``%`` are computed in fp32);
    4. bf16 with bf16 stays bf16, bf16 with anything else is fp32;
    5. two integers: the wider wins, unsigned wins a tie.
    """
    if a_is_literal != b_is_literal:
        lit, blk = (a, b) if a_is_literal else (b, a)
        if _KIND_ORDER[lit.kind] <= _KIND_ORDER[blk.kind]:
            if div_or_mod and blk in (float16, bfloat16):
                return float32
            return blk
    if a is float64 or b is float64:
        return float64
    if a is float32 or b is float32:
        return float32
    if a is float16 or b is float16:
        return float32 if div_or_mod else float16
    if a is bfloat16 or b is bfloat16:
        if div_or_mod:
            return float32
        return bfloat16 if (a is bfloat16 and b is bfloat16) else float32
    return _integer_promote(a, b)
