"""Decides the loop of a same-dtype copy: plan normalisation, unit, planes, tiled or DimCounter,
threads.

Shared by ``copy.copy_strided`` (any buffers) and ``copy.prepared.PreparedCopy`` (one layout,
many calls): ``check_plan`` and ``coalesce`` normalise a plan, ``unit`` picks the widest
element unit, ``plan_loop`` chooses the planes, tiled or DimCounter loop, ``run_loop`` runs it
(in parallel from ``PARALLEL_MIN_NUMEL`` elements), ``memmove`` moves one byte range. The
constants are measured on this machine; see ``copy``'s docstring for the whole copy.
"""

from __future__ import annotations

import ctypes
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from torch_mydev.kernels import numba_module
from torch_mydev.kernels.dtypes import layout_of
from torch_mydev.kernels.operand import Operand
from torch_mydev.kernels.parallel import threads

# Below this many elements a copy runs serially: a numba parallel launch costs tens of
# microseconds, and on this machine (2 cores) a strided gather only gains from 16K elements.
PARALLEL_MIN_NUMEL = 1 << 16
# A contiguous copy of at least this many bytes runs on the parallel loop instead of one
# single-threaded memmove. Measured on this machine (2 cores, 2 MiB L2 each) between buffers
# already in cache, as a loop of copies keeps them: 512 KiB 5.6 us on two threads against
# 6.6 us serial, 1 MiB 11.5 against 20 us, 4 MiB 46 against 71 us, 16 MiB 0.29 against
# 0.55 ms; torch's own copy goes parallel from 32K elements. (An earlier measurement on
# fresh, uncached buffers put the crossover between 8 and 32 MiB.)
PARALLEL_MEMMOVE_MIN_BYTES = 1 << 20
# Tile side, in elements, of the transposed copy: 32..128 measured within noise of each other
# for a 4096 x 4096 float32 transpose (8 and 16 clearly slower, 256 falls out of cache).
TILE = 64
# The tiled path needs both transposed dims at least this long and this many elements; a
# smaller transpose fits in cache and the DimCounter loop is as fast.
TILE_MIN_SIDE = 16
TILE_MIN_NUMEL = 1 << 14
# A transpose whose one dim has at most PLANES_MAX elements (an image's channels: NCHW <->
# channels_last with C = 3) and whose other dim has at least PLANES_MIN_LONG takes the planes
# loop (``copy._planes``), in blocks of PLANE_BLOCK positions of the long dim. The DimCounter
# loop ran such a plan three elements per row, 2-3x slower than torch CPU's copy.
PLANES_MAX = 8
PLANES_MIN_LONG = 16
PLANE_BLOCK = 1024
# Elements per cast chunk: the canonical chunk (up to 16 bytes an element) stays in L2.
CAST_CHUNK = 1 << 15

UNIT_LANES = {
    8: np.dtype(np.uint64),
    4: np.dtype(np.uint32),
    2: np.dtype(np.uint16),
    1: np.dtype(np.uint8),
}

_parallel_pid: int | None = None


def load_strided() -> ModuleType:
    """The numba module of the strided loops, imported on the first copy."""
    return numba_module("copy._strided")


def load_planes() -> ModuleType:
    """The numba module of the planes loop, imported on the first copy that takes it."""
    return numba_module("copy._planes")


def check_plan(
    shape: tuple[int, ...], dst_strides: tuple[int, ...], src_strides: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The plan as int tuples; ``ValueError`` when the lengths differ or a size is negative."""
    shape = tuple(int(n) for n in shape)
    dst_strides = tuple(int(s) for s in dst_strides)
    src_strides = tuple(int(s) for s in src_strides)
    if not len(shape) == len(dst_strides) == len(src_strides):
        raise ValueError(
            f"shape {shape}, dst_strides {dst_strides} and src_strides {src_strides} "
            "must have the same length"
        )
    if any(n < 0 for n in shape):
        raise ValueError(f"negative size in shape {shape}")
    return shape, dst_strides, src_strides


# Arrays of each unit type, for the loops over raw addresses to read the type from.
LANE_TOKENS = {unit: np.zeros(1, lane) for unit, lane in UNIT_LANES.items()}
_LANE_CTYPES = {8: ctypes.c_uint64, 4: ctypes.c_uint32, 2: ctypes.c_uint16, 1: ctypes.c_uint8}


def entry_of(kernel, *args: object) -> Callable:
    from torch_mydev.kernels.jit._entry import entry_point  # imports numba

    return entry_point(kernel, *args)


def lanes_at(address: int, nbytes: int, unit: int) -> np.ndarray:
    """The whole units of ``nbytes`` host bytes at ``address`` as a 1-D numpy array (no copy)."""
    count = nbytes // unit
    return np.frombuffer((_LANE_CTYPES[unit] * count).from_address(address), UNIT_LANES[unit])


def coalesce(
    shape: tuple[int, ...], dst_strides: tuple[int, ...], src_strides: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Drop size-1 dims and merge neighbours that step as one (``coalesce_dimensions``)."""
    dims = [(n, d, s) for n, d, s in zip(shape, dst_strides, src_strides, strict=True) if n != 1]
    merged: list[tuple[int, int, int]] = []
    for n, d, s in dims:
        if merged:
            pn, pd, ps = merged[-1]
            if pn * pd == d and pn * ps == s:
                merged[-1] = (pn * n, pd, ps)
                continue
        merged.append((n, d, s))
    return (
        tuple(m[0] for m in merged),
        tuple(m[1] for m in merged),
        tuple(m[2] for m in merged),
    )


def check_buffer(name: str, buf: np.ndarray, writable: bool) -> None:
    if not isinstance(buf, np.ndarray) or buf.dtype != np.uint8 or buf.ndim != 1:
        raise TypeError(f"{name} must be a 1-D numpy uint8 array, got {type(buf).__name__}")
    if not buf.flags.c_contiguous:
        raise ValueError(f"{name} must be contiguous")
    if writable and not buf.flags.writeable:
        raise ValueError(f"{name} is read-only")


def check_extent(
    name: str,
    buf: np.ndarray,
    offset: int,
    itemsize: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
) -> None:
    """Every element must lie inside the buffer: the loops do not bounds-check."""
    if offset < 0 or any(s < 0 for s in strides):
        raise ValueError(f"{name}: negative offset or stride ({offset}, {strides})")
    last = offset + sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) + itemsize
    if last > buf.shape[0]:
        raise IndexError(
            f"{name}: the plan reaches byte {last} but the buffer holds {buf.shape[0]} bytes"
        )


def unit_of(itemsize: int, *values: int) -> int:
    """The widest of 8/4/2/1 bytes dividing the itemsize and every offset, stride, address."""
    g = itemsize
    for v in values:
        g = math.gcd(g, v)
    return min(8, g & -g)


def units_of(buf: np.ndarray, unit: int) -> np.ndarray:
    """View a byte buffer as unit lanes (a trailing partial unit holds no whole element)."""
    return buf[: buf.shape[0] - buf.shape[0] % unit].view(UNIT_LANES[unit])


def _crossings(
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
    itemsize: int,
    src_itemsize: int | None,
) -> list[tuple[int, int]]:
    """The pairs ``(a, b)`` of dims 0 and 1 with dst contiguous along ``a`` and src along
    ``b`` but not along ``a``: a transpose between the first two dims, in the order tried."""
    src_itemsize = itemsize if src_itemsize is None else src_itemsize
    return [
        (a, b)
        for a, b in ((0, 1), (1, 0))
        if dst_strides[a] == itemsize
        and src_strides[b] == src_itemsize
        and src_strides[a] != src_itemsize
    ]


def transposed(
    shape: tuple[int, ...],
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
    itemsize: int,
    src_itemsize: int | None = None,
) -> tuple[int, int] | None:
    """Dims ``(a, b)`` with dst contiguous along ``a`` and src along ``b``, if worth tiling."""
    if len(shape) < 2 or math.prod(shape) < TILE_MIN_NUMEL:
        return None
    for a, b in _crossings(dst_strides, src_strides, itemsize, src_itemsize):
        if shape[a] >= TILE_MIN_SIDE and shape[b] >= TILE_MIN_SIDE:
            return a, b
    return None


def planes_pair(
    shape: tuple[int, ...],
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
    itemsize: int,
    src_itemsize: int | None = None,
) -> tuple[int, int] | None:
    """Dims ``(tiny, long)`` of a transpose with one dim of at most ``PLANES_MAX`` elements.

    One operand is contiguous along dim 0 and the other along dim 1 (as for ``transposed``,
    without its minimum sizes): the tiny dim is the one of at most ``PLANES_MAX`` elements,
    the other must have at least ``PLANES_MIN_LONG``. Strides in bytes or in units, with
    ``itemsize`` (``src_itemsize`` for a cast's source) in the same measure.
    """
    if len(shape) < 2:
        return None
    for a, b in _crossings(dst_strides, src_strides, itemsize, src_itemsize):
        if dst_strides[b] == itemsize:
            continue
        for tiny, long in ((a, b), (b, a)):
            if shape[tiny] <= PLANES_MAX and shape[long] >= PLANES_MIN_LONG:
                return tiny, long
        return None
    return None


def dense_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Byte strides of a dense array in iteration order (dim 0 fastest)."""
    strides = [itemsize]
    for n in shape[:-1]:
        strides.append(strides[-1] * n)
    return tuple(strides)


def parallel_allowed(numel: int) -> bool:
    """Parallel above the threshold, with two threads or more (``threads.count``), in the
    process that first went parallel only.

    numba's OpenMP layer terminates a forked child that launches a parallel region after its
    parent did, so a child (a DataLoader worker, say) runs its loops serially.
    """
    global _parallel_pid
    if numel < PARALLEL_MIN_NUMEL or threads.count() < 2:
        return False
    if _parallel_pid is None:
        _parallel_pid = os.getpid()
    return _parallel_pid == os.getpid()


def copy_same(dst_operand: Operand, src_operand: Operand, shape: tuple[int, ...]) -> None:
    """``direct_copy_kernel``: move bytes, choosing the contiguous, tiled or DimCounter loop.

    The plan is normalised and checked (``copy_strided`` does it); both operands share a dtype.
    """
    dst, dst_offset, _, dst_strides = dst_operand
    src, src_offset, _, src_strides = src_operand
    itemsize = layout_of(dst_operand.dtype).itemsize
    dst_address = dst.ctypes.data
    src_address = src.ctypes.data
    if len(shape) == 1 and dst_strides[0] == src_strides[0] == itemsize:
        memmove(
            dst,
            dst_address + dst_offset,
            dst_offset,
            src,
            src_address + src_offset,
            src_offset,
            shape[0] * itemsize,
        )
        return
    if dst_address + dst_offset == src_address + src_offset and dst_strides == src_strides:
        return
    unit = unit_of(
        itemsize, dst_offset, src_offset, dst_address, src_address, *dst_strides, *src_strides
    )
    move(
        units_of(dst, unit),
        dst_offset // unit,
        tuple(s // unit for s in dst_strides),
        units_of(src, unit),
        src_offset // unit,
        tuple(s // unit for s in src_strides),
        shape,
        itemsize // unit,
    )


def memmove(
    dst: np.ndarray,
    dst_start: int,
    dst_offset: int,
    src: np.ndarray,
    src_start: int,
    src_offset: int,
    nbytes: int,
) -> None:
    """One byte range: numpy's copy (memmove, overlap-safe), or the parallel loop when large.

    ``dst_start``/``src_start`` are the ranges' addresses. numpy's single-threaded copy wins
    below ``PARALLEL_MEMMOVE_MIN_BYTES``; above it two threads move the range 1.6x to 1.9x
    faster here.
    Overlapping ranges always go through numpy.
    """
    disjoint = dst_start + nbytes <= src_start or src_start + nbytes <= dst_start
    if nbytes >= PARALLEL_MEMMOVE_MIN_BYTES and disjoint and parallel_allowed(nbytes):
        unit = unit_of(8, dst_start, src_start, nbytes)
        count = nbytes // unit
        move(
            units_of(dst, unit),
            dst_offset // unit,
            (1,),
            units_of(src, unit),
            src_offset // unit,
            (1,),
            (count,),
            1,
        )
        return
    dst[dst_offset : dst_offset + nbytes] = src[src_offset : src_offset + nbytes]


@dataclass(frozen=True)
class Loop:
    """The planes, tiled or DimCounter loop of a same-dtype plan over unit arrays.

    Shape and unit strides as the numba loops take them (int64 arrays, dim 0 fastest; for a
    transpose dim 0 is the destination's contiguous dim; for the planes loop dim 0 is the
    tiny dim and dim 1 the long one), ``tiles`` > 0 for the tiled loop, ``blocks`` > 0 for
    the planes loop (blocks of ``PLANE_BLOCK`` positions of dim 1, times the batch dims).
    """

    shape: np.ndarray
    dst_strides: np.ndarray
    src_strides: np.ndarray
    width: int
    numel: int
    tiles: int
    blocks: int = 0


def plan_loop(
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
    shape: tuple[int, ...],
    width: int,
) -> Loop:
    """Choose between the planes, the tiled and the DimCounter loop (strides in units)."""
    tiny = planes_pair(shape, dst_strides, src_strides, width)
    if tiny is not None:
        order = (*tiny, *range(2, len(shape)))
        shape = tuple(shape[d] for d in order)
        blocks = -(-shape[1] // PLANE_BLOCK) * math.prod(shape[2:])
        return Loop(
            np.asarray(shape, np.int64),
            np.asarray([dst_strides[d] for d in order], np.int64),
            np.asarray([src_strides[d] for d in order], np.int64),
            width,
            math.prod(shape),
            0,
            blocks,
        )
    pair = transposed(shape, dst_strides, src_strides, width)
    if pair == (1, 0):  # make dim 0 the destination's contiguous one; order is free
        shape = (shape[1], shape[0], *shape[2:])
        dst_strides = (dst_strides[1], dst_strides[0], *dst_strides[2:])
        src_strides = (src_strides[1], src_strides[0], *src_strides[2:])
    tiles = 0
    if pair is not None:
        tiles = -(-shape[0] // TILE) * -(-shape[1] // TILE) * math.prod(shape[2:])
    return Loop(
        np.asarray(shape, np.int64),
        np.asarray(dst_strides, np.int64),
        np.asarray(src_strides, np.int64),
        width,
        math.prod(shape),
        tiles,
    )


def run_loop(loop: Loop, dst: np.ndarray, dst_base: int, src: np.ndarray, src_base: int) -> None:
    """Run ``loop`` over unit arrays, in parallel when large enough."""
    loops = load_strided()
    args = (
        dst,
        dst_base,
        loop.dst_strides,
        src,
        src_base,
        loop.src_strides,
        loop.shape,
        loop.width,
    )
    if loop.blocks:
        kind, body, count, tail = "planes", load_planes().copy_planes, loop.blocks, (PLANE_BLOCK,)
    elif loop.tiles:
        kind, body, count, tail = "tiles", loops.copy_tiles, loop.tiles, (TILE,)
    else:
        kind, body, count, tail = "range", loops.copy_range, loop.numel, ()
    if not (
        parallel_allowed(loop.numel)
        and _run_parallel(kind, loop, dst, dst_base, src, src_base, count, tail) is not None
    ):
        body(*args, *tail, 0, count)


def _run_parallel(
    kind: str,
    loop: Loop,
    dst: np.ndarray,
    dst_base: int,
    src: np.ndarray,
    src_base: int,
    count: int,
    tail: tuple,
) -> int | None:
    """``loop``'s C entry (``_replay_copy.strided_entry``) over ``threads.count()`` runs of its
    ``count`` elements, tiles or blocks, on numba's threads; None when it could not run (the
    entry or the parallel loop compiling in the background, another region running)."""
    from torch_mydev.kernels.copy import _replay as replay
    from torch_mydev.kernels.jit.compiler import NotCompiled

    try:
        entry = replay.strided_entry(kind, dst.dtype.type)
    except NotCompiled:
        return None
    unit = dst.itemsize
    dst_address, src_address = dst.ctypes.data + dst_base * unit, src.ctypes.data + src_base * unit
    extents = (dst.shape[0] - dst_base, src.shape[0] - src_base)
    blocks = [
        replay.pack(
            loop.shape,
            *extents,
            loop.width,
            (*tail, begin, end),
            loop.dst_strides,
            loop.src_strides,
        )
        for begin, end in threads.split(count, threads.count())
    ]
    return threads.parallel_calls(
        [[(entry, dst_address, src_address, 0, block.ctypes.data)] for block in blocks]
    )


def move(
    dst: np.ndarray,
    dst_base: int,
    dst_strides: tuple[int, ...],
    src: np.ndarray,
    src_base: int,
    src_strides: tuple[int, ...],
    shape: tuple[int, ...],
    width: int,
) -> None:
    """Run the planes, tiled or DimCounter loop over unit arrays, in parallel when large enough."""
    run_loop(plan_loop(dst_strides, src_strides, shape, width), dst, dst_base, src, src_base)
