"""``prepare_copy`` / ``PreparedCopy.run``: the ops' per-call path moves what torch moves.

Truth: ``dst_view.copy_(src_view)`` on CPU (``direct_copy_kernel``), the whole destination
storage compared byte for byte, as for ``copy_strided``.
"""

from __future__ import annotations

import ctypes
import warnings
from collections.abc import Sequence

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from torch_mydev.kernels.copy import kernel as kcopy

from .strategies import dense_layouts, dtypes, layouts, sizes
from .truth import Layout, assert_same_bits, iteration_order, make_values


def _start(t: torch.Tensor) -> tuple[int, int]:
    """Address of element 0 and the bytes the storage holds from there on."""
    storage = t.untyped_storage()
    offset = t.storage_offset() * t.element_size()
    return storage.data_ptr() + offset, storage.nbytes() - offset


def prepared_copy(dst: torch.Tensor, src: torch.Tensor, order: Sequence[int] | None = None):
    """``dst.copy_(src)`` through ``prepare_copy`` + ``run`` (``src`` already broadcast)."""
    dims = iteration_order(dst.shape, dst.stride()) if order is None else list(order)
    prepared = kcopy.prepare_copy(
        dst.dtype,
        tuple(dst.shape[d] for d in dims),
        tuple(dst.stride(d) * dst.element_size() for d in dims),
        tuple(src.stride(d) * src.element_size() for d in dims),
    )
    assert prepared.run(*_start(dst), *_start(src))  # torch storages are aligned
    return prepared


def _buffers(values: torch.Tensor, src: Layout, dst: Layout, rng):
    """Two destination storages of the same random bytes, ``truth`` already copied into by
    CPU; returns the filler, truth, ours and the source and destination views."""
    itemsize = values.element_size()
    filler = rng.integers(0, 256, dst.storage_numel(slack=2) * itemsize, dtype=np.uint8)
    if values.dtype == torch.bool:
        filler &= 1
    truth = torch.from_numpy(filler.copy()).view(values.dtype)
    ours = torch.from_numpy(filler.copy()).view(values.dtype)
    src_view = values.as_strided(src.sizes, src.strides, src.offset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        truth.as_strided(dst.sizes, dst.strides, dst.offset).copy_(src_view)
    return filler, truth, ours, src_view, ours.as_strided(dst.sizes, dst.strides, dst.offset)


def _case(values: torch.Tensor, src: Layout, dst: Layout, rng, order=None) -> None:
    _, truth, ours, src_view, dst_view = _buffers(values, src, dst, rng)
    prepared_copy(dst_view, src_view, order)
    assert_same_bits(ours, truth, values.dtype)


@given(data=st.data())
def test_any_layout(data: st.DataObject) -> None:
    """Random dtype, shape, layouts (broadcast source), offsets and dim order."""
    dtype = data.draw(dtypes)
    shape = data.draw(sizes)
    src_layout = data.draw(layouts(shape, broadcast=True))
    dst_layout = data.draw(layouts(shape))
    order = data.draw(st.permutations(range(len(shape))))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    values = make_values(dtype, dtype, src_layout.storage_numel(slack=3), rng)
    _case(values, src_layout, dst_layout, rng, order)


@pytest.mark.parametrize(
    ("shape", "src_strides", "path"),
    [
        ((300, 500), (1, 300), "tiled-parallel"),  # a transpose, parallel
        ((100, 200), (1, 100), "tiled"),
        ((512, 300), (600, 1), "strided-parallel"),  # every other row
        ((64, 64), (1, 64), "strided"),  # below the tiling threshold
        ((1 << 22,), (1,), "contiguous-parallel"),
        ((1000,), (1,), "contiguous"),
    ],
)
def test_every_loop(shape, src_strides, path) -> None:
    """Each loop ``copy_strided`` has, chosen by ``prepare_copy`` as ``plan_path`` names it."""
    _loop_case(shape, src_strides, path, _case)


def _loop_case(shape, src_strides, path, case) -> None:
    """A float32 copy from ``src_strides`` into a contiguous destination, which takes
    ``path``, checked by ``case``."""
    rng = np.random.default_rng(0)
    src = Layout(shape, src_strides, 1)
    dst = Layout(shape, tuple(reversed(np.cumprod((1, *reversed(shape[1:]))).tolist())), 0)
    dims = iteration_order(dst.sizes, dst.strides)
    plan = (
        tuple(shape[d] for d in dims),
        tuple(dst.strides[d] * 4 for d in dims),
        tuple(src.strides[d] * 4 for d in dims),
    )
    assert kcopy.plan_path(4, *plan) == path
    values = make_values(torch.float32, torch.float32, src.storage_numel(slack=1), rng)
    case(values, src, dst, rng)


def test_unaligned_memory_is_left_to_copy_strided() -> None:
    """A start address the unit does not divide: ``run`` moves nothing and says so."""
    buf = np.zeros(64, np.uint8)
    src = np.arange(64, dtype=np.uint8)
    base, source = buf.ctypes.data, src.ctypes.data
    strided = kcopy.prepare_copy(torch.float32, (4, 2), (4, 16), (8, 4))
    assert strided.unit == 4
    assert not strided.run(base + 2, 60, source, 64)
    assert not buf.any()
    contiguous = kcopy.prepare_copy(torch.float32, (4,), (4,), (4,))
    assert contiguous.run(base + 2, 60, source + 1, 63)  # one byte range: any address
    assert buf[2:18].tolist() == list(range(1, 17))


def test_buffers_too_small_raise() -> None:
    buf = np.zeros(16, np.uint8)
    prepared = kcopy.prepare_copy(torch.float32, (4, 2), (4, 16), (8, 4))
    with pytest.raises(IndexError, match="dst"):
        prepared.run(buf.ctypes.data, 16, buf.ctypes.data, 16)
    big = np.zeros(64, np.uint8)
    with pytest.raises(IndexError, match="src"):
        prepared.run(big.ctypes.data, 64, buf.ctypes.data, 16)


def test_same_memory_same_layout_and_empty_are_no_ops() -> None:
    buf = np.arange(64, dtype=np.uint8)
    before = buf.copy()
    prepared = kcopy.prepare_copy(torch.int16, (4, 3), (2, 16), (2, 16))
    assert prepared.run(buf.ctypes.data, 64, buf.ctypes.data, 64)
    assert np.array_equal(buf, before)
    empty = kcopy.prepare_copy(torch.int16, (0, 3), (2, 0), (2, 0))
    assert empty.numel == 0
    assert empty.run(0, 0, 0, 0)


def test_single_element_and_size_one_dims() -> None:
    buf = np.zeros(16, np.uint8)
    src = np.arange(16, dtype=np.uint8)
    scalar = kcopy.prepare_copy(torch.float32, (), (), ())
    assert (scalar.numel, scalar.nbytes) == (1, 4)
    assert scalar.run(buf.ctypes.data, 16, src.ctypes.data + 4, 12)
    assert buf[:4].tolist() == [4, 5, 6, 7]
    ones = kcopy.prepare_copy(torch.float32, (1, 3, 1), (4, 4, 12), (4, 4, 12))
    assert ones.loop is None and ones.nbytes == 12


def test_overlapping_contiguous_ranges_move_like_memmove() -> None:
    buf = np.arange(32, dtype=np.uint8)
    prepared = kcopy.prepare_copy(torch.uint8, (16,), (1,), (1,))
    assert prepared.run(buf.ctypes.data + 4, 28, buf.ctypes.data, 32)
    assert buf[4:20].tolist() == list(range(16))


def test_bad_plans_are_refused_like_copy_strided() -> None:
    with pytest.raises(ValueError, match="same length"):
        kcopy.prepare_copy(torch.float32, (2, 2), (4,), (4, 8))
    with pytest.raises(ValueError, match="negative size"):
        kcopy.prepare_copy(torch.float32, (-1,), (4,), (4,))
    with pytest.raises(ValueError, match="negative stride"):
        kcopy.prepare_copy(torch.float32, (2, 2), (4, -8), (4, 8))
    with pytest.raises(TypeError, match="dtype"):
        kcopy.prepare_copy(torch.int4, (2,), (1,), (1,))


def test_runs_from_ctypes_addresses_without_numpy() -> None:
    """The serial loops read raw addresses: memory numpy never saw copies the same."""
    src = (ctypes.c_uint32 * 12)(*range(12))
    dst = (ctypes.c_uint32 * 12)()
    # a 3x4 row-major source read transposed into a 4x3 row-major destination
    prepared = kcopy.prepare_copy(torch.int32, (3, 4), (4, 12), (16, 4))
    assert prepared.run(ctypes.addressof(dst), 48, ctypes.addressof(src), 48)
    assert list(dst) == [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]


def _first_run_case(values: torch.Tensor, src: Layout, dst: Layout, rng) -> None:
    """``_run_without_numba`` (numpy's copy, the first run in a process without numba)
    against CPU's copy; when it declines, it has written nothing."""
    itemsize = values.element_size()
    filler, truth, ours, src_view, dst_view = _buffers(values, src, dst, rng)
    dims = iteration_order(dst.sizes, dst.strides)
    prepared = kcopy.prepare_copy(
        values.dtype,
        tuple(dst.sizes[d] for d in dims),
        tuple(dst.strides[d] * itemsize for d in dims),
        tuple(src.strides[d] * itemsize for d in dims),
    )
    if prepared.numel == 0 or (prepared.serial is None and prepared.pending is None):
        return  # nothing to move, or a parallel copy: no first run without numba
    if prepared.unit > 1 and (_start(dst_view)[0] | _start(src_view)[0]) % prepared.unit:
        return
    if prepared._run_without_numba(_start(dst_view)[0], _start(src_view)[0]):
        assert_same_bits(ours, truth, values.dtype)
    else:
        assert torch.equal(ours.view(torch.uint8), torch.from_numpy(filler))


@given(data=st.data())
def test_first_run_without_numba_any_layout(data: st.DataObject) -> None:
    """Random dtype, shape and layouts (broadcast source; destinations dense, taken, or with
    gaps, declined)."""
    dtype = data.draw(dtypes)
    shape = data.draw(sizes)
    src_layout = data.draw(layouts(shape, broadcast=True))
    dst_layout = data.draw(st.one_of(dense_layouts(shape), layouts(shape)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    values = make_values(dtype, dtype, src_layout.storage_numel(slack=3), rng)
    _first_run_case(values, src_layout, dst_layout, rng)


@pytest.mark.parametrize(
    ("shape", "src_strides", "path"),
    [
        ((100, 200), (1, 100), "tiled"),
        ((64, 64), (1, 64), "strided"),
        ((3, 100), (1, 3), "planes"),  # C=3 channels_last -> NCHW
        ((1000,), (1,), "contiguous"),
    ],
)
def test_first_run_without_numba_every_serial_loop(shape, src_strides, path) -> None:
    _loop_case(shape, src_strides, path, _first_run_case)


def test_first_run_declines_overlap_and_non_dense_destinations() -> None:
    buf = np.arange(64, dtype=np.uint8)
    before = buf.copy()
    # ranges that overlap: a transpose of a 4x4 int16 block into the bytes it reads
    prepared = kcopy.prepare_copy(torch.int16, (4, 4), (2, 8), (8, 2))
    assert not prepared._run_without_numba(buf.ctypes.data + 2, buf.ctypes.data)
    # a destination with gaps: every other int16
    gaps = kcopy.prepare_copy(torch.int16, (4, 3), (4, 24), (2, 8))
    other = np.arange(64, dtype=np.uint8)
    assert not gaps._run_without_numba(buf.ctypes.data, other.ctypes.data)
    assert np.array_equal(buf, before)
