"""at::detail::computeStorageNbytes: bytes a layout needs, and the errors on the way."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from torch_mydev_rules import layout

from .strategies import views
from .truth import outcome

DTYPES = [torch.uint8, torch.int16, torch.float32, torch.float64]


@given(views(), st.sampled_from(DTYPES))
def test_nbytes_matches_empty_strided(view, dtype):
    """Truth: ``torch.empty_strided(sizes, strides, dtype=...).untyped_storage().nbytes()``."""
    sizes, strides, _ = view
    itemsize = dtype.itemsize
    expected = torch.empty_strided(sizes, strides, dtype=dtype).untyped_storage().nbytes()
    assert layout.compute_storage_nbytes(sizes, strides, itemsize) == expected


@given(views(), st.sampled_from(DTYPES))
def test_nbytes_with_offset_is_what_as_strided_needs(view, dtype):
    """Truth: ``as_strided(sizes, strides, offset)`` accepts a storage of exactly the
    computed byte count and (for a non-empty layout) refuses one element less."""
    sizes, strides, offset = view
    itemsize = dtype.itemsize
    nbytes = layout.compute_storage_nbytes(sizes, strides, itemsize, offset)
    assert nbytes % itemsize == 0
    torch.empty(nbytes // itemsize, dtype=dtype).as_strided(sizes, strides, offset)
    if nbytes:
        short = torch.empty(nbytes // itemsize - 1, dtype=dtype)
        with pytest.raises(RuntimeError, match="out of bounds for storage"):
            short.as_strided(sizes, strides, offset)
    else:
        assert 0 in sizes


@pytest.mark.parametrize(
    ("sizes", "strides", "dtype"),
    [
        ((2, -1), (1, 1), torch.float32),  # negative size
        ((-3,), (1,), torch.float32),
        ((2, 3), (1,), torch.float32),  # sizes and strides of different ranks
        ((2**62,), (4,), torch.float32),  # multiplication overflows
        ((2**62, 2), (1, 1), torch.float64),  # itemsize multiplication overflows
        ((3,), (-1,), torch.float32),  # negative strides wrap to huge uint64 values
        ((2,), (2**63 - 1,), torch.uint8),  # 2**63 bytes: just past int64's maximum
        ((2,), (-1,), torch.uint8),  # wraps back to a small sum, still an overflow
        ((2, -1), (1,), torch.float32),  # negative size is checked before the ranks
    ],
)
def test_errors_match_empty_strided(sizes, strides, dtype):
    """Truth: the exception type and message of ``torch.empty_strided(sizes, strides)``."""
    ours = outcome(lambda: layout.compute_storage_nbytes(sizes, strides, dtype.itemsize))
    theirs = outcome(lambda: torch.empty_strided(sizes, strides, dtype=dtype))
    assert ours == theirs
    assert ours[0] == "RuntimeError"


def test_negative_stride_on_size_one_dim_is_harmless():
    """Truth: ``torch.empty_strided((1, 3), (-5, 1)).untyped_storage().nbytes()``."""
    expected = torch.empty_strided((1, 3), (-5, 1)).untyped_storage().nbytes()
    assert layout.compute_storage_nbytes((1, 3), (-5, 1), 4) == expected == 12


def test_largest_storage_is_not_an_overflow():
    """Truth: ``torch.empty_strided((2,), (2**63 - 2,), dtype=torch.uint8)`` passes the size
    check (2**63 - 1 bytes) and fails only in the allocator."""
    assert layout.compute_storage_nbytes((2,), (2**63 - 2,), 1) == 2**63 - 1
    kind, message = outcome(lambda: torch.empty_strided((2,), (2**63 - 2,), dtype=torch.uint8))
    assert kind == "RuntimeError"
    assert "overflowed" not in message
    assert "allocate" in message


def test_negative_storage_offset():
    """Truth: the message of ``torch.empty(10).as_strided((2,), (1,), -1)``."""
    ours = outcome(lambda: layout.compute_storage_nbytes((2,), (1,), 4, -1))
    theirs = outcome(lambda: torch.empty(10).as_strided((2,), (1,), -1))
    assert ours == theirs


def test_empty_layout_needs_no_bytes():
    """Truth: ``torch.empty_strided((3, 0), (5, 7)).untyped_storage().nbytes()`` is 0."""
    assert layout.compute_storage_nbytes((3, 0), (5, 7), 4, 9) == 0
    assert torch.empty_strided((3, 0), (5, 7)).untyped_storage().nbytes() == 0
