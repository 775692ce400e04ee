"""Decides how each supported torch dtype lies in a byte buffer, as numpy arrays see it.

The kernels view raw storage bytes through numpy arrays of a *lane* type: the dtype itself
where numpy and numba have it, uint8 for bool (one byte, 0 or 1, as ``c10`` stores it),
uint16 bit patterns for float16 and bfloat16 (numba has no CPU float16, numpy no bfloat16),
and two float lanes (real, imaginary) for the complex types, as ``c10::complex`` lays them out.
This is the one table of the 12 dtypes the kernels support: the copy kernels read ``lane`` /
``lanes``, the elementwise loops ``element`` (a whole element as one numpy value) and ``fmt``
(what a ``uint8``/``uint16`` lane holds). Importing this module imports numpy and torch only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "BFLOAT16",
    "BOOL",
    "HALF",
    "PLAIN",
    "SUPPORTED_DTYPES",
    "DtypeLayout",
    "layout_of",
]

# What a uint8 / uint16 lane holds (the ``fmt`` flag of ``_elementwise_loops``); other lanes
# hold their own dtype (PLAIN).
PLAIN = 0
BOOL = 1
HALF = 2
BFLOAT16 = 3


@dataclass(frozen=True)
class DtypeLayout:
    """One dtype's storage: ``lanes`` values of ``lane`` per element, ``itemsize`` bytes."""

    dtype: torch.dtype
    kind: str  # "bool", "int", "reduced" (float16/bfloat16), "float" or "complex"
    lane: np.dtype
    lanes: int
    element: np.dtype  # one whole element as a numpy value (complex64 for complex64)
    fmt: int  # PLAIN, BOOL, HALF or BFLOAT16

    @property
    def itemsize(self) -> int:
        """Bytes per element: ``torch.dtype.itemsize``."""
        return self.lane.itemsize * self.lanes


def _layout(
    dtype: torch.dtype, kind: str, lane: type, lanes: int = 1, fmt: int = PLAIN
) -> DtypeLayout:
    element = (
        np.dtype(np.complex64 if lane is np.float32 else np.complex128) if lanes == 2 else None
    )
    return DtypeLayout(dtype, kind, np.dtype(lane), lanes, element or np.dtype(lane), fmt)


_LAYOUTS: dict[torch.dtype, DtypeLayout] = {
    layout.dtype: layout
    for layout in (
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
}

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = tuple(_LAYOUTS)


def layout_of(dtype: torch.dtype) -> DtypeLayout:
    """The storage layout of ``dtype``; raises ``TypeError`` for a dtype the kernels lack."""
    try:
        return _LAYOUTS[dtype]
    except KeyError:
        raise TypeError(f"mydev kernels do not support dtype {dtype}") from None
