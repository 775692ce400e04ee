"""Hypothesis strategies for (sizes, strides) layouts, shared by every layer's tests.

Import them as ``from tests.layout.strategies import layouts, views`` (``tests`` is a
package). All sizes are small (at most 6 per dim) so a CPU tensor backing any layout drawn
here stays a few thousand elements.

- ``layouts(max_dims=5)``: ``(sizes, strides)`` tuples;
- ``views(max_dims=5)``: ``(sizes, strides, storage_offset)`` tuples;
- ``dense_strides(sizes)``: strides that make ``sizes`` non-overlapping and dense.

What gets drawn: ranks 0..max_dims; size-0 and size-1 dims; contiguous, channels_last
(rank 4) and channels_last_3d (rank 5) bases, with the ambiguous shapes (C == 1, or all
spatial dims 1) drawn often; arbitrary dim permutations (transposes) of those; slices with
starts, stops and steps (storage offsets, gaps); expanded dims (stride 0); size-1 dims whose
stride was scrambled (as views leave them); and fully random strides (overlaps included).
"""

from __future__ import annotations

import math

from hypothesis import strategies as st

# Sizes drawn for one dim; 1 is listed twice so size-1 dims are common.
_POSITIVE_SIZE = st.sampled_from((1, 1, 2, 3, 4, 5))


def _one_in(draw: st.DrawFn, n: int) -> bool:
    """True about once in ``n`` draws (sampled_from leans to its first entry, which is False)."""
    return draw(st.sampled_from((False,) * (n - 1) + (True,)))


def _packed_strides(sizes: tuple[int, ...], order: tuple[int, ...]) -> tuple[int, ...]:
    """Packed strides with the dims of ``order`` fastest first (size 0 counted as 1)."""
    strides = [0] * len(sizes)
    stride = 1
    for d in order:
        strides[d] = stride
        stride *= max(sizes[d], 1)
    return tuple(strides)


def _contiguous_order(ndim: int) -> tuple[int, ...]:
    return tuple(range(ndim - 1, -1, -1))


def _channels_last_order(ndim: int) -> tuple[int, ...]:
    """C first, then the spatial dims from the last, then N (rank 4 or 5)."""
    return (1, *range(ndim - 1, 1, -1), 0)


@st.composite
def sizes_of_rank(draw: st.DrawFn, ndim: int, positive: bool = False) -> tuple[int, ...]:
    """Sizes of rank ``ndim``; for ranks 4 and 5 often an ambiguous NCHW shape.

    Unless ``positive``, about one draw in six has a size-0 dim.
    """
    sizes = list(draw(st.lists(_POSITIVE_SIZE, min_size=ndim, max_size=ndim)))
    if ndim in (4, 5):
        shape = draw(st.sampled_from(("free", "free", "channels_1", "spatial_1")))
        if shape == "channels_1":
            sizes[1] = 1
        elif shape == "spatial_1":
            sizes[2:] = [1] * (ndim - 2)
    if ndim and not positive and _one_in(draw, 6):
        sizes[draw(st.integers(0, ndim - 1))] = 0
    return tuple(sizes)


@st.composite
def dense_strides(draw: st.DrawFn, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """Non-overlapping dense strides for ``sizes``: contiguous, channels_last(_3d) or permuted."""
    ndim = len(sizes)
    kinds = ["contiguous", "permuted"]
    if ndim in (4, 5):
        kinds += ["channels_last", "channels_last"]
    kind = draw(st.sampled_from(kinds))
    if kind == "contiguous":
        order = _contiguous_order(ndim)
    elif kind == "channels_last":
        order = _channels_last_order(ndim)
    else:
        order = tuple(draw(st.permutations(range(ndim))))
    return _packed_strides(sizes, order)


@st.composite
def _sliced(draw: st.DrawFn, ndim: int) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """Slice ``base[start:stop:step]`` along every dim of a dense base.

    About one draw in six has an empty slice (stop == start) in one dim.
    """
    base_sizes = draw(sizes_of_rank(ndim, positive=True).map(lambda s: tuple(x + 1 for x in s)))
    base_strides = draw(dense_strides(base_sizes))
    emptied = draw(st.integers(0, ndim - 1)) if ndim and _one_in(draw, 6) else -1
    sizes, strides, offset = [], [], 0
    for d, (base_size, base_stride) in enumerate(zip(base_sizes, base_strides, strict=True)):
        start = draw(st.integers(0, base_size - 1))
        stop = start if d == emptied else draw(st.integers(start + 1, base_size))
        step = draw(st.integers(1, 3))
        sizes.append(len(range(start, stop, step)))
        strides.append(base_stride * step)
        offset += start * base_stride
    return tuple(sizes), tuple(strides), offset


@st.composite
def views(
    draw: st.DrawFn, max_dims: int = 5, min_dims: int = 0
) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """``(sizes, strides, storage_offset)`` of a view a torch program could make."""
    ndim = draw(st.integers(min_dims, max_dims))
    kind = draw(st.sampled_from(("dense", "dense", "sliced", "sliced", "random")))
    if kind == "dense":
        sizes = draw(sizes_of_rank(ndim))
        strides = draw(dense_strides(sizes))
        offset = draw(st.integers(0, 3))
    elif kind == "sliced":
        sizes, strides, offset = draw(_sliced(ndim))
    else:
        sizes = draw(sizes_of_rank(ndim))
        strides = tuple(draw(st.lists(st.integers(0, 40), min_size=ndim, max_size=ndim)))
        offset = draw(st.integers(0, 3))

    if ndim and _one_in(draw, 3):  # transpose / permute the view
        perm = draw(st.permutations(range(ndim)))
        sizes = tuple(sizes[d] for d in perm)
        strides = tuple(strides[d] for d in perm)
    if ndim and _one_in(draw, 4):  # expand: size-1 dims grow, stride becomes 0
        expanded = draw(st.sets(st.integers(0, ndim - 1), min_size=1))
        sizes = tuple(
            draw(st.integers(1, 4)) if d in expanded and s == 1 else s for d, s in enumerate(sizes)
        )
        strides = tuple(0 if d in expanded else st_ for d, st_ in enumerate(strides))
    if _one_in(draw, 4):  # views leave all sorts of strides on size-1 dims
        strides = tuple(
            draw(st.integers(0, 60)) if s == 1 else st_
            for s, st_ in zip(sizes, strides, strict=True)
        )
    return sizes, strides, offset


def layouts(max_dims: int = 5, min_dims: int = 0) -> st.SearchStrategy:
    """``(sizes, strides)`` pairs; see the module docstring for what is drawn."""
    return views(max_dims, min_dims).map(lambda v: (v[0], v[1]))


def storage_elements(sizes: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> int:
    """Elements a buffer needs to back the view (independent of the code under test)."""
    if math.prod(sizes) == 0:
        return offset
    return offset + 1 + sum(st_ * (s - 1) for s, st_ in zip(sizes, strides, strict=True))
