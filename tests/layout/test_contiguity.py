"""Contiguity and density flags against the flags CPU torch caches for the same layout."""

from __future__ import annotations

import pytest
import torch
from hypothesis import example, given

from torch_mydev_rules import layout
from torch_mydev_rules.layout import MemoryFormat

from .strategies import layouts
from .truth import strided

# (sizes, strides, contiguous, channels_last contiguous, non-overlapping-and-dense)
DESIGN_FACTS = [
    # design guide: dense but not contiguous
    ((3, 4), (1, 3), False, False, True),
    # design guide: neither
    ((4, 2, 3), (8, 3, 1), False, False, False),
    # design guide: both contiguous and channels_last contiguous
    ((2, 1, 4, 4), (16, 16, 4, 1), True, True, True),
    ((2, 1, 4, 4), (16, 1, 4, 1), True, True, True),
    # empty tensors are contiguous whatever their strides; channels_last has no such shortcut
    ((2, 0, 3, 4), (0, 1, 0, 0), True, True, True),
    ((0, 3, 4, 5), (60, 20, 5, 1), True, False, True),
    ((0, 3), (5, 7), True, False, True),
    # 1-D: dense iff size < 2 or stride 1
    ((5,), (2,), False, False, False),
    ((1,), (7,), True, False, True),
    # 0-d
    ((), (), True, False, True),
    # channels_last proper
    ((2, 3, 4, 5), (60, 1, 15, 3), False, True, True),
]


@pytest.mark.parametrize(("sizes", "strides", "contig", "cl_contig", "dense"), DESIGN_FACTS)
def test_design_facts(sizes, strides, contig, cl_contig, dense):
    """Truth: the expected values (from the design guide), also checked on torch."""
    t = strided(sizes, strides)
    assert (t.is_contiguous(), t.is_contiguous(memory_format=torch.channels_last)) == (
        contig,
        cl_contig,
    )
    assert torch.ops.aten.is_non_overlapping_and_dense(t) == dense
    assert layout.is_contiguous(sizes, strides) == contig
    assert layout.is_channels_last_contiguous(sizes, strides) == cl_contig
    assert layout.is_non_overlapping_and_dense(sizes, strides) == dense


@given(layouts())
@example(((2, 3, 1, 1), (3, 1, 3, 3)))
@example(((1, 1, 1, 1, 1), (5, 4, 3, 2, 1)))
@example(((2, 3, 2, 2, 2), (24, 1, 12, 6, 3)))
@example(((3, 4, 1), (1, 3, 100)))  # dense: the size-1 dim's stride does not count
def test_flags_match_torch(sizes_strides):
    """Truth: ``t.is_contiguous(memory_format=...)`` for contiguous, channels_last,
    channels_last_3d and preserve_format, and ``torch.ops.aten.is_non_overlapping_and_dense(t)``,
    on ``t`` an ``as_strided`` CPU view with these sizes/strides."""
    sizes, strides = sizes_strides
    t = strided(sizes, strides)
    assert layout.is_contiguous(sizes, strides) == t.is_contiguous()
    assert layout.is_channels_last_contiguous(sizes, strides) == t.is_contiguous(
        memory_format=torch.channels_last
    )
    assert layout.is_channels_last_3d_contiguous(sizes, strides) == t.is_contiguous(
        memory_format=torch.channels_last_3d
    )
    assert layout.is_non_overlapping_and_dense(
        sizes, strides
    ) == torch.ops.aten.is_non_overlapping_and_dense(t)
    for fmt in MemoryFormat:
        assert layout.is_contiguous_for(sizes, strides, fmt) == t.is_contiguous(
            memory_format=fmt.to_torch()
        ), fmt


@given(layouts())
def test_empty_strided_gives_the_same_flags(sizes_strides):
    """Truth: the same flags on ``torch.empty_strided(sizes, strides)`` (a fresh TensorImpl,
    not a view): refresh_contiguous runs the same way for both."""
    sizes, strides = sizes_strides
    t = torch.empty_strided(sizes, strides)
    assert layout.is_contiguous(sizes, strides) == t.is_contiguous()
    assert layout.is_channels_last_contiguous(sizes, strides) == t.is_contiguous(
        memory_format=torch.channels_last
    )
    assert layout.is_non_overlapping_and_dense(
        sizes, strides
    ) == torch.ops.aten.is_non_overlapping_and_dense(t)


def test_numel():
    """Truth: ``torch.empty(sizes).numel()``."""
    for sizes in [(), (0,), (2, 3), (2, 0, 4), (1, 1, 1, 7)]:
        assert layout.numel(sizes) == torch.empty(sizes).numel()


def test_mismatched_ranks_are_refused():
    """No torch truth (a tensor cannot have this): a ValueError rather than a wrong answer."""
    with pytest.raises(ValueError, match="different lengths"):
        layout.is_contiguous((2, 3), (1,))
