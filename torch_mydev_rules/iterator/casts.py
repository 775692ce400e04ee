"""Decides how ``copy_`` turns an element of one dtype into another: ``c10::convert``'s route.

The table of the dtypes torch CPU's ``copy_kernel`` copies, and the intermediate types a
value passes through on the way (``c10/util/TypeCast.h``): a complex value loses its
imaginary part before it becomes a real one (not a bool: both parts count), float16,
bfloat16, complex32 (and torch 2.14's bcomplex32) and the float8 types are read as float32
(complex64) -- their C++ types convert only through ``float`` --, and are written from a
float32 (complex64) value; a
floating value becomes uint8 through int64 (c10's specialisation). ``explain`` prints the
route as the copy's last step; the device's kernels (``torch_mydev/kernels/copy/cast.py``) follow
it, and the tests compare both against CPU. Dtypes in, dtypes out: nothing here touches
tensor memory.
"""

from __future__ import annotations

import torch

from torch_mydev_rules.iterator.promotion import dtype_name, to_real

__all__ = ["CAST_DTYPES", "FLOAT8_DTYPES", "MOVE_ONLY_DTYPES", "conversion", "route"]

FLOAT8_DTYPES: tuple[torch.dtype, ...] = (
    torch.float8_e4m3fn,
    torch.float8_e4m3fnuz,
    torch.float8_e5m2,
    torch.float8_e5m2fnuz,
    torch.float8_e8m0fnu,
)
# The complex types of float16 / bfloat16 parts (c10::complex<Half>, and from torch 2.14
# c10::complex<BFloat16>): read as complex64, written from it.
_REDUCED_COMPLEX = (
    torch.complex32,
    *((torch.bcomplex32,) if hasattr(torch, "bcomplex32") else ()),
)
# Pairs whose conversion keeps the source's bits: c10::complex<BFloat16> is made from a
# BFloat16 as it is (float16 -> complex32 goes through float, which quiets a signalling NaN).
_BITS_KEPT = frozenset(
    (torch.bfloat16, dtype) for dtype in _REDUCED_COMPLEX if dtype.to_real() == torch.bfloat16
)
# The dtypes torch CPU computes in (AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND3(Bool, Half,
# BFloat16)): every elementwise op and reduction dispatches over these.
COMPUTE_DTYPES: tuple[torch.dtype, ...] = (
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
)
# Every dtype copy_kernel casts between (AT_DISPATCH over all types, the barebones unsigned,
# complex32, bcomplex32 where torch has it, and the float8 types).
CAST_DTYPES: tuple[torch.dtype, ...] = (
    *COMPUTE_DTYPES,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    *_REDUCED_COMPLEX,
    *FLOAT8_DTYPES,
)
# Dtypes direct_copy_kernel moves to their own dtype and nothing casts.
MOVE_ONLY_DTYPES: tuple[torch.dtype, ...] = tuple(
    getattr(torch, name)
    for name in ("bits1x8", "bits2x4", "bits4x2", "bits8", "bits16", "float4_e2m1fn_x2")
    if hasattr(torch, name)
)

# C++ types that convert only through float (a Half, BFloat16 or Float8_* has operator float
# and a constructor from float).
_THROUGH_FLOAT = frozenset((torch.float16, torch.bfloat16, *FLOAT8_DTYPES))
_FLOATING = frozenset((*_THROUGH_FLOAT, torch.float32, torch.float64))


def route(src: torch.dtype, dst: torch.dtype) -> tuple[torch.dtype, ...]:
    """The dtypes a value passes through in ``c10::convert<dst>(src)``, ``src`` to ``dst``.

    ``route(float64, float8_e4m3fn)`` is ``(float64, float32, float8_e4m3fn)``: rounded
    twice; ``route(complex32, int32)`` is ``(complex32, float16, float32, int32)``.
    """
    path = [src]

    def to(dtype: torch.dtype) -> None:
        if path[-1] != dtype:
            path.append(dtype)

    if src == dst or dst == torch.bool or (src, dst) in _BITS_KEPT:
        to(dst)
        return tuple(path)
    if src.is_complex and not dst.is_complex:
        to(to_real(src))  # the real part
    if path[-1] == dst:  # complex32 -> float16 keeps the real Half (bcomplex32 -> bfloat16)
        return tuple(path)
    if path[-1] in _THROUGH_FLOAT:  # read as a float
        to(torch.float32)
    elif path[-1] in _REDUCED_COMPLEX:
        to(torch.complex64)
    if dst in _THROUGH_FLOAT:  # written from a float
        to(torch.float32)
    elif dst in _REDUCED_COMPLEX:
        to(torch.complex64)
    elif dst == torch.uint8 and path[-1] in _FLOATING:
        to(torch.int64)
    to(dst)
    return tuple(path)


def conversion(src: torch.dtype, dst: torch.dtype) -> str:
    """One line for ``explain``: the route of ``src`` -> ``dst``, a byte move, or why CPU's
    ``copy_kernel`` (and so mydev) raises ``NotImplementedError``."""
    if src == dst:
        if src in CAST_DTYPES or src in MOVE_ONLY_DTYPES:
            return f"same dtype: {src.itemsize}-byte elements move unchanged"
        return f'no "copy_kernel" loop for {dtype_name(src)}: NotImplementedError'
    for dtype in (dst, src):
        if dtype not in CAST_DTYPES:
            return f'no "copy_" loop for {dtype_name(dtype)}: NotImplementedError'
    names = [str(d).removeprefix("torch.") for d in route(src, dst)]
    return "cast " + " -> ".join(names) + " (c10::convert)"
