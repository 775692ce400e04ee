"""Interleaves or de-interleaves a few planes: the copy loop for a tiny transposed dim (numba).

After coalescing, ``x.contiguous(memory_format=torch.channels_last)`` of an NCHW image batch
with C = 3 is the plan ``(C, H*W, N)``: the destination contiguous along the C dim (3
elements), the source along H*W. ``channels_last -> NCHW`` is the same pair the other way
round. The tiled loop wants both transposed dims long and the DimCounter loop runs along
dim 0, three elements at a time; this loop is shaped for the tiny dim instead.

The plan comes normalised (``copy.loops.plan_loop``): dim 0 is the tiny dim (the *planes*,
at most ``copy.loops.PLANES_MAX``), dim 1 the long dim, dims 2 and up batch dims. One side
is contiguous along dim 0 (interleaved), the other along dim 1 (planar). The long dim is cut
into blocks of ``block`` positions; blocks are numbered block fastest, then the batch dims.
Inside a block each position moves all its planes before the next (the interleaved side is
read or written in order; the planar side is ``planes`` sequential streams), with the
planes' unit offsets hoisted out of the loop and the moves unrolled by up to four.

When the interleaved side is dense (unit stride 1 along the planes, ``planes`` along the
long dim), the planar side has unit stride 1 along the long dim, an element is one unit and
there are 2, 3 or 4 planes -- an image batch of 2, 3 or 4 channels, either direction --
the loop body is written with those strides as constants (``_interleave``,
``_deinterleave``): LLVM then vectorises the interleaved accesses (shuffles), about 3x
(4-byte units) to 20x (bytes) faster than the same moves with strides known only at run
time, near ``memcpy`` speed.

Like ``_strided``, the loops move *units* (uint8/16/32/64) and an element is ``width``
units: unit ``l`` of plane ``k`` is its own unit plane, at offset ``k * stride0 + l``, so a
complex128 element in 8-byte units is two unit planes and the same four bodies serve every
width and every number of planes. numba compiles one specialisation per unit type.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, uint64

from torch_mydev.kernels.copy._strided import _pointer
from torch_mydev.kernels.jit._seal import seal


@njit(cache=True, nogil=True, inline="always")
def _plane_offset(plane: int, width: int, stride0: int) -> int:
    """Unit offset of unit plane ``plane`` (element plane ``plane // width``, unit ``% width``)."""
    return (plane // width) * stride0 + plane % width


@njit(cache=True, nogil=True, inline="always")
def _move_block(
    dst: np.ndarray,
    d: int,
    ds0: int,
    ds1: int,
    src: np.ndarray,
    s: int,
    ss0: int,
    ss1: int,
    count: int,
    width: int,
    n: int,
) -> None:
    """Move ``n`` positions along dim 1 of all ``count`` unit planes, up to four per pass.

    Indices are cast to uint64 as in ``_strided._copy_run`` (never negative). A pass over up
    to four planes at once keeps the interleaved side's cache lines whole; a plan with more
    unit planes makes a second pass over the same block, still in cache.
    """
    p = 0
    while p < count:
        group = min(4, count - p)
        a0 = d + _plane_offset(p, width, ds0)
        b0 = s + _plane_offset(p, width, ss0)
        if group == 1:
            for i in range(n):
                dst[uint64(a0 + i * ds1)] = src[uint64(b0 + i * ss1)]
        else:
            a1 = d + _plane_offset(p + 1, width, ds0)
            b1 = s + _plane_offset(p + 1, width, ss0)
            if group == 2:
                for i in range(n):
                    dst[uint64(a0 + i * ds1)] = src[uint64(b0 + i * ss1)]
                    dst[uint64(a1 + i * ds1)] = src[uint64(b1 + i * ss1)]
            else:
                a2 = d + _plane_offset(p + 2, width, ds0)
                b2 = s + _plane_offset(p + 2, width, ss0)
                if group == 3:
                    for i in range(n):
                        dst[uint64(a0 + i * ds1)] = src[uint64(b0 + i * ss1)]
                        dst[uint64(a1 + i * ds1)] = src[uint64(b1 + i * ss1)]
                        dst[uint64(a2 + i * ds1)] = src[uint64(b2 + i * ss1)]
                else:
                    a3 = d + _plane_offset(p + 3, width, ds0)
                    b3 = s + _plane_offset(p + 3, width, ss0)
                    for i in range(n):
                        dst[uint64(a0 + i * ds1)] = src[uint64(b0 + i * ss1)]
                        dst[uint64(a1 + i * ds1)] = src[uint64(b1 + i * ss1)]
                        dst[uint64(a2 + i * ds1)] = src[uint64(b2 + i * ss1)]
                        dst[uint64(a3 + i * ds1)] = src[uint64(b3 + i * ss1)]
        p += group


@njit(cache=True, nogil=True, inline="always")
def _interleave(dst: np.ndarray, d: int, src: np.ndarray, s: int, ss0: int, c: int, n: int) -> None:
    """``dst[d + c*i + k] = src[s + k*ss0 + i]`` for ``c`` in 2, 3, 4: planar to interleaved."""
    if c == 2:
        for i in range(n):
            dst[uint64(d + 2 * i)] = src[uint64(s + i)]
            dst[uint64(d + 2 * i + 1)] = src[uint64(s + ss0 + i)]
    elif c == 3:
        for i in range(n):
            dst[uint64(d + 3 * i)] = src[uint64(s + i)]
            dst[uint64(d + 3 * i + 1)] = src[uint64(s + ss0 + i)]
            dst[uint64(d + 3 * i + 2)] = src[uint64(s + 2 * ss0 + i)]
    else:
        for i in range(n):
            dst[uint64(d + 4 * i)] = src[uint64(s + i)]
            dst[uint64(d + 4 * i + 1)] = src[uint64(s + ss0 + i)]
            dst[uint64(d + 4 * i + 2)] = src[uint64(s + 2 * ss0 + i)]
            dst[uint64(d + 4 * i + 3)] = src[uint64(s + 3 * ss0 + i)]


@njit(cache=True, nogil=True, inline="always")
def _deinterleave(
    dst: np.ndarray, d: int, ds0: int, src: np.ndarray, s: int, c: int, n: int
) -> None:
    """``dst[d + k*ds0 + i] = src[s + c*i + k]`` for ``c`` in 2, 3, 4: interleaved to planar."""
    if c == 2:
        for i in range(n):
            dst[uint64(d + i)] = src[uint64(s + 2 * i)]
            dst[uint64(d + ds0 + i)] = src[uint64(s + 2 * i + 1)]
    elif c == 3:
        for i in range(n):
            dst[uint64(d + i)] = src[uint64(s + 3 * i)]
            dst[uint64(d + ds0 + i)] = src[uint64(s + 3 * i + 1)]
            dst[uint64(d + 2 * ds0 + i)] = src[uint64(s + 3 * i + 2)]
    else:
        for i in range(n):
            dst[uint64(d + i)] = src[uint64(s + 4 * i)]
            dst[uint64(d + ds0 + i)] = src[uint64(s + 4 * i + 1)]
            dst[uint64(d + 2 * ds0 + i)] = src[uint64(s + 4 * i + 2)]
            dst[uint64(d + 3 * ds0 + i)] = src[uint64(s + 4 * i + 3)]


# Not inlined into copy_planes_at: copy.loops.run_loop calls it from Python too, and it
# would then compile on its own as well (about 2 s a unit type).
@njit(cache=True, nogil=True)
def copy_planes(
    dst: np.ndarray,
    dst_base: int,
    dst_strides: np.ndarray,
    src: np.ndarray,
    src_base: int,
    src_strides: np.ndarray,
    shape: np.ndarray,
    width: int,
    block: int,
    b_begin: int,
    b_end: int,
) -> None:
    """Copy blocks ``[b_begin, b_end)`` of a planes plan (dim 0 tiny, dim 1 long, rest batch).

    ``dst``/``src`` are 1-D arrays of one unit type; bases and strides in units; ``shape``
    has no zero-size dim. ``block`` positions of dim 1 make a block.
    """
    ndim = shape.shape[0]
    count = shape[0] * width
    n1 = shape[1]
    blocks1 = (n1 + block - 1) // block
    ds0 = dst_strides[0]
    ss0 = src_strides[0]
    ds1 = dst_strides[1]
    ss1 = src_strides[1]
    planes = shape[0]
    dense = 0  # 1: dense interleave, 2: dense de-interleave, 0: any strides
    if width == 1 and 2 <= planes <= 4:
        if ds0 == 1 and ds1 == planes and ss1 == 1:
            dense = 1
        elif ss0 == 1 and ss1 == planes and ds1 == 1:
            dense = 2
    for b in range(b_begin, b_end):
        t1 = b % blocks1
        rest = b // blocks1
        d_off = dst_base
        s_off = src_base
        for dim in range(2, ndim):
            index = rest % shape[dim]
            rest //= shape[dim]
            d_off += index * dst_strides[dim]
            s_off += index * src_strides[dim]
        i0 = t1 * block
        n = min(i0 + block, n1) - i0
        d = d_off + i0 * ds1
        s = s_off + i0 * ss1
        if dense == 1:
            _interleave(dst, d, src, s, ss0, planes, n)
        elif dense == 2:
            _deinterleave(dst, d, ds0, src, s, planes, n)
        else:
            _move_block(dst, d, ds0, ds1, src, s, ss0, ss1, count, width, n)


@njit(cache=True, nogil=True)
def copy_planes_at(
    dst_address: int,
    src_address: int,
    dst_units: int,
    src_units: int,
    dst_strides: np.ndarray,
    src_strides: np.ndarray,
    shape: np.ndarray,
    width: int,
    lane: np.ndarray,
    block: int,
    b_begin: int,
    b_end: int,
) -> None:
    """``copy_planes`` over units at two addresses (as ``_strided.copy_range_at``)."""
    dst = numba.carray(_pointer(dst_address, lane), dst_units)
    src = numba.carray(_pointer(src_address, lane), src_units)
    copy_planes(dst, 0, dst_strides, src, 0, src_strides, shape, width, block, b_begin, b_end)


seal(__name__)  # keep last: keys the caches and widens the literals of the loops above
