"""preserve_format: the strides empty_like / clone give, and at::infer_dense_strides."""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given

from torch_mydev_rules import layout

from .strategies import layouts
from .truth import strided

DESIGN_FACTS = [
    # design guide: a [2,3,4] view with strides (24,1,6) clones to (12,1,3)
    ((2, 3, 4), (24, 1, 6), (12, 1, 3)),
    # design guide: [1,2,2,2] (24,1,5,1) clones to (8,2,4,1), not to channels_last
    ((1, 2, 2, 2), (24, 1, 5, 1), (8, 2, 4, 1)),
    # dense inputs keep their strides, size-1 strides included
    ((3, 4), (1, 3), (1, 3)),
    ((2, 1, 4, 4), (16, 99, 4, 1), (16, 99, 4, 1)),
    # stride-0 dims do not move: perm (4, 3, 0, 1, 2), the example in ATen's comment
    ((6, 5, 4, 3, 2), (6, 0, 120, 0, 1), (6, 36, 180, 2, 1)),
    # equal strides: the smaller size goes first (ATen's comment: (3,2,2,3)/(4,3,3,4))
    ((3, 2, 2, 3), (4, 3, 3, 4), (12, 2, 1, 4)),
]


@pytest.mark.parametrize(("sizes", "strides", "expected"), DESIGN_FACTS)
def test_design_facts(sizes, strides, expected):
    """Truth: ``t.clone().stride()`` for ``t`` an ``as_strided`` view, and the expected value."""
    assert strided(sizes, strides).clone().stride() == expected
    assert layout.preserve_format_strides(sizes, strides) == expected


@given(layouts())
@example(((2, 3, 4), (24, 1, 6)))
@example(((2, 2, 3), (0, 0, 1)))
@example(((3, 3, 2), (1, 0, 1)))
@example(((2, 3, 2), (3, 0, 3)))
def test_preserve_format_matches_empty_like_and_clone(sizes_strides):
    """Truth: ``torch.empty_like(t).stride()`` and ``t.clone().stride()``
    (preserve_format is their default) for ``t`` an ``as_strided`` CPU view."""
    sizes, strides = sizes_strides
    t = strided(sizes, strides)
    ours = layout.preserve_format_strides(sizes, strides)
    assert ours == torch.empty_like(t).stride()
    assert ours == t.clone().stride()


@given(layouts())
def test_infer_dense_strides_is_dense_and_matches_empty_like(sizes_strides):
    """Truth: for layouts that are not non-overlapping-and-dense, ``empty_like`` calls
    ``at::infer_dense_strides`` itself, so ``torch.empty_like(t).stride()`` is its answer.
    For every layout the answer must itself be non-overlapping and dense (checked with
    ``torch.ops.aten.is_non_overlapping_and_dense``)."""
    sizes, strides = sizes_strides
    ours = layout.infer_dense_strides(sizes, strides)
    assert torch.ops.aten.is_non_overlapping_and_dense(strided(sizes, ours))
    t = strided(sizes, strides)
    if not torch.ops.aten.is_non_overlapping_and_dense(t):
        assert ours == torch.empty_like(t).stride()
