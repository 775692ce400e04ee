"""Type promotion against torch: every dtype pair, every operand-class mix.

Truth: ``torch.promote_types``, ``torch.can_cast`` and ``torch.result_type``.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from tests.support.dtypes import EVERY_DTYPE
from torch_mydev_rules.iterator.promotion import (
    OperandDtype,
    can_cast,
    dtype_name,
    promote_types,
    result_type,
)

LATTICE = (
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
    torch.complex32,
    torch.complex64,
    torch.complex128,
    # torch 2.14's complex of bfloat16 parts: every rule over it is torch's own too.
    *((torch.bcomplex32,) if hasattr(torch, "bcomplex32") else ()),
)


def _torch_promote(a, b):
    try:
        return torch.promote_types(a, b)
    except RuntimeError:
        return RuntimeError


def _ours_promote(a, b):
    try:
        return promote_types(a, b)
    except RuntimeError:
        return RuntimeError


def test_promote_types_every_pair_matches_torch():
    """Truth: torch.promote_types over every pair of torch dtypes (errors included)."""
    mismatches = [
        (a, b, _ours_promote(a, b), _torch_promote(a, b))
        for a, b in itertools.product(EVERY_DTYPE, EVERY_DTYPE)
        if _ours_promote(a, b) != _torch_promote(a, b)
    ]
    assert mismatches == []


def test_can_cast_matches_torch():
    """Truth: torch.can_cast over the promotion lattice."""
    for a, b in itertools.product(LATTICE, LATTICE):
        assert can_cast(a, b) == torch.can_cast(a, b), (a, b)


# An operand of result_type: a dtype in one of three classes.
CLASSES = ("dim", "zero", "number")
NUMBER_DTYPES = {
    bool: torch.bool,
    int: torch.int64,
    float: torch.float64,
    complex: torch.complex128,
}
NUMBER_VALUES = {torch.bool: True, torch.int64: 2, torch.float64: 2.5, torch.complex128: 1 + 1j}


def _cases():
    for cls in CLASSES:
        dtypes = NUMBER_VALUES if cls == "number" else LATTICE
        for dtype in dtypes:
            yield cls, dtype


def _torch_operand(cls, dtype):
    if cls == "number":
        return NUMBER_VALUES[dtype]
    shape = (2,) if cls == "dim" else ()
    return torch.zeros(shape, dtype=dtype)


def _our_operand(cls, dtype):
    return OperandDtype(dtype, 1 if cls == "dim" else 0, cls == "number")


def test_result_type_of_every_pair_matches_torch():
    """Truth: torch.result_type for each (class, dtype) pair -- tensors, 0-dim, numbers."""
    checked = 0
    for (cls_a, a), (cls_b, b) in itertools.product(_cases(), _cases()):
        if cls_a == cls_b == "number":
            continue  # torch.result_type needs at least one tensor
        try:
            expected = torch.result_type(_torch_operand(cls_a, a), _torch_operand(cls_b, b))
        except RuntimeError:
            with pytest.raises(RuntimeError):
                result_type([_our_operand(cls_a, a), _our_operand(cls_b, b)])
            continue
        got = result_type([_our_operand(cls_a, a), _our_operand(cls_b, b)])
        assert got == expected, (cls_a, a, cls_b, b)
        checked += 1
    assert checked > 800


def test_result_type_follows_the_default_dtype():
    """Truth: torch.result_type under torch.set_default_dtype(float64)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        for value in (2.5, 1 + 1j):
            for dtype in (torch.int32, torch.bool, torch.float16):
                expected = torch.result_type(torch.zeros(2, dtype=dtype), value)
                number = OperandDtype(NUMBER_DTYPES[type(value)], 0, True)
                got = result_type([OperandDtype(dtype, 1), number], default_dtype=torch.float64)
                assert got == expected
    finally:
        torch.set_default_dtype(previous)


def test_three_classes_at_once():
    """A dim tensor outranks a 0-dim one of the same category; a higher category wins."""
    ops = [
        OperandDtype(torch.int8, 1),
        OperandDtype(torch.int64, 0),
        OperandDtype(torch.float64, 0, True),
    ]
    # The number is float, a higher category than int8: the default float dtype.
    assert result_type(ops) == torch.float32
    expected = torch.result_type(
        torch.zeros(2, dtype=torch.int8), torch.tensor(1, dtype=torch.int64)
    )
    assert result_type(ops[:2]) == expected == torch.int8
    assert result_type([]) is None


def test_dtype_names_follow_c10():
    assert dtype_name(torch.float32) == "Float"
    assert dtype_name(torch.int64) == "Long"
    assert dtype_name(None) == "Undefined"
