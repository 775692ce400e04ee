"""Hypothesis strategies for the iterator tests: layouts, broadcastable shapes, dtype mixes.

A layout is ``(sizes, strides, storage_offset)`` in elements. ``make_tensor`` turns one into
a real CPU tensor over a zero-filled buffer (``as_strided``), so torch can be asked what it
does with exactly that layout.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from tests.support.dtypes import DEVICE_DTYPES

# dtypes CPU kernels support for add/mul/div/eq (complex32 and the barebones unsigned
# types have almost no CPU kernels).
DTYPES = tuple(d for d in DEVICE_DTYPES if d is not torch.complex128)
MEMORY_FORMATS = (
    None,
    torch.preserve_format,
    torch.contiguous_format,
    torch.channels_last,
    torch.channels_last_3d,
)

Layout = tuple[tuple[int, ...], tuple[int, ...], int]

small_size = st.sampled_from((0, 1, 1, 2, 2, 3, 4))


def shapes(min_dims: int = 0, max_dims: int = 5) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes with sizes 0..4, size 1 and 2 favoured, size 0 rare."""
    return st.lists(small_size, min_size=min_dims, max_size=max_dims).map(tuple)


def _dense_in_order(sizes: tuple[int, ...], order: list[int], steps, pads) -> list[int]:
    """Strides of a slice ``[::step]`` of a dense tensor whose dims run fastest-first in ``order``.

    The base tensor has size ``size * step + pad`` on each dim; sizes of 0 count as 1 so no
    stride collapses to 0.
    """
    strides = [0] * len(sizes)
    running = 1
    for d in order:
        strides[d] = running * steps[d]
        running *= max(sizes[d], 1) * steps[d] + pads[d]
    return strides


@st.composite
def layout_for(draw, sizes: tuple[int, ...], *, allow_overlap: bool = True) -> Layout:
    """A layout for ``sizes``: permuted, sliced, expanded, ambiguous, or arbitrary strides.

    The dimension order is C order, channels_last(_3d) order at rank 4 (5), reversed, or
    random; slices add steps and gaps; ``allow_overlap`` adds stride-0 (expanded) dims and
    fully arbitrary strides. Size-1 dims sometimes get a random stride (they are free, which
    is what makes channels_last N,C,1,1 tensors ambiguous).
    """
    ndim = len(sizes)
    kinds = ["contiguous", "channels_last", "reversed", "random"]
    kind = draw(st.sampled_from(kinds))
    c_order = list(range(ndim - 1, -1, -1))
    if kind == "channels_last" and ndim in (4, 5):
        order = [1, *range(ndim - 1, 1, -1), 0]
    elif kind == "reversed":
        order = list(range(ndim))
    elif kind == "random":
        order = draw(st.permutations(c_order)) if ndim else []
    else:
        order = c_order
    sliced = draw(st.booleans())
    steps = [draw(st.sampled_from((1, 1, 2))) if sliced else 1 for _ in range(ndim)]
    pads = [draw(st.sampled_from((0, 0, 1))) if sliced else 0 for _ in range(ndim)]
    strides = _dense_in_order(sizes, order, steps, pads)
    if allow_overlap and ndim and draw(st.integers(0, 3)) == 0:
        expanded = draw(st.lists(st.integers(0, ndim - 1), max_size=2))
        for d in expanded:
            strides[d] = 0
    for d in range(ndim):
        if sizes[d] == 1 and draw(st.integers(0, 2)) == 0:
            strides[d] = draw(st.integers(0, 40))
    if allow_overlap and ndim and draw(st.integers(0, 7)) == 0:
        strides = draw(st.lists(st.integers(0, 12), min_size=ndim, max_size=ndim))
    offset = draw(st.integers(0, 3))
    return tuple(sizes), tuple(strides), offset


@st.composite
def broadcast_shapes(draw, target: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``target``: a suffix of it, some dims set to 1."""
    keep = draw(st.integers(0, len(target)))
    suffix = target[len(target) - keep :]
    return tuple(1 if draw(st.integers(0, 3)) == 0 else s for s in suffix)


def make_tensor(layout: Layout, dtype: torch.dtype) -> torch.Tensor:
    """A CPU tensor with exactly this layout, over a zero-filled buffer large enough for it."""
    sizes, strides, offset = layout
    extent = 1 + sum((s - 1) * st_ for s, st_ in zip(sizes, strides, strict=True) if s > 0)
    if 0 in sizes:
        extent = 1
    buffer = torch.zeros(offset + extent, dtype=dtype)
    return buffer.as_strided(sizes, strides, offset)


@st.composite
def python_scalars(draw, kinds=(bool, int, float, complex)) -> bool | int | float | complex:
    """A Python number of one of ``kinds``."""
    kind = draw(st.sampled_from(kinds))
    if kind is bool:
        return draw(st.booleans())
    if kind is int:
        return draw(st.integers(-3, 3))
    if kind is float:
        return draw(st.sampled_from((0.5, -1.5, 2.0)))
    return complex(draw(st.sampled_from((0.5, 1.0))), 1.0)
