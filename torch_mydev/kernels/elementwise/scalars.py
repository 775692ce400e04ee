"""Python numbers (and a tensor's first element) as the bytes of a dtype, the constants an
elementwise loop reads (``alpha``, a number operand): ``c10::convert``'s conversions."""

from __future__ import annotations

import functools
import struct

import numpy as np
import torch

from torch_mydev.kernels.dtypes import layout_of
from torch_mydev.kernels.operand import Operand
from torch_mydev_rules.iterator.numbers import number_dtype, number_key

# Dtypes whose lane value is already the compute value (integers widen to int64, float16 and
# bfloat16 bits widen to float32).
_OWN_COMPUTE = (torch.float32, torch.float64, torch.complex64, torch.complex128)


def scalar_bytes(value: bool | int | float | complex, dtype: torch.dtype) -> np.ndarray:
    """The bytes of ``value`` converted to ``dtype`` as ``c10::convert`` does (no range check).

    The number starts as the dtype a wrapped Python number has (bool, int64, float64 or
    complex128) and goes through the copy kernel, so integers wrap, floats truncate toward
    zero into integers, and float64 reaches float16/bfloat16 through float32, as torch does.
    """
    return np.frombuffer(_cached_scalar_bytes(number_key(value), dtype), dtype=np.uint8).copy()


def read_scalar(source: Operand, dtype: torch.dtype) -> np.ndarray:
    """The bytes of element ``[0, ..., 0]`` of ``source`` converted to ``dtype``."""
    return _convert(source.data, source.offset, source.dtype, dtype)


@functools.lru_cache(maxsize=4096)
def _cached_scalar_bytes(key: tuple, dtype: torch.dtype) -> bytes:
    """``scalar_bytes`` by ``numbers.number_key``: the number itself, or its IEEE bytes."""
    kind, raw = key
    if kind is float and isinstance(raw, bytes):
        value = struct.unpack("<d", raw)[0]
    elif kind is complex and isinstance(raw, bytes):
        value = complex(*struct.unpack("<dd", raw))
    else:
        value = raw
    source, source_dtype = _number_array(value)
    if (source_dtype, dtype) in _IEEE_NARROWING:
        # one IEEE round-to-nearest conversion (what the copy kernel's loop and c10's
        # static_cast do), without setting up a copy: a new learning rate or bias correction
        # every step reaches here
        with np.errstate(all="ignore"):  # overflow to infinity, NaN kept: as in C
            return source.astype(layout_of(dtype).element).tobytes()
    return _convert(source.view(np.uint8), 0, source_dtype, dtype).tobytes()


# Conversions of a wrapped number's dtype that numpy's cast makes bit for bit as c10 does.
_IEEE_NARROWING = frozenset(
    {
        (torch.float64, torch.float64),
        (torch.float64, torch.float32),
        (torch.complex128, torch.complex128),
        (torch.complex128, torch.complex64),
    }
)


def _number_array(value: bool | int | float | complex) -> tuple[np.ndarray, torch.dtype]:
    """``value`` as one element of its wrapped-number dtype (``numbers.number_dtype``)."""
    dtype = number_dtype(value)
    if dtype == torch.int64 and value >= 2**63:
        # a uint64 Scalar: through float64 (c10 converts it directly)
        return np.array([float(value)], dtype=np.float64), torch.float64
    return np.array([value], dtype=layout_of(dtype).element), dtype


def _convert(data: np.ndarray, offset: int, src: torch.dtype, dst: torch.dtype) -> np.ndarray:
    from torch_mydev.kernels.copy.kernel import copy_strided

    out = np.zeros(dst.itemsize, dtype=np.uint8)
    copy_strided(Operand(out, 0, dst, ()), Operand(data, offset, src, ()), ())
    return out


def compute_scalar(value: bool | int | float | complex, dtype: torch.dtype):
    """``value`` as the loops' compute value for ``dtype`` (``Scalar::to<scalar_t>()``)."""
    raw = scalar_bytes(value, dtype)
    lane = layout_of(dtype).element
    if dtype in (torch.float16, torch.bfloat16):  # widened exactly, by the copy kernel's conversion
        return _convert(raw, 0, dtype, torch.float32).view(np.float32)[0]
    if dtype in _OWN_COMPUTE:
        return raw.view(lane)[0]
    return np.int64(raw.view(lane)[0])
