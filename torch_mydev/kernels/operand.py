"""Decides how one operand of a planned kernel call is passed: bytes, offset, dtype, strides.

Every kernel (copy, cast, elementwise) takes its operands as ``Operand``: a 1-D ``uint8`` numpy
array over the operand's whole storage, the byte offset of element ``[0, ..., 0]``, the
dtype, and byte strides over the plan's fastest-first shape (0 on broadcast dims).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

__all__ = ["Operand"]


class Operand(NamedTuple):
    """One operand of a planned iteration, as bytes (see the module docstring)."""

    data: np.ndarray
    offset: int
    dtype: torch.dtype
    strides: tuple[int, ...]
