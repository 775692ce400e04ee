"""The reduction rules (torch_mydev_rules.iterator.reduction) against torch CPU and ATen.

Truth: ``torch.sum`` / ``torch.mean`` / ``torch.amax`` on CPU tensors of the same sizes (their
result's shape and dtype, or their exception type), and worked examples of ATen's
``reorder_dimensions`` with ``is_reduction`` (reduced dims first) and ``coalesce_dimensions``.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.layout.strategies import sizes_of_rank
from tests.support.raises import outcome
from torch_mydev_rules.iterator.reduction import (
    amax_checks,
    build_reduction,
    dim_mask,
    mean_dtype,
    reduction_shape,
    sum_dtype,
    uses_acc_buffer,
    viewed_strides,
)

DIMS = st.one_of(
    st.none(),
    st.integers(-5, 5),
    st.lists(st.integers(-5, 5), max_size=4),
)
DTYPES = (torch.bool, torch.uint8, torch.int32, torch.int64, torch.float16, torch.float32)


@given(
    sizes=st.integers(0, 4).flatmap(sizes_of_rank),
    dims=DIMS,
    keepdim=st.booleans(),
    dtype=st.sampled_from(DTYPES),
    cast=st.sampled_from((None, torch.float64, torch.int64)),
)
def test_shape_dtype_and_errors_match_torch(sizes, dims, keepdim, dtype, cast) -> None:
    """``dim_mask`` + ``reduction_shape`` + the dtype rules give CPU's result shape and
    dtype, or its exception type, for sum, mean and amax."""
    x = torch.zeros(sizes, dtype=dtype)
    for op in ("sum", "mean", "amax"):
        if op == "amax":
            expected, error = outcome(lambda: torch.amax(x, () if dims is None else dims, keepdim))
        else:
            expected, error = outcome(
                lambda op=op: getattr(torch, op)(x, dims, keepdim, dtype=cast)
            )

        def rule(op=op):
            if op == "amax":
                amax_checks("amax", sizes, dims)
                result_dtype = dtype
            elif op == "sum":
                result_dtype = sum_dtype(dtype, cast, None)
            else:
                result_dtype = mean_dtype(dtype, cast, None)
            mask = dim_mask(() if op == "amax" and dims is None else dims, len(sizes))
            return reduction_shape(sizes, mask, keepdim), result_dtype

        got, rule_error = outcome(rule)
        assert rule_error == error, (op, error, rule_error)
        if error is None:
            assert got == (tuple(expected.shape), expected.dtype)


def test_reduced_dims_walk_first_and_coalesce() -> None:
    """``sum(0)`` of a contiguous [4, 5] float32: reduced dim 0 first, nothing merges;
    ``sum((2, 3))`` of channels_last [2, 3, 4, 5]: H and W merge into one reduced dim of 20,
    then N and C (output strides 3, 1 elements) follow in output order."""
    plan = build_reduction((4, 5), (5, 1), 4, (1, 5), viewed_strides((1,), (True, False), False), 4)
    assert plan.perm == (0, 1)
    assert plan.shape == (4, 5)
    assert plan.stride_bytes == ((0, 4), (20, 4))
    assert plan.reduced == (True, False)

    mask = (False, False, True, True)
    out_strides = viewed_strides((3, 1), mask, False)
    assert out_strides == (3, 1, 0, 0)
    plan = build_reduction((2, 3, 4, 5), (60, 1, 15, 3), 4, (2, 3, 1, 1), out_strides, 4)
    assert plan.shape == (20, 3, 2)
    assert plan.stride_bytes == ((0, 4, 12), (12, 4, 240))
    assert not uses_acc_buffer(plan, torch.float16)


def test_acc_buffer_when_two_reduced_dims_lead() -> None:
    """``should_use_acc_buffer``: float16 full sum of a sliced [1000, 4] (strides 7, 2)
    walks two reduced dims (no merge) -> a float32 buffer; float32 never."""
    plan = build_reduction((1000, 4), (7, 2), 2, (1, 1), (0, 0), 2)
    assert len(plan.shape) == 2 and plan.stride_bytes[0] == (0, 0)
    assert uses_acc_buffer(plan, torch.float16) and uses_acc_buffer(plan, torch.bfloat16)
    assert not uses_acc_buffer(plan, torch.float32)


@pytest.mark.parametrize(
    "dims, message",
    [([0, 0], "dim 0 appears multiple times"), ([2], "Dimension out of range")],
)
def test_messages(dims, message) -> None:
    x = torch.zeros(2, 3)
    with pytest.raises(Exception, match=message):
        dim_mask(dims, 2)
    with pytest.raises(Exception, match=message):
        x.sum(dims)
