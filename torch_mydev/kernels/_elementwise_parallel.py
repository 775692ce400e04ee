"""Decides how a large elementwise op splits over threads: equal slices of the linear range.

The parallel forms of ``_elementwise_loops``' kernels, as ``at::parallel_for(0, numel, grain,
...)`` drives ATen's elementwise loops: ``prange`` over ``slices`` equal parts of the linear
iteration range (dim 0 fastest), each part walked like ``serial_for_each`` with a
``DimCounter`` -- start at the multi-index of its first element, finish the partial row, then
whole rows, and stop inside the row where the part ends. Slicing the linear range rather
than the outer dims keeps the parts balanced whatever the shape (a 1-D plan is one row).

Each element goes through the very row functions the serial kernels call (``_binary_row``,
``_compare_row``, ``_unary_row`` and the ``where``/``fill`` moves), so its value is computed
exactly as on the serial path; there is no reduction, so the split changes no bit. The
parts write disjoint elements: the caller runs these only on outputs that do not overlap
themselves.

A separate module, and separate functions from the serial ones: ``parallel=True`` compiles
more slowly, so a dtype's parallel form is compiled (or loaded from numba's cache,
``cache=True``) only when an op of that dtype first runs above the threshold, and the small
ops' serial entry points stay exactly as they were. The serial rows are compiled into
these loops, so their cache is keyed by ``_elementwise_loops``' source too, as every loop's
is keyed by all the kernels' sources (``_cache_key``).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from ._elementwise_loops import (
    _binary_row,
    _compare_row,
    _ix,
    _next_row,
    _unary_row,
)
from ._seal import seal
from ._strided import _pointer

_JIT = {"cache": True, "nogil": True, "error_model": "numpy"}
_PARALLEL = {**_JIT, "parallel": True}


@njit(**_JIT)
def _numel(shape):
    n = 1
    for d in range(shape.shape[0]):
        n *= shape[d]
    return n


@njit(**_JIT)
def _start(begin, base, strides, shape):
    """The DimCounter at linear index ``begin`` and every operand's offset there."""
    counter = np.zeros(shape.shape[0], np.int64)
    offsets = base.copy()
    rest = begin
    for d in range(shape.shape[0]):
        index = rest % shape[d]
        rest //= shape[d]
        counter[d] = index
        for k in range(offsets.shape[0]):
            offsets[k] += index * strides[k, d]
    return counter, offsets


@njit(**_JIT)
def _next_run(counter, offsets, strides, shape):
    """Move from inside a row to the start of the next row."""
    for k in range(offsets.shape[0]):
        offsets[k] -= counter[0] * strides[k, 0]
    counter[0] = 0
    _next_row(counter, offsets, strides, shape)


@njit(**_JIT)
def _binary_range(
    op, out, a, b, base, strides, shape, alpha, fmt, out_fmt, mid, check_zero, begin, end
):
    """``binary_kernel`` over linear indices ``[begin, end)``; returns its status."""
    counter, offsets = _start(begin, base, strides, shape)
    pos = begin
    while pos < end:
        n = min(shape[0] - counter[0], end - pos)
        status = _binary_row(
            op,
            out,
            offsets[0],
            strides[0, 0],
            a,
            offsets[1],
            strides[1, 0],
            b,
            offsets[2],
            strides[2, 0],
            n,
            alpha,
            fmt,
            out_fmt,
            mid,
            check_zero,
        )
        if status != 0:
            return status
        pos += n
        _next_run(counter, offsets, strides, shape)
    return 0


@njit(**_JIT)
def _tile_start(t, tile, base, strides, shape):
    """Offsets of the first element of tile ``t`` and its extents along dims 0 and 1.

    Tiles are numbered dim-0 tile fastest, then dim-1 tile, then the outer dims (2 and up),
    as ``_strided.copy_tiles`` numbers them.
    """
    tiles0 = (shape[0] + tile - 1) // tile
    tiles1 = (shape[1] + tile - 1) // tile
    t0 = t % tiles0
    rest = t // tiles0
    t1 = rest % tiles1
    rest //= tiles1
    offsets = base.copy()
    for d in range(2, shape.shape[0]):
        index = rest % shape[d]
        rest //= shape[d]
        for k in range(offsets.shape[0]):
            offsets[k] += index * strides[k, d]
    b0 = t0 * tile
    b1 = t1 * tile
    for k in range(offsets.shape[0]):
        offsets[k] += b0 * strides[k, 0] + b1 * strides[k, 1]
    return offsets, min(b0 + tile, shape[0]) - b0, min(b1 + tile, shape[1]) - b1


@njit(**_JIT)
def _tile_count(tile, shape):
    tiles = ((shape[0] + tile - 1) // tile) * ((shape[1] + tile - 1) // tile)
    for d in range(2, shape.shape[0]):
        tiles *= shape[d]
    return tiles


@njit(**_JIT)
def _binary_tiles(
    op, out, a, b, base, strides, shape, alpha, fmt, out_fmt, mid, check_zero, tile, begin, end
):
    """``binary_kernel`` over tiles ``[begin, end)`` of dims 0 and 1, each walked in runs
    along dim 1 (``binary_parallel_at`` says when)."""
    for t in range(begin, end):
        offsets, n0, n1 = _tile_start(t, tile, base, strides, shape)
        for i0 in range(n0):
            status = _binary_row(
                op,
                out,
                offsets[0] + i0 * strides[0, 0],
                strides[0, 1],
                a,
                offsets[1] + i0 * strides[1, 0],
                strides[1, 1],
                b,
                offsets[2] + i0 * strides[2, 0],
                strides[2, 1],
                n1,
                alpha,
                fmt,
                out_fmt,
                mid,
                check_zero,
            )
            if status != 0:
                return status
    return 0


@njit(**_PARALLEL)
def binary_parallel_at(
    out_address,
    a_address,
    b_address,
    out_lane,
    a_lane,
    b_lane,
    meta,
    strides,
    shape,
    alpha,
    tile,
    slices,
):
    """``binary_at`` (same arguments, then ``tile`` and ``slices``) over ``slices`` parts in
    parallel: parts of the linear range, or with ``tile`` > 0 (and two dims or more) parts
    of the tile range (``_binary_tiles``).

    Returns 1 when a part met an integer zero divisor (the other parts may have finished).
    """
    out = numba.carray(_pointer(out_address, out_lane), meta[0])
    a = numba.carray(_pointer(a_address, a_lane), meta[1])
    b = numba.carray(_pointer(b_address, b_lane), meta[2])
    op, fmt, out_fmt, mid, check_zero = meta[3], meta[4], meta[5], meta[6], meta[7] != 0
    base = np.zeros(3, np.int64)
    status = np.zeros(slices, np.int64)
    if tile > 0 and shape.shape[0] >= 2:
        tiles = _tile_count(tile, shape)
        for part in prange(slices):
            status[part] = _binary_tiles(
                op,
                out,
                a,
                b,
                base,
                strides,
                shape,
                alpha,
                fmt,
                out_fmt,
                mid,
                check_zero,
                tile,
                part * tiles // slices,
                (part + 1) * tiles // slices,
            )
        return status.max()
    numel = _numel(shape)
    for part in prange(slices):
        status[part] = _binary_range(
            op,
            out,
            a,
            b,
            base,
            strides,
            shape,
            alpha,
            fmt,
            out_fmt,
            mid,
            check_zero,
            part * numel // slices,
            (part + 1) * numel // slices,
        )
    return status.max()


@njit(**_JIT)
def _compare_range(op, out, a, b, base, strides, shape, fmt, begin, end):
    counter, offsets = _start(begin, base, strides, shape)
    pos = begin
    while pos < end:
        n = min(shape[0] - counter[0], end - pos)
        _compare_row(
            op,
            out,
            offsets[0],
            strides[0, 0],
            a,
            offsets[1],
            strides[1, 0],
            b,
            offsets[2],
            strides[2, 0],
            n,
            fmt,
        )
        pos += n
        _next_run(counter, offsets, strides, shape)


@njit(**_PARALLEL)
def compare_parallel_at(
    out_address, a_address, b_address, out_lane, a_lane, meta, strides, shape, slices
):
    """``compare_at`` (same arguments, then ``slices``) over ``slices`` parts in parallel."""
    out = numba.carray(_pointer(out_address, out_lane), meta[0])
    a = numba.carray(_pointer(a_address, a_lane), meta[1])
    b = numba.carray(_pointer(b_address, a_lane), meta[2])
    numel = _numel(shape)
    base = np.zeros(3, np.int64)
    for part in prange(slices):
        _compare_range(
            meta[3],
            out,
            a,
            b,
            base,
            strides,
            shape,
            meta[4],
            part * numel // slices,
            (part + 1) * numel // slices,
        )
    return 0


@njit(**_JIT)
def _unary_range(op, out, a, base, strides, shape, fmt, begin, end):
    counter, offsets = _start(begin, base, strides, shape)
    pos = begin
    while pos < end:
        n = min(shape[0] - counter[0], end - pos)
        _unary_row(op, out, offsets[0], strides[0, 0], a, offsets[1], strides[1, 0], n, fmt)
        pos += n
        _next_run(counter, offsets, strides, shape)


@njit(**_PARALLEL)
def unary_parallel_at(out_address, a_address, lane, meta, strides, shape, slices):
    """``unary_at`` (same arguments, then ``slices``) over ``slices`` parts in parallel."""
    out = numba.carray(_pointer(out_address, lane), meta[0])
    a = numba.carray(_pointer(a_address, lane), meta[1])
    numel = _numel(shape)
    base = np.zeros(2, np.int64)
    for part in prange(slices):
        _unary_range(
            meta[2],
            out,
            a,
            base,
            strides,
            shape,
            meta[3],
            part * numel // slices,
            (part + 1) * numel // slices,
        )
    return 0


@njit(**_JIT)
def _where_range(out, cond, a, b, base, strides, shape, begin, end):
    counter, offsets = _start(begin, base, strides, shape)
    so, sc, sa, sb = strides[0, 0], strides[1, 0], strides[2, 0], strides[3, 0]
    pos = begin
    while pos < end:
        n = min(shape[0] - counter[0], end - pos)
        o, c, ia, ib = offsets[0], offsets[1], offsets[2], offsets[3]
        for i in range(n):
            if cond[_ix(c, i, sc)] != 0:
                out[_ix(o, i, so)] = a[_ix(ia, i, sa)]
            else:
                out[_ix(o, i, so)] = b[_ix(ib, i, sb)]
        pos += n
        _next_run(counter, offsets, strides, shape)


@njit(**_PARALLEL)
def where_parallel(out, cond, a, b, base, strides, shape, slices):
    """``where_kernel`` (same arguments, then ``slices``) over ``slices`` parts in parallel."""
    numel = _numel(shape)
    for part in prange(slices):
        _where_range(
            out,
            cond,
            a,
            b,
            base,
            strides,
            shape,
            part * numel // slices,
            (part + 1) * numel // slices,
        )
    return 0


@njit(**_JIT)
def _fill_range(out, v, base, strides, shape, begin, end):
    counter, offsets = _start(begin, base, strides, shape)
    so = strides[0, 0]
    pos = begin
    while pos < end:
        n = min(shape[0] - counter[0], end - pos)
        o = offsets[0]
        for i in range(n):
            out[_ix(o, i, so)] = v
        pos += n
        _next_run(counter, offsets, strides, shape)


@njit(**_PARALLEL)
def fill_parallel(out, value, base, strides, shape, slices):
    """``fill_kernel`` (same arguments, then ``slices``) over ``slices`` parts in parallel."""
    numel = _numel(shape)
    v = value[0]
    for part in prange(slices):
        _fill_range(
            out, v, base, strides, shape, part * numel // slices, (part + 1) * numel // slices
        )
    return 0


seal(__name__)  # keep last: keys the caches and widens the literals of the loops above
