"""Decides the dtype a Python number has as an operand: a wrapped number's ``scalarTypeOf``.

``bool`` -> bool, ``int`` -> int64, ``float`` -> float64 (the *default* dtype only matters
after promotion), ``complex`` -> complex128: what ``c10::Scalar::type()`` reports for a
number a torch call wraps (``wrapped_scalar_tensor``). Everything that turns a Python number
into an operand (the iterator's specs, ``explain``, the kernels' scalar conversion) reads
this one table.
"""

from __future__ import annotations

import struct

import torch

__all__ = ["NUMBER_DTYPES", "Number", "number_dtype", "number_key"]

Number = bool | int | float | complex

NUMBER_DTYPES: dict[type, torch.dtype] = {
    bool: torch.bool,
    int: torch.int64,
    float: torch.float64,
    complex: torch.complex128,
}


def number_dtype(value: object) -> torch.dtype:
    """The dtype of the Python number ``value`` as a wrapped number; ``TypeError`` otherwise.

    A subclass (``numpy.float64`` is a ``float``) counts as its first Python base in the
    order bool, int, float, complex, as ``Scalar``'s constructor overloads pick it.
    """
    dtype = NUMBER_DTYPES.get(type(value))
    if dtype is not None:
        return dtype
    for kind, dtype in NUMBER_DTYPES.items():
        if isinstance(value, kind):
            return dtype
    raise TypeError(f"expected a tensor or a Python number, got {type(value).__name__}")


def number_key(value: Number) -> tuple:
    """A cache key for a Python number, equal to another's exactly when both have the same
    type and the same value bits.

    ``==`` confuses ``1``, ``1.0`` and ``True`` (the type tells them apart), ``0.0`` and
    ``-0.0``, and finds no NaN equal to itself: floats and complex numbers with a zero or NaN
    part are keyed by their IEEE bytes instead; every other number by itself (cheaper, and
    the common case).
    """
    kind = type(value)
    if kind is float:
        if value == value and value != 0:
            return (kind, value)
        return (kind, struct.pack("<d", value))
    if kind is complex:
        if value == value and value.real != 0 and value.imag != 0:
            return (kind, value)
        return (kind, struct.pack("<dd", value.real, value.imag))
    return (kind, value)
