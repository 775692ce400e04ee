"""Memory formats: conversions, strides for a format, and the format a layout suggests."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, example, given
from hypothesis import strategies as st

from torch_mydev_rules import layout
from torch_mydev_rules.layout import MemoryFormat

from .strategies import layouts, sizes_of_rank
from .truth import outcome, strided


def test_from_torch_and_back():
    """Truth: the ``torch.memory_format`` singletons."""
    pairs = {
        torch.contiguous_format: MemoryFormat.CONTIGUOUS,
        torch.channels_last: MemoryFormat.CHANNELS_LAST,
        torch.channels_last_3d: MemoryFormat.CHANNELS_LAST_3D,
        torch.preserve_format: MemoryFormat.PRESERVE,
    }
    for torch_fmt, ours in pairs.items():
        assert MemoryFormat.from_torch(torch_fmt) is ours
        assert MemoryFormat.from_torch(ours) is ours
        assert ours.to_torch() is torch_fmt
    assert MemoryFormat.from_torch(None) is MemoryFormat.CONTIGUOUS
    with pytest.raises(TypeError):
        MemoryFormat.from_torch("channels_last")


def test_torch_formats_are_accepted():
    """Truth: ``torch.empty(..., memory_format=torch.channels_last)`` and its flags."""
    t = torch.empty(2, 3, 4, 5, memory_format=torch.channels_last)
    sizes, strides = tuple(t.shape), t.stride()
    assert layout.strides_for_memory_format(sizes, torch.channels_last) == strides
    assert layout.is_contiguous_for(sizes, strides, torch.channels_last)
    assert layout.is_strides_like(sizes, strides, torch.channels_last)


@given(st.integers(0, 6).flatmap(sizes_of_rank), st.sampled_from(list(MemoryFormat)))
@example((2, 0, 4, 5), MemoryFormat.CHANNELS_LAST)
@example((2, 3, 0, 4, 5), MemoryFormat.CHANNELS_LAST_3D)
@example((2, 3, 4), MemoryFormat.CHANNELS_LAST)
@example((2, 3, 4, 5), MemoryFormat.CHANNELS_LAST_3D)
@example((2, 3, 4, 5), MemoryFormat.PRESERVE)
@example((2, -1), MemoryFormat.CONTIGUOUS)
@example((2, 3, -1, 5), MemoryFormat.CHANNELS_LAST)
def test_strides_for_memory_format_match_empty(sizes, fmt):
    """Truth: ``torch.empty(sizes, memory_format=...).stride()``, or the exception type and
    message ``torch.empty`` raises (wrong rank, preserve_format, negative size)."""
    ours = outcome(lambda: layout.strides_for_memory_format(sizes, fmt))
    theirs = outcome(lambda: torch.empty(sizes, memory_format=fmt.to_torch()).stride())
    assert ours == theirs


@given(st.integers(0, 6).flatmap(sizes_of_rank))
def test_contiguous_strides_match_empty(sizes):
    """Truth: ``torch.empty(sizes).stride()`` (size-0/1 dims included)."""
    assert layout.contiguous_strides(sizes) == torch.empty(sizes).stride()


def test_contiguous_stride_overflow():
    """Truth: ``torch.empty([1, 2**40, 0, 2**40])`` raises (numel 0, but a stride of 2**80)."""
    sizes = (1, 2**40, 0, 2**40)
    assert outcome(lambda: layout.contiguous_strides(sizes)) == outcome(
        lambda: torch.empty(sizes).stride()
    )
    assert outcome(lambda: layout.contiguous_strides(sizes))[0] == "RuntimeError"


def torch_suggested_format(sizes, strides) -> MemoryFormat:
    """``x.suggest_memory_format()`` as CPU ``nearest`` interpolation reveals it.

    upsample_nearest2d/3d allocate their output with ``input.suggest_memory_format()``.
    Asking for an output one larger in every spatial dim makes the two candidate layouts
    differ: for an output of channels_last(_3d) strides dim 1 has stride 1, for contiguous
    strides it has the spatial numel, which is at least 2. Needs C and spatial sizes > 0.
    """
    x = strided(sizes, strides)
    out = F.interpolate(x, size=tuple(s + 1 for s in sizes[2:]), mode="nearest")
    if out.stride(1) != 1:
        return MemoryFormat.CONTIGUOUS
    return MemoryFormat.CHANNELS_LAST if len(sizes) == 4 else MemoryFormat.CHANNELS_LAST_3D


@given(layouts(max_dims=5, min_dims=4))
@example(((2, 3, 1, 1), (3, 1, 3, 3)))  # ambiguous channels_last from the design guide
@example(((2, 3, 1, 1), (3, 1, 1, 1)))
@example(((2, 1, 1, 1), (1, 1, 1, 1)))  # N111: contiguous
@example(((4, 1, 1, 1), (3, 3, 3, 3)))  # N111 sliced: contiguous
@example(((3, 1, 1, 1), (3, 1, 1, 1)))  # [H,1,1,1] channels_last strides
@example(((1, 3, 1, 4), (12, 1, 3, 3)))  # 1C1W transposed
@example(((2, 1, 4, 4), (16, 16, 4, 1)))
@example(((2, 1, 4, 4), (16, 1, 4, 1)))
@example(((2, 3, 4, 5), (60, 0, 15, 3)))  # stride-0 C
@example(((2, 3, 2, 2, 2), (24, 1, 12, 6, 3)))
@example(((2, 3, 1, 1, 1), (3, 1, 3, 3, 3)))
def test_suggest_memory_format_matches_torch(sizes_strides):
    """Truth: the output layout of ``F.interpolate(x, mode="nearest")`` on CPU, which is
    ``x.suggest_memory_format()``; through it the "strides like" flags
    (``is_channels_last_strides_2d`` for rank 4, ``_3d`` for rank 5), since that is all
    suggest_memory_format reads. Layouts with a zero C or spatial size cannot be
    interpolated; for them the rule (a size-0 dim is never channels_last-like) is checked
    without torch."""
    sizes, strides = sizes_strides
    ours = layout.suggest_memory_format(sizes, strides)
    like_2d = layout.is_channels_last_strides_2d(sizes, strides)
    like_3d = layout.is_channels_last_strides_3d(sizes, strides)
    if 0 in sizes:
        assert (ours, like_2d, like_3d) == (MemoryFormat.CONTIGUOUS, False, False)
        return
    assert ours == torch_suggested_format(sizes, strides)
    assert like_2d == (ours is MemoryFormat.CHANNELS_LAST)
    assert like_3d == (ours is MemoryFormat.CHANNELS_LAST_3D)
    assert like_2d == layout.is_strides_like(sizes, strides, MemoryFormat.CHANNELS_LAST)
    assert like_3d == layout.is_strides_like(sizes, strides, MemoryFormat.CHANNELS_LAST_3D)


@given(layouts(max_dims=5, min_dims=4))
@example(((2, 3, 1, 1), (3, 1, 3, 3)))
@example(((2, 3, 1, 1), (3, 1, 1, 1)))
def test_suggest_memory_format_exact_match(sizes_strides):
    """Truth: no CPU op exposes ``suggest_memory_format(true)``; the rule is checked on
    torch's parts: the format ``F.interpolate`` reveals (as above) and the strides
    ``torch.empty(sizes, memory_format=...)`` gives; exact match keeps a channels_last(_3d)
    answer only when the strides equal those."""
    sizes, strides = sizes_strides
    assume(0 not in sizes)
    loose = torch_suggested_format(sizes, strides)
    expected = loose
    if loose is not MemoryFormat.CONTIGUOUS:
        empty_strides = torch.empty(sizes, memory_format=loose.to_torch()).stride()
        if empty_strides != strides:
            expected = MemoryFormat.CONTIGUOUS
    assert layout.suggest_memory_format(sizes, strides, True) == expected


@given(layouts(max_dims=3))
def test_other_ranks_suggest_contiguous(sizes_strides):
    """Truth: ``torch._prims_common.suggest_memory_format`` (torch's own Python port; no CPU
    op takes these ranks and reports the format): ranks other than 4 and 5 are never
    channels_last-like."""
    from torch._prims_common import suggest_memory_format

    sizes, strides = sizes_strides
    assert suggest_memory_format(strided(sizes, strides)) == torch.contiguous_format
    assert layout.suggest_memory_format(sizes, strides) is MemoryFormat.CONTIGUOUS
    assert not layout.is_channels_last_strides_2d(sizes, strides)
    assert not layout.is_channels_last_strides_3d(sizes, strides)
