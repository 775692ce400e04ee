"""Decides how each torch dtype lies in a byte buffer, as numpy arrays see it.

The kernels view raw storage bytes through numpy arrays of a *lane* type: the dtype itself
where numpy and numba have it (the unsigned uint16/uint32/uint64 included), uint8 for bool
(one byte, 0 or 1, as ``c10`` stores it) and the float8 types (their bit patterns), uint16
bit patterns for float16 and bfloat16 (numba has no CPU float16, numpy no bfloat16), and two
lanes (real, imaginary) for the complex types, as ``c10::complex`` lays them out: float32 or
float64 lanes, and float16 bit patterns for complex32 (``c10::complex<c10::Half>``), bfloat16
ones for torch 2.14's bcomplex32 (``c10::complex<c10::BFloat16>``).

Three sets, each a prefix of the one after it:

- ``SUPPORTED_DTYPES``: the 12 dtypes the elementwise and reduction kernels compute in;
- ``COPY_DTYPES``: every dtype torch CPU copies *and casts* (``copy_kernel``): the 12, the
  unsigned uint16/32/64, complex32 (and bcomplex32 where torch has it) and the five float8
  types;
- ``STORAGE_DTYPES``: also the dtypes CPU only moves (same-dtype ``direct_copy_kernel``:
  bits1x8, bits2x4, bits4x2, bits8, bits16 and float4_e2m1fn_x2); a cast to or from one of
  them raises ``NotImplementedError`` on CPU and on mydev.

The copy kernels read ``lane`` / ``lanes``, the elementwise loops ``element`` (a whole
element as one numpy value) and ``fmt`` (what a uint8/uint16 lane holds). Importing this
module imports numpy and torch only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "BFLOAT16",
    "BOOL",
    "COPY_DTYPES",
    "E4M3FN",
    "E4M3FNUZ",
    "E5M2",
    "E5M2FNUZ",
    "E8M0FNU",
    "HALF",
    "PLAIN",
    "STORAGE_DTYPES",
    "SUPPORTED_DTYPES",
    "DtypeLayout",
    "layout_of",
]

# What a uint8 / uint16 lane holds (the ``fmt`` flag of ``elementwise._loops``, and of the
# float8 conversions); other lanes hold their own dtype (PLAIN).
PLAIN = 0
BOOL = 1
HALF = 2
BFLOAT16 = 3
E4M3FN = 4
E4M3FNUZ = 5
E5M2 = 6
E5M2FNUZ = 7
E8M0FNU = 8


@dataclass(frozen=True)
class DtypeLayout:
    """One dtype's storage: ``lanes`` values of ``lane`` per element, ``itemsize`` bytes.

    ``kind`` is "bool", "int" (signed and unsigned integers), "reduced" (float16/bfloat16),
    "float", "complex", "complex32" (complex of float16 or bfloat16 parts, by ``fmt``),
    "float8", or "bits" (bytes torch only moves).
    """

    dtype: torch.dtype
    kind: str
    lane: np.dtype
    lanes: int
    element: np.dtype  # one whole element as a numpy value (complex64 for complex64)
    fmt: int  # PLAIN, BOOL, HALF, BFLOAT16 or a float8 format

    @property
    def itemsize(self) -> int:
        """Bytes per element: ``torch.dtype.itemsize``."""
        return self.lane.itemsize * self.lanes


def _layout(
    dtype: torch.dtype, kind: str, lane: type, lanes: int = 1, fmt: int = PLAIN
) -> DtypeLayout:
    element = np.dtype(lane)
    if lanes == 2:
        element = np.dtype(
            {np.float32: np.complex64, np.float64: np.complex128}.get(lane, np.uint32)
        )
    return DtypeLayout(dtype, kind, np.dtype(lane), lanes, element, fmt)


def _optional(*names: str) -> tuple[torch.dtype, ...]:
    """The dtypes of ``names`` this torch has."""
    return tuple(getattr(torch, name) for name in names if hasattr(torch, name))


_COMPUTE = (
    _layout(torch.bool, "bool", np.uint8, fmt=BOOL),
    _layout(torch.uint8, "int", np.uint8),
    _layout(torch.int8, "int", np.int8),
    _layout(torch.int16, "int", np.int16),
    _layout(torch.int32, "int", np.int32),
    _layout(torch.int64, "int", np.int64),
    _layout(torch.float16, "reduced", np.uint16, fmt=HALF),
    _layout(torch.bfloat16, "reduced", np.uint16, fmt=BFLOAT16),
    _layout(torch.float32, "float", np.float32),
    _layout(torch.float64, "float", np.float64),
    _layout(torch.complex64, "complex", np.float32, 2),
    _layout(torch.complex128, "complex", np.float64, 2),
)
_CASTS = (
    _layout(torch.uint16, "int", np.uint16),
    _layout(torch.uint32, "int", np.uint32),
    _layout(torch.uint64, "int", np.uint64),
    _layout(torch.complex32, "complex32", np.uint16, 2, fmt=HALF),
    *(
        _layout(dtype, "complex32", np.uint16, 2, fmt=BFLOAT16)
        for dtype in _optional("bcomplex32")  # torch 2.14
    ),
    _layout(torch.float8_e4m3fn, "float8", np.uint8, fmt=E4M3FN),
    _layout(torch.float8_e4m3fnuz, "float8", np.uint8, fmt=E4M3FNUZ),
    _layout(torch.float8_e5m2, "float8", np.uint8, fmt=E5M2),
    _layout(torch.float8_e5m2fnuz, "float8", np.uint8, fmt=E5M2FNUZ),
    _layout(torch.float8_e8m0fnu, "float8", np.uint8, fmt=E8M0FNU),
)
_MOVES = tuple(
    _layout(dtype, "bits", np.uint16 if dtype.itemsize == 2 else np.uint8)
    for dtype in _optional("bits1x8", "bits2x4", "bits4x2", "bits8", "bits16", "float4_e2m1fn_x2")
)

_LAYOUTS: dict[torch.dtype, DtypeLayout] = {
    layout.dtype: layout for layout in (*_COMPUTE, *_CASTS, *_MOVES)
}

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = tuple(layout.dtype for layout in _COMPUTE)
COPY_DTYPES: tuple[torch.dtype, ...] = SUPPORTED_DTYPES + tuple(layout.dtype for layout in _CASTS)
STORAGE_DTYPES: tuple[torch.dtype, ...] = tuple(_LAYOUTS)


def layout_of(dtype: torch.dtype) -> DtypeLayout:
    """The storage layout of ``dtype``; raises ``TypeError`` for a dtype the kernels lack."""
    try:
        return _LAYOUTS[dtype]
    except KeyError:
        raise TypeError(f"mydev kernels do not support dtype {dtype}") from None
