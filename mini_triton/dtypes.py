"""Triton's scalar types, the pointer type, and the arithmetic promotion rules.

A GPU kernel never sees a ``torch.Tensor``: it sees a *pointer* to the tensor's
first element, typed by the element type (``pointer<fp32>``), plus scalar
arguments (``int32``, ``fp32``...).  Every value inside a kernel has one of
these types, and binary operators combine them by the rules in
:func:`binary_result_type` -- the same rules Triton applies when it compiles.
"""
from __future__ import annotations

import enum

import torch


class dtype:
    """A Triton scalar type such as ``tl.float32`` or ``tl.int1``.

    The attributes and predicates are Triton's (``primitive_bitwidth``, ``int_bitwidth``, ``is_fp16()``,
    ``is_int_signed()``...): dtype-generic kernels test them to pick an accumulator type. ``torch`` and
    ``kind`` are the simulator's own: how it stores the values, and their kind as a word.
    """

    SINT_TYPES = ["int8", "int16", "int32", "int64"]
    UINT_TYPES = ["int1", "uint8", "uint16", "uint32", "uint64"]
    FP_TYPES = ["fp8e4b15", "fp8e4nv", "fp8e4b8", "fp8e5", "fp8e5b16", "fp16", "bf16", "fp32", "fp64"]
    STANDARD_FP_TYPES = ["fp16", "bf16", "fp32", "fp64"]
    OTHER_TYPES = ["void"]

    class SIGNEDNESS(enum.Enum):
        SIGNED = 0
        UNSIGNED = 1

    class KIND(enum.Enum):
        BOOLEAN = 0
        INTEGRAL = 1
        FLOATING = 2

    def __init__(self, name: str, torch_dtype: torch.dtype | None, kind: str, bits: int):
        self.name = name            # Triton's spelling: fp32, bf16, int32, int1...
        self.torch = torch_dtype    # how the simulator stores values of this type
        self.kind = kind            # "bool", "uint", "int" or "float"
        self.primitive_bitwidth = bits
        self.itemsize = bits // 8
        if kind in ("bool", "uint", "int"):
            self.int_signedness = dtype.SIGNEDNESS.SIGNED if kind == "int" else dtype.SIGNEDNESS.UNSIGNED
            self.int_bitwidth = bits
        elif kind == "float":
            self.fp_mantissa_width, self.exponent_bias = _FLOAT_LAYOUT[name]

    # -- predicates used throughout the simulator (and by kernels) --------
    def is_ptr(self):
        return False

    def is_floating(self):
        return self.kind == "float"

    def is_standard_floating(self):
        return self.name in dtype.STANDARD_FP_TYPES

    def is_int(self):
        return self.kind in ("int", "uint", "bool")

    def is_bool(self):
        return self.kind == "bool"

    def is_int_signed(self):
        return self.kind == "int"

    def is_int_unsigned(self):
        return self.kind in ("uint", "bool")

    def is_fp8(self):
        return "fp8" in self.name

    def is_block(self):
        return False

    def is_const(self):
        return False

    def is_void(self):
        return False

    @staticmethod
    def is_dtype(type_str):
        return type_str in dtype.SINT_TYPES + dtype.UINT_TYPES + dtype.FP_TYPES + dtype.OTHER_TYPES

    def get_int_max_value(self):
        return int_range(self)[1]

    def get_int_min_value(self):
        return int_range(self)[0]

    @property
    def scalar(self):
        return self

    def __eq__(self, other):
        if not isinstance(other, dtype):
            return NotImplemented
        return type(other) is type(self) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __repr__(self):
        return f"tl.{_PUBLIC_NAME.get(self.name, self.name)}"

    __str__ = __repr__

    def __call__(self, value):
        raise NotImplementedError(f"calling {self!r} as a constructor is not supported; use tl.full or .to()")


def _name_predicate(name):
    def predicate(self):
        return self.name == name
    predicate.__name__ = f"is_{name}"
    return predicate


# is_fp16(), is_bf16(), is_int64(), is_uint8()...: one per type name, as Triton has them
for _name in ("fp16", "bf16", "fp32", "fp64", "int1", "int8", "int16", "int32", "int64", "uint8", "uint16",
              "uint32", "uint64", "fp8e4nv", "fp8e4b8", "fp8e4b15", "fp8e5", "fp8e5b16"):
    setattr(dtype, f"is_{_name}", _name_predicate(_name))
del _name

# (mantissa bits, exponent bias) of the float types
_FLOAT_LAYOUT = {"fp16": (10, 15), "bf16": (7, 127), "fp32": (23, 127), "fp64": (52, 1023)}


class pointer_type(dtype):
    """``pointer<element_ty>``: what a tensor argument becomes inside a kernel."""

    def __init__(self, element_ty: dtype):
        super().__init__(f"ptr<{element_ty.name}>", torch.int64, "ptr", 64)
        self.element_ty = element_ty
        self.address_space = "global"
        self.const = False

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
