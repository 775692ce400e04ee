"""Decides how each supported torch dtype lies in a byte buffer, as numpy arrays see it.

The kernels view raw storage bytes through numpy arrays of a *lane* type: the dtype itself
where numpy and numba have it, uint8 for bool (one byte, 0 or 1, as ``c10`` stores it),
uint16 bit patterns for float16 and bfloat16 (numba has no CPU float16, numpy no bfloat16),
and two float lanes (real, imaginary) for the complex types, as ``c10::complex`` lays them out.
Importing this module imports numpy and torch only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["SUPPORTED_DTYPES", "DtypeLayout", "layout_of"]


@dataclass(frozen=True)
class DtypeLayout:
    """One dtype's storage: ``lanes`` values of ``lane`` per element, ``itemsize`` bytes."""

    dtype: torch.dtype
    kind: str  # "bool", "int", "reduced" (float16/bfloat16), "float" or "complex"
    lane: np.dtype
    lanes: int

    @property
    def itemsize(self) -> int:
        """Bytes per element: ``torch.dtype.itemsize``."""
        return self.lane.itemsize * self.lanes


def _layout(dtype: torch.dtype, kind: str, lane: type, lanes: int = 1) -> DtypeLayout:
    return DtypeLayout(dtype, kind, np.dtype(lane), lanes)


_LAYOUTS: dict[torch.dtype, DtypeLayout] = {
    layout.dtype: layout
    for layout in (
        _layout(torch.bool, "bool", np.uint8),
        _layout(torch.uint8, "int", np.uint8),
        _layout(torch.int8, "int", np.int8),
        _layout(torch.int16, "int", np.int16),
        _layout(torch.int32, "int", np.int32),
        _layout(torch.int64, "int", np.int64),
        _layout(torch.float16, "reduced", np.uint16),
        _layout(torch.bfloat16, "reduced", np.uint16),
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
