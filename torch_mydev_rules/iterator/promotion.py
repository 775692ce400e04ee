"""Decides the dtype an elementwise op computes in: c10 type promotion and ATen's result_type.

Two rules live here:

* ``promote_types(a, b)`` is the pairwise lattice of ``c10::promoteTypes``
  (``c10/core/ScalarType.cpp``): bool < integers < floating < complex, widening inside a
  category, ``uint8`` with a signed integer goes to the next signed type wide enough for both,
  and ``float16`` with ``bfloat16`` meets at ``float32``.
* ``result_type(operands)`` is ``at::native::result_type`` (``native/TypeProperties.cpp``):
  operands are split into three priority classes -- tensors with ``dim > 0``, zero-dim
  tensors, wrapped Python numbers -- each class is promoted on its own, and a lower class
  only changes the answer when it belongs to a higher *category* (bool < int < float <
  complex) than the class above it.

Dtypes are ``torch.dtype`` values; nothing here touches tensor memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch

__all__ = [
    "OperandDtype",
    "can_cast",
    "default_complex_dtype",
    "dtype_name",
    "is_complex",
    "is_floating",
    "is_integral",
    "promote_types",
    "result_type",
    "to_complex",
    "to_real",
]

# Signed integers by width, and the floating / complex families in the order they widen.
_SIGNED = (torch.int8, torch.int16, torch.int32, torch.int64)
_FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
# torch 2.14 adds bcomplex32 (complex of bfloat16 parts); torch 2.13 has no such dtype.
_COMPLEX = (
    torch.complex32,
    torch.complex64,
    torch.complex128,
    *((torch.bcomplex32,) if hasattr(torch, "bcomplex32") else ()),
)

# The dtypes whose pairwise promotion c10 defines completely (13; 14 with bcomplex32).
_LATTICE = frozenset((torch.bool, torch.uint8, *_SIGNED, *_FLOATING, *_COMPLEX))

# "Barebones" unsigned types (uint1..uint7, uint16/32/64): c10 promotes them only with the
# floating types below (torch 2.13 table); every other mixed pair raises.
_BAREBONES_UNSIGNED = frozenset(
    getattr(torch, f"uint{bits}")
    for bits in (1, 2, 3, 4, 5, 6, 7, 16, 32, 64)
    if hasattr(torch, f"uint{bits}")
)
_BAREBONES_FLOAT_PARTNERS = frozenset(
    (*_FLOATING, *((torch.float4_e2m1fn_x2,) if hasattr(torch, "float4_e2m1fn_x2") else ()))
)

_DEFAULT_COMPLEX_OF = {
    torch.float16: torch.complex32,
    torch.float32: torch.complex64,
    torch.float64: torch.complex128,
}

# c10's ScalarType names, used in error messages so they read like torch's.
_SCALAR_TYPE_NAMES = {
    torch.bool: "Bool",
    torch.uint8: "Byte",
    torch.int8: "Char",
    torch.int16: "Short",
    torch.int32: "Int",
    torch.int64: "Long",
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
    torch.float32: "Float",
    torch.float64: "Double",
    torch.complex32: "ComplexHalf",
    torch.complex64: "ComplexFloat",
    torch.complex128: "ComplexDouble",
    **({torch.bcomplex32: "BComplex32"} if hasattr(torch, "bcomplex32") else {}),
    **{
        getattr(torch, name.lower()): name
        for name in (
            *(f"UInt{bits}" for bits in (1, 2, 3, 4, 5, 6, 7, 16, 32, 64)),
            *(f"Int{bits}" for bits in range(1, 8)),
            "Float8_e5m2",
            "Float8_e4m3fn",
            "Float8_e5m2fnuz",
            "Float8_e4m3fnuz",
            "Float8_e8m0fnu",
            "Float4_e2m1fn_x2",
            "Bits1x8",
            "Bits2x4",
            "Bits4x2",
            "Bits8",
            "Bits16",
            "QInt8",
            "QUInt8",
            "QInt32",
            "QUInt4x2",
            "QUInt2x4",
        )
        if hasattr(torch, name.lower())
    },
}


def dtype_name(dtype: torch.dtype | None) -> str:
    """c10's ScalarType name of ``dtype`` (``Float``, ``Long``...), ``Undefined`` for None."""
    if dtype is None:
        return "Undefined"
    return _SCALAR_TYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def is_floating(dtype: torch.dtype | None) -> bool:
    """True for float16, bfloat16, float32 and float64 (``c10::isFloatingType``, lattice part)."""
    return dtype in _FLOATING


def is_complex(dtype: torch.dtype | None) -> bool:
    """True for complex32, complex64, complex128 and, where torch has it, bcomplex32
    (``c10::isComplexType``)."""
    return dtype in _COMPLEX


def is_integral(dtype: torch.dtype | None, *, include_bool: bool) -> bool:
    """True for the integer dtypes, and for bool when asked (``c10::isIntegralType``)."""
    if dtype is torch.bool:
        return include_bool
    return dtype in _SIGNED or dtype is torch.uint8 or dtype in _BAREBONES_UNSIGNED


def to_complex(dtype: torch.dtype) -> torch.dtype:
    """The complex dtype whose parts are ``dtype`` (``c10::toComplexType``); complex stays.

    Read from torch (``torch.dtype.to_complex``): bfloat16's is complex64 in torch 2.13,
    which has no complex bfloat16, and bcomplex32 from torch 2.14.
    """
    return dtype if dtype in _COMPLEX else dtype.to_complex()


def to_real(dtype: torch.dtype) -> torch.dtype:
    """The real dtype of a complex dtype's parts (``c10::toRealValueType``); reals stay."""
    return dtype.to_real() if dtype in _COMPLEX else dtype


def default_complex_dtype(default_dtype: torch.dtype) -> torch.dtype:
    """The complex dtype paired with the default float dtype (``get_default_complex_dtype``)."""
    return _DEFAULT_COMPLEX_OF.get(default_dtype, torch.complex64)


def _promote_floating(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    """Two floating dtypes: the wider one; half and bfloat16 meet at float32."""
    if {a, b} == {torch.float16, torch.bfloat16}:
        return torch.float32
    width = {torch.float16: 16, torch.bfloat16: 16, torch.float32: 32, torch.float64: 64}
    return a if width[a] >= width[b] else b


def _promote_integers(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    """Two integer dtypes: the wider signed one; uint8 with a signed type needs one more bit."""
    if a is torch.uint8 and b is torch.uint8:
        return torch.uint8
    if a is torch.uint8 or b is torch.uint8:
        signed = b if a is torch.uint8 else a
        return torch.int16 if signed is torch.int8 else signed
    return a if _SIGNED.index(a) >= _SIGNED.index(b) else b


def _category(dtype: torch.dtype) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex: the order categories win in promotion."""
    if dtype is torch.bool:
        return 0
    if dtype in _FLOATING:
        return 2
    if dtype in _COMPLEX:
        return 3
    return 1


def promote_types(a: torch.dtype, b: torch.dtype) -> torch.dtype:
    """The smallest dtype both ``a`` and ``b`` convert to without leaving their category.

    Mirrors ``c10::promoteTypes``: equal dtypes stay; bool gives way to anything; across
    categories the higher category wins, and a complex result has the promotion of the
    floating parts of both, an integer adding none (``float64 + complex64 -> complex128``,
    ``bfloat16 + complex32 -> complex64``, ``int8 + bcomplex32 -> bcomplex32``); inside a
    category the wider type wins. Barebones unsigned types only promote with floating types,
    and quantized, bits and float8 types only with themselves, as in torch (anything else
    raises ``RuntimeError``).
    """
    if a == b:
        return a
    if a in _BAREBONES_UNSIGNED or b in _BAREBONES_UNSIGNED:
        other = b if a in _BAREBONES_UNSIGNED else a
        if other in _BAREBONES_FLOAT_PARTNERS:
            return other
        raise RuntimeError(
            "Promotion for uint16, uint32, uint64 types is not supported, attempted to "
            f"promote {dtype_name(a)} and {dtype_name(b)}"
        )
    if a not in _LATTICE or b not in _LATTICE:
        raise RuntimeError(f"Promotion of {dtype_name(a)} and {dtype_name(b)} is not defined")
    cat_a, cat_b = _category(a), _category(b)
    if cat_a == 0 or cat_b == 0:
        return b if cat_a == 0 else a
    if cat_a == 3 or cat_b == 3:
        if cat_a < 2 or cat_b < 2:
            return a if cat_a == 3 else b
        return to_complex(_promote_floating(to_real(a), to_real(b)))
    if cat_a == 2 or cat_b == 2:
        if cat_a == cat_b:
            return _promote_floating(a, b)
        return a if cat_a == 2 else b
    return _promote_integers(a, b)


def can_cast(from_: torch.dtype, to: torch.dtype) -> bool:
    """Whether an op computed in ``from_`` may write into a ``to`` output (``c10::canCast``).

    Refused: complex into non-complex, floating into integral, anything but bool into bool.
    """
    if is_complex(from_) and not is_complex(to):
        return False
    if is_floating(from_) and is_integral(to, include_bool=False):
        return False
    return not (from_ is not torch.bool and to is torch.bool)


@dataclass(frozen=True)
class OperandDtype:
    """What ``result_type`` needs of one operand: its dtype, rank, and whether it was a number.

    ``is_wrapped_number`` marks a Python number turned into a zero-dim tensor
    (``TensorImpl::is_wrapped_number``); such operands have ``ndim == 0``.
    """

    dtype: torch.dtype
    ndim: int
    is_wrapped_number: bool = False


def _promote_skip_undefined(a: torch.dtype | None, b: torch.dtype | None) -> torch.dtype | None:
    """``promote_skip_undefined``: None is the identity of promotion."""
    if a is None:
        return b
    if b is None:
        return a
    return promote_types(a, b)


def _combine_categories(
    higher: torch.dtype | None, lower: torch.dtype | None
) -> torch.dtype | None:
    """``combine_categories``: ``lower`` matters only if its category is above ``higher``'s."""
    if is_complex(higher):
        return higher
    if is_complex(lower):
        # A floating ``higher`` keeps its width inside the complex result.
        return to_complex(higher) if is_floating(higher) else lower
    if is_floating(higher):
        return higher
    if higher is torch.bool or is_floating(lower):
        return _promote_skip_undefined(higher, lower)
    if higher is not None:
        return higher
    return lower


def result_type(
    operands: Iterable[OperandDtype], *, default_dtype: torch.dtype = torch.float32
) -> torch.dtype | None:
    """The dtype an op over ``operands`` computes in (``at::native::result_type``).

    Each operand joins one class: ``dim > 0`` tensors, zero-dim tensors, or wrapped numbers
    (whose float / complex dtype is first replaced by the default float / complex dtype).
    Classes are promoted separately, then combined from the lowest: a lower class changes the
    result only when its category (bool < int < float < complex) is higher. Returns None when
    there are no operands.
    """
    dim_result: torch.dtype | None = None
    zero_result: torch.dtype | None = None
    wrapped_result: torch.dtype | None = None
    for op in operands:
        current = op.dtype
        if op.is_wrapped_number:
            if is_complex(current):
                current = default_complex_dtype(default_dtype)
            elif is_floating(current):
                current = default_dtype
        if op.ndim > 0:
            dim_result = _promote_skip_undefined(dim_result, current)
        elif op.is_wrapped_number:
            wrapped_result = _promote_skip_undefined(wrapped_result, current)
        else:
            zero_result = _promote_skip_undefined(zero_result, current)
    return _combine_categories(dim_result, _combine_categories(zero_result, wrapped_result))
