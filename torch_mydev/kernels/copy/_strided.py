"""Decides the order in which a same-size strided copy moves its elements (numba loops).

Every loop here moves *units* (uint8/16/32/64 array elements) between two 1-D arrays; one
tensor element is ``width`` consecutive units, so a complex128 element is two uint64 units
and an element stored at an offset its own size does not divide is moved in smaller units.
The loops know nothing about dtypes: a cast is a gather into a staging buffer, a conversion,
and a scatter, each of which is one of these copies (see ``copy.py``).

Two traversals, both in TensorIterator order (dim 0 fastest):

- ``copy_range``: linear iteration indices ``[begin, end)``, like
  ``at::internal::serial_for_each`` with a ``DimCounter``: start from the multi-index of
  ``begin``, run along dim 0 to the end of the row (or of the range), carry into the outer
  dims. A run whose both strides are one element is a plain counted loop LLVM vectorises.
- ``copy_tiles``: the transpose-like case (destination contiguous along dim 0, source
  contiguous along dim 1) walked in square tiles so both sides stay in cache; outer dims
  (2 and up) are batch dims enumerated with the tiles.

Each takes the part of its range it walks (indices, tiles), so a large copy runs as a few
calls on threads (``threads.parallel_for``: ``at::parallel_for`` feeding
``serial_for_each``); a run of the linear range rather than of the outermost dim keeps the
work balanced whatever the shape.

Offsets and strides are in units; shape and strides come as int64 arrays, so numba compiles
one specialisation per unit type, whatever the number of dims.

``copy_range_at``, ``copy_tiles_at`` and ``move_bytes_at`` are the serial loops over raw
addresses instead of arrays: a small copy then spends no time building numpy views of its two
buffers (and its caller may call their compiled entry points directly, see ``entry_point``).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, types, uint64
from numba.core import cgutils
from numba.extending import intrinsic

from torch_mydev.kernels.jit._replay_abi import pointer_of as _pointer
from torch_mydev.kernels.jit._seal import seal


@njit(cache=True, nogil=True, inline="always")
def _copy_run(
    dst: np.ndarray, d: int, ds: int, src: np.ndarray, s: int, ss: int, n: int, width: int
) -> None:
    """Move ``n`` elements of ``width`` units: dst[d + i*ds + k] = src[s + i*ss + k].

    Indices are cast to uint64 (they are never negative: offsets and strides are checked by
    the caller), so numba emits no negative-index wraparound test per element; with it the
    loops ran about a quarter slower and the contiguous run did not vectorise.
    """
    if width == 1:
        if ds == 1 and ss == 1:
            for i in range(n):
                dst[uint64(d + i)] = src[uint64(s + i)]
        else:
            for i in range(n):
                dst[uint64(d + i * ds)] = src[uint64(s + i * ss)]
    else:
        for i in range(n):
            for k in range(width):
                dst[uint64(d + i * ds + k)] = src[uint64(s + i * ss + k)]


@njit(cache=True, nogil=True)
def copy_range(
    dst: np.ndarray,
    dst_base: int,
    dst_strides: np.ndarray,
    src: np.ndarray,
    src_base: int,
    src_strides: np.ndarray,
    shape: np.ndarray,
    width: int,
    begin: int,
    end: int,
) -> None:
    """Copy iteration indices ``[begin, end)``; mirrors ``serial_for_each`` + ``DimCounter``.

    ``dst``/``src`` are 1-D arrays of one unit type (they may be the same array when the
    caller's layouts are identical); bases and strides are in units; ``shape`` has dim 0
    fastest and no zero-size dim.
    """
    ndim = shape.shape[0]
    counter = np.zeros(ndim, np.int64)
    rest = begin
    d_off = dst_base
    s_off = src_base
    for dim in range(ndim):
        index = rest % shape[dim]
        rest //= shape[dim]
        counter[dim] = index
        d_off += index * dst_strides[dim]
        s_off += index * src_strides[dim]
    ds0 = dst_strides[0]
    ss0 = src_strides[0]
    size0 = shape[0]
    pos = begin
    while pos < end:
        run = min(size0 - counter[0], end - pos)
        _copy_run(dst, d_off, ds0, src, s_off, ss0, run, width)
        pos += run
        counter[0] += run
        d_off += run * ds0
        s_off += run * ss0
        dim = 0
        while dim < ndim - 1 and counter[dim] == shape[dim]:
            d_off += dst_strides[dim + 1] - shape[dim] * dst_strides[dim]
            s_off += src_strides[dim + 1] - shape[dim] * src_strides[dim]
            counter[dim] = 0
            counter[dim + 1] += 1
            dim += 1


@njit(cache=True, nogil=True)
def copy_tiles(
    dst: np.ndarray,
    dst_base: int,
    dst_strides: np.ndarray,
    src: np.ndarray,
    src_base: int,
    src_strides: np.ndarray,
    shape: np.ndarray,
    width: int,
    tile: int,
    t_begin: int,
    t_end: int,
) -> None:
    """Copy tiles ``[t_begin, t_end)`` of a transpose-like iteration, ``tile`` x ``tile`` each.

    Tiles are numbered dim-0 tile fastest, then dim-1 tile, then the outer (batch) dims. Inside
    a tile each dim-1 index is a run along dim 0, contiguous in the destination; the source rows
    touched by one tile stay in cache while its columns are read. The blocked transpose ATen
    leaves to vectorised ``cpu_kernel_vec`` loops; here the blocking is explicit.
    """
    ndim = shape.shape[0]
    n0 = shape[0]
    n1 = shape[1]
    tiles0 = (n0 + tile - 1) // tile
    tiles1 = (n1 + tile - 1) // tile
    ds0 = dst_strides[0]
    ss0 = src_strides[0]
    ds1 = dst_strides[1]
    ss1 = src_strides[1]
    for t in range(t_begin, t_end):
        t0 = t % tiles0
        rest = t // tiles0
        t1 = rest % tiles1
        rest //= tiles1
        d_off = dst_base
        s_off = src_base
        for dim in range(2, ndim):
            index = rest % shape[dim]
            rest //= shape[dim]
            d_off += index * dst_strides[dim]
            s_off += index * src_strides[dim]
        b0 = t0 * tile
        n = min(b0 + tile, n0) - b0
        d_off += b0 * ds0
        s_off += b0 * ss0
        for i1 in range(t1 * tile, min(t1 * tile + tile, n1)):
            _copy_run(dst, d_off + i1 * ds1, ds0, src, s_off + i1 * ss1, ss0, n, width)


@njit(cache=True, nogil=True)
def copy_range_at(
    dst_address: int,
    src_address: int,
    dst_units: int,
    src_units: int,
    dst_strides: np.ndarray,
    src_strides: np.ndarray,
    shape: np.ndarray,
    width: int,
    lane: np.ndarray,
    begin: int,
    end: int,
) -> None:
    """``copy_range`` over ``dst_units`` / ``src_units`` units at two addresses.

    ``lane`` is any array of the unit type (only its dtype is read); the addresses must be
    multiples of the unit size and the caller has checked the extents.
    """
    dst = numba.carray(_pointer(dst_address, lane), dst_units)
    src = numba.carray(_pointer(src_address, lane), src_units)
    copy_range(dst, 0, dst_strides, src, 0, src_strides, shape, width, begin, end)


@njit(cache=True, nogil=True)
def copy_tiles_at(
    dst_address: int,
    src_address: int,
    dst_units: int,
    src_units: int,
    dst_strides: np.ndarray,
    src_strides: np.ndarray,
    shape: np.ndarray,
    width: int,
    lane: np.ndarray,
    tile: int,
    t_begin: int,
    t_end: int,
) -> None:
    """``copy_tiles`` over units at two addresses (as ``copy_range_at``)."""
    dst = numba.carray(_pointer(dst_address, lane), dst_units)
    src = numba.carray(_pointer(src_address, lane), src_units)
    copy_tiles(dst, 0, dst_strides, src, 0, src_strides, shape, width, tile, t_begin, t_end)


@intrinsic
def _raw_memmove(typingctx, dst_address, src_address, nbytes):
    """LLVM's ``memmove`` of ``nbytes`` bytes between two integer addresses."""

    def codegen(context, builder, signature, args):
        dst = builder.inttoptr(args[0], cgutils.voidptr_t)
        src = builder.inttoptr(args[1], cgutils.voidptr_t)
        cgutils.raw_memmove(builder, dst, src, args[2], 1)
        return context.get_dummy_value()

    return types.void(dst_address, src_address, nbytes), codegen


@njit(cache=True, nogil=True)
def move_bytes_at(dst_address: int, src_address: int, nbytes: int) -> None:
    """``memmove(dst_address, src_address, nbytes)``: one byte range, overlap-safe."""
    _raw_memmove(dst_address, src_address, nbytes)


seal(__name__)  # keep last: keys the caches and widens the literals of the loops above
