"""A Python number's bytes in a tensor's dtype (``kernels.elementwise.scalars.scalar_bytes``).

Truth: torch CPU's conversion of the same number, wrapped as torch wraps it (float64 or
complex128), then ``.to(dtype)``: the bits, NaN payloads, signed zeros, overflow to
infinity and subnormals included. A float number into float32/float64 (and a complex one
into complex64/complex128) takes numpy's cast, every other pair the copy kernel's
conversion; both must give torch's bits.
"""

from __future__ import annotations

import math
import struct

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from torch_mydev.kernels.elementwise import kernel as K

_FLOAT_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16)
_EDGES = [
    0.0,
    -0.0,
    1 / 3,
    16777217.0,  # a tie between two float32 values
    3.4028235677973366e38,  # rounds up to float32's infinity
    1e39,
    -1e39,
    7e-46,  # below half float32's smallest subnormal: zero
    1e-40,  # a float32 subnormal
    math.inf,
    -math.inf,
    math.nan,
    struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000001))[0],  # -NaN with a payload
    struct.unpack("<d", struct.pack("<Q", 0x7FF0000020000000))[0],  # a signalling NaN
]


def _torch_bytes(value: float | complex, dtype: torch.dtype) -> bytes:
    wrapped = torch.complex128 if isinstance(value, complex) else torch.float64
    return torch.tensor([value], dtype=wrapped).to(dtype).view(torch.uint8).numpy().tobytes()


@pytest.mark.parametrize("dtype", _FLOAT_DTYPES)
@pytest.mark.parametrize("value", _EDGES)
def test_edges_equal_torch(value: float, dtype: torch.dtype) -> None:
    assert K.scalar_bytes(value, dtype).tobytes() == _torch_bytes(value, dtype)
    assert K.scalar_bytes(complex(value, -value), dtype.to_complex()).tobytes() == _torch_bytes(
        complex(value, -value), dtype.to_complex()
    )


@given(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(_FLOAT_DTYPES))
def test_any_float_equals_torch(value: float, dtype: torch.dtype) -> None:
    assert K.scalar_bytes(value, dtype).tobytes() == _torch_bytes(value, dtype)


@given(st.complex_numbers(allow_nan=True), st.sampled_from([torch.complex64, torch.complex128]))
def test_any_complex_equals_torch(value: complex, dtype: torch.dtype) -> None:
    assert K.scalar_bytes(value, dtype).tobytes() == _torch_bytes(value, dtype)
