"""Memory overlap: at::has_internal_overlap and at::get_overlap_status."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from torch_mydev_rules import layout
from torch_mydev_rules.layout import MemOverlap, MemOverlapStatus, MemRange

from .strategies import dense_strides, layouts, sizes_of_rank, storage_elements
from .truth import strided

PARTIAL_OVERLAP_MESSAGE = (
    "unsupported operation: some elements of the input tensor and the written-to tensor "
    "refer to a single memory location"
)


def element_offsets(sizes, strides, offset=0) -> list[int]:
    """Brute force: the storage offset of every element, in index order."""
    return [
        offset + sum(i * s for i, s in zip(index, strides, strict=True))
        for index in itertools.product(*(range(n) for n in sizes))
    ]


def byte_set(sizes, strides, offset, itemsize) -> set[int]:
    """Brute force: every byte the elements of a view occupy."""
    return {
        e * itemsize + b for e in element_offsets(sizes, strides, offset) for b in range(itemsize)
    }


@given(layouts())
@example(((2, 2), (1, 1)))  # overlaps, but too hard for ATen
@example(((2, 2), (1, 4)))  # does not overlap, still too hard
@example(((1, 3), (0, 1)))  # stride 0 on a size-1 dim is harmless
@example(((3, 1), (0, 1)))
@example(((1, 2, 2), (0, 1, 1)))  # stride 0 on a size-1 dim does not make it YES
def test_internal_overlap_matches_torch(sizes_strides):
    """Truth: ``torch._debug_has_internal_overlap(t)`` (0 no, 1 yes, 2 too hard), and a
    brute-force check that NO never has two elements at one offset and YES always has."""
    sizes, strides = sizes_strides
    ours = layout.has_internal_overlap(sizes, strides)
    assert ours.value == torch._debug_has_internal_overlap(strided(sizes, strides))
    offsets = element_offsets(sizes, strides)
    if ours is MemOverlap.NO:
        assert len(set(offsets)) == len(offsets)
    elif ours is MemOverlap.YES:
        assert len(set(offsets)) < len(offsets)


def test_enums_have_no_truth_value():
    """No torch truth: ``if has_internal_overlap(...)`` would be a bug, so it raises."""
    with pytest.raises(TypeError):
        bool(layout.has_internal_overlap((2,), (0,)))
    with pytest.raises(TypeError):
        bool(MemOverlapStatus.NO)


DTYPE_PAIRS = [
    (torch.float32, torch.float32),
    (torch.float32, torch.float32),
    (torch.float32, torch.int16),
    (torch.float64, torch.float32),
    (torch.uint8, torch.float32),
]


@st.composite
def same_shape_pair(draw):
    """A dense destination view and a source view of the same sizes, on one buffer.

    Small offsets make partial overlaps, full overlaps and disjoint spans all common.
    """
    sizes = draw(st.integers(0, 4).flatmap(sizes_of_rank))
    dst_strides = draw(dense_strides(sizes))
    src_strides = draw(
        dense_strides(sizes)
        | st.lists(st.integers(0, 12), min_size=len(sizes), max_size=len(sizes)).map(tuple)
    )
    dst_dtype, src_dtype = draw(st.sampled_from(DTYPE_PAIRS))
    if draw(st.booleans()):
        dst_dtype, src_dtype = src_dtype, dst_dtype
    dst = (sizes, dst_strides, draw(st.integers(0, 12)), dst_dtype)
    src = (sizes, src_strides, draw(st.integers(0, 12)), src_dtype)
    return dst, src


def views_of_one_buffer(*specs):
    """CPU views (sizes, strides, offset, dtype) sharing one zeroed byte buffer."""
    nbytes = max(storage_elements(s, st_, o) * d.itemsize for s, st_, o, d in specs)
    buffer = torch.zeros(nbytes // 8 + 2, dtype=torch.float64).view(torch.uint8)
    return [buffer.view(d).as_strided(s, st_, o) for s, st_, o, d in specs]


def mem_range(spec, storage=0) -> MemRange:
    sizes, strides, offset, dtype = spec
    return MemRange.from_layout(storage, sizes, strides, dtype.itemsize, offset)


@given(same_shape_pair())
def test_overlap_status_matches_copy(pair):
    """Truth: ``dst.copy_(src)`` on two views of one CPU buffer raises "some elements of the
    input tensor and the written-to tensor refer to a single memory location" exactly when
    ATen's get_overlap_status(dst, src) is PARTIAL (TensorIterator's
    assert_no_partial_overlap; the destination is dense, so it has no internal overlap)."""
    dst_spec, src_spec = pair
    dst, src = views_of_one_buffer(dst_spec, src_spec)
    status = layout.get_overlap_status(mem_range(dst_spec), mem_range(src_spec))
    try:
        dst.copy_(src)
        raised = False
    except RuntimeError as exc:
        assert PARTIAL_OVERLAP_MESSAGE in str(exc)
        raised = True
    assert raised == (status is MemOverlapStatus.PARTIAL)


@given(
    st.tuples(layouts(max_dims=4), st.integers(0, 12), st.sampled_from([1, 2, 4, 8])),
    st.tuples(layouts(max_dims=4), st.integers(0, 12), st.sampled_from([1, 2, 4, 8])),
)
def test_overlap_status_against_brute_force(a, b):
    """Truth: brute-force byte sets of the two views. For two non-empty dense views of one
    storage, FULL or PARTIAL exactly when some byte is shared, and FULL only when the byte
    sets are equal; NO whenever either view is empty or the storages differ."""
    (a_sizes, a_strides), a_offset, a_item = a
    (b_sizes, b_strides), b_offset, b_item = b
    ra = MemRange.from_layout(7, a_sizes, a_strides, a_item, a_offset)
    rb = MemRange.from_layout(7, b_sizes, b_strides, b_item, b_offset)
    status = layout.get_overlap_status(ra, rb)
    other_storage = MemRange.from_layout(8, b_sizes, b_strides, b_item, b_offset)
    if ra.numel == 0 or rb.numel == 0:
        assert status is MemOverlapStatus.NO
        return
    if not (ra.dense and rb.dense):
        assert status is MemOverlapStatus.TOO_HARD
        return
    assert layout.get_overlap_status(ra, other_storage) is MemOverlapStatus.NO
    bytes_a = byte_set(a_sizes, a_strides, a_offset, a_item)
    bytes_b = byte_set(b_sizes, b_strides, b_offset, b_item)
    shared = bool(bytes_a & bytes_b)
    assert (status in (MemOverlapStatus.FULL, MemOverlapStatus.PARTIAL)) == shared
    if status is MemOverlapStatus.FULL:
        assert bytes_a == bytes_b


def test_transpose_of_square_is_partial():
    """Truth: ``a.copy_(a.t())`` on a square CPU matrix raises the partial-overlap error:
    same bytes, different strides."""
    a = torch.zeros(3, 3)
    with pytest.raises(RuntimeError, match="single memory location"):
        a.copy_(a.t())
    ra = MemRange.from_layout(0, (3, 3), (3, 1), 4)
    rt = MemRange.from_layout(0, (3, 3), (1, 3), 4)
    assert layout.get_overlap_status(ra, rt) is MemOverlapStatus.PARTIAL
    assert layout.get_overlap_status(ra, ra) is MemOverlapStatus.FULL


def test_views_of_different_buffers_never_overlap():
    """Truth: ``dst.copy_(src)`` between two separate CPU tensors never raises."""
    torch.zeros(2, 3).copy_(torch.zeros(3, 2).t())
    ra = MemRange.from_layout(1, (2, 3), (3, 1), 4)
    rb = MemRange.from_layout(2, (2, 3), (1, 2), 4)
    assert layout.get_overlap_status(ra, rb) is MemOverlapStatus.NO


def test_mem_range_from_layout_matches_tensor():
    """Truth: ``t.nbytes``, ``t.data_ptr() - t.untyped_storage().data_ptr()`` and
    ``aten.is_non_overlapping_and_dense`` of a CPU view."""
    sizes, strides, offset = (2, 3, 4), (24, 1, 6), 5
    t = torch.zeros(100, dtype=torch.float64).as_strided(sizes, strides, offset)
    r = MemRange.from_layout(t.untyped_storage().data_ptr(), sizes, strides, 8, offset)
    assert r.start == t.data_ptr() - t.untyped_storage().data_ptr()
    assert r.nbytes == t.nbytes
    assert r.numel == t.numel()
    assert r.dense == torch.ops.aten.is_non_overlapping_and_dense(t)
    assert r.end == r.start + r.nbytes


def test_same_span_without_strides_is_refused():
    """No torch truth: without strides FULL cannot be told from PARTIAL, so ValueError."""
    a = MemRange(storage=0, start=0, nbytes=36, dense=True, numel=9)
    b = MemRange(storage=0, start=0, nbytes=36, dense=True, numel=9)
    with pytest.raises(ValueError, match="strides"):
        layout.get_overlap_status(a, b)
    shifted = MemRange(storage=0, start=4, nbytes=36, dense=True, numel=9)
    assert layout.get_overlap_status(a, shifted) is MemOverlapStatus.PARTIAL
