"""Hypothesis strategies for copy plans: shapes with 0/1 sizes, permuted padded layouts."""

from __future__ import annotations

from hypothesis import strategies as st

from .truth import DTYPES, Layout

dtypes = st.sampled_from(DTYPES)
sizes = st.lists(st.sampled_from([0, 1, 1, 2, 3, 4, 5, 7]), min_size=0, max_size=4).map(tuple)


@st.composite
def layouts(draw: st.DrawFn, shape: tuple[int, ...], broadcast: bool = False) -> Layout:
    """A non-overlapping view of ``shape``: dims nested in a random order, with gaps; with
    ``broadcast`` some dims get stride 0 (only a source may)."""
    ndim = len(shape)
    order = draw(st.permutations(range(ndim)))  # innermost first
    strides = [0] * ndim
    step = draw(st.sampled_from([1, 1, 2, 3]))
    for dim in order:
        strides[dim] = step
        step = step * max(shape[dim], 1) + draw(st.sampled_from([0, 0, 1, 3]))
    if broadcast:
        strides = [0 if draw(st.integers(0, 4)) == 0 else s for s in strides]
    return Layout(shape, tuple(strides), draw(st.integers(0, 3)))


@st.composite
def dense_layouts(draw: st.DrawFn, shape: tuple[int, ...]) -> Layout:
    """A permutation of a contiguous layout of ``shape`` (no gaps), at a random offset."""
    strides = [0] * len(shape)
    step = 1
    for dim in draw(st.permutations(range(len(shape)))):
        strides[dim] = step
        step *= max(shape[dim], 1)
    return Layout(shape, tuple(strides), draw(st.integers(0, 3)))
