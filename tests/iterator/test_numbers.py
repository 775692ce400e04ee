"""A Python number as an operand: its dtype (``c10::Scalar::type()``: Bool, Long, Double,
ComplexDouble) and its cache key (equal exactly for equal type and value bits)."""

import math
import struct

import numpy as np
import pytest
import torch

from torch_mydev_rules.iterator.numbers import number_dtype, number_key


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, torch.bool),
        (3, torch.int64),
        (2.5, torch.float64),
        (1 + 2j, torch.complex128),
        (np.float64(2.0), torch.float64),
    ],
)
def test_number_dtype_is_the_wrapped_number_dtype(value, expected):
    assert number_dtype(value) == expected
    # as the one operand of a promotion, a number keeps its category (floats: the default)
    category = torch.result_type(torch.tensor(value), torch.tensor(value))
    assert category.is_floating_point == expected.is_floating_point
    assert category.is_complex == expected.is_complex


def test_number_dtype_refuses_other_objects():
    with pytest.raises(TypeError, match="Python number"):
        number_dtype("1")


def _bits(value):
    if isinstance(value, complex):
        return struct.pack("<dd", value.real, value.imag)
    if isinstance(value, float):
        return struct.pack("<d", value)
    return value


@pytest.mark.parametrize(
    "values",
    [
        (1, 1.0, True, 1 + 0j),
        (0.0, -0.0, 0, False),
        (math.nan, -math.nan, math.inf),
        (complex(0.0, 1.0), complex(-0.0, 1.0), complex(math.nan, 1.0)),
    ],
)
def test_keys_equal_exactly_for_equal_type_and_bits(values):
    for a in values:
        assert number_key(a) == number_key(a)  # NaN too
        for b in values:
            same = type(a) is type(b) and _bits(a) == _bits(b)
            assert (number_key(a) == number_key(b)) == same, (a, b)
