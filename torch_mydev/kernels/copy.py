"""Decides how a planned strided copy moves bytes: which loop, which unit, serial or parallel.

``copy_strided`` is the kernel behind ``copy_`` (ATen ``native/Copy.cpp`` ``copy_impl`` ->
``copy_stub`` -> ``cpu/CopyKernel.cpp`` ``copy_kernel``). The caller has already planned the
iteration like TensorIterator (broadcast, dims permuted so dim 0 is fastest, coalesced) and
passes byte offsets and byte strides over whole-storage ``uint8`` buffers. This module:

1. normalises the plan: drops size-1 dims and coalesces again (``coalesce_dimensions``), so
   any valid plan works, and checks every element lies inside its buffer (numba does not);
2. same dtype (``direct_copy_kernel``):

   - both operands contiguous (one dim, strides equal to the itemsize): one numpy slice
     assignment of the byte range -- memmove speed, overlap handled by numpy -- or, from
     ``PARALLEL_MEMMOVE_MIN_BYTES`` and disjoint, the parallel loop over 8-byte units;
   - same memory, same offset, same strides: nothing to move (Copy.cpp's same-data exit);
   - destination contiguous along one dim and source along the other (a transpose), both at
     least ``TILE_MIN_SIDE`` long and ``TILE_MIN_NUMEL`` elements: ``TILE`` x ``TILE`` tiles;
   - otherwise the DimCounter loop (``serial_for_each``);
   - at ``PARALLEL_MIN_NUMEL`` elements or more, the tiled and DimCounter loops run in
     parallel (numba ``prange``, ``at::parallel_for``), one slice of the linear range per
     thread; below it the serial loop, because a parallel launch costs more than it saves.

   Elements move as *units* -- the widest of 8/4/2/1 bytes dividing the itemsize, both
   offsets, all strides and both buffer addresses -- so complex128 moves as two uint64 and
   a misaligned operand still copies exactly.
3. different dtypes (``copy_kernel`` casting branch, ``c10::convert``): chunks of at most
   ``CAST_CHUNK`` elements of the linear iteration range are gathered into a contiguous
   staging buffer (skipped when the source is contiguous), read into a canonical chunk,
   written in the destination dtype (``_convert``), and scattered (skipped when the
   destination is contiguous). Each chunk is read completely before it is written, so an
   operand pair in the same memory with the same layout is safe. From
   ``PARALLEL_MIN_NUMEL`` elements the chunks are shared among threads (the numba loops
   release the GIL); a contiguous cast from an already canonical source stages nothing and
   takes one call per thread. A transposed cast first tiles the source into a dense
   temporary in iteration order, so the cast itself reads contiguously.

Out-of-range floating values to integers are undefined in C++; ``_convert`` documents the
deterministic result used here (torch's result on x86). NaN bit patterns follow torch's
scalar conversions, except float32 -> bfloat16 where torch's vector loop runs (dim-0
strides 2 and 4): there a NaN is 0xFFFF, as torch writes it (see ``_convert``).

For a caller that copies one layout many times, ``prepare_copy`` makes every same-dtype
decision above from the plan alone, once; ``PreparedCopy.run`` then takes two start
addresses and moves the same bytes (the serial loops read raw addresses, so no numpy view
is built per call; a contiguous range below the parallel threshold is one ``memmove``).

Importing this module does not import numba: the loops live in ``_strided`` and
``_convert``, imported on the first copy; ``cache=True`` keeps their machine code between
processes.
"""

from __future__ import annotations

import ctypes
import math
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import torch

from .dtypes import DtypeLayout, layout_of

__all__ = [
    "CAST_CHUNK",
    "PARALLEL_MEMMOVE_MIN_BYTES",
    "PARALLEL_MIN_NUMEL",
    "TILE",
    "TILE_MIN_NUMEL",
    "TILE_MIN_SIDE",
    "PreparedCopy",
    "copy_strided",
    "plan_path",
    "prepare_copy",
]

# Below this many elements a copy runs serially: a numba parallel launch costs tens of
# microseconds, and on this machine (2 cores) a strided gather only gains from 16K elements.
PARALLEL_MIN_NUMEL = 1 << 16
# A contiguous copy of at least this many bytes runs on the parallel loop instead of numpy's
# single-threaded copy: measured crossover between 8 MiB (numpy ahead) and 32 MiB (2 threads
# ahead by 1.7x) on this machine.
PARALLEL_MEMMOVE_MIN_BYTES = 1 << 24
# Tile side, in elements, of the transposed copy: 32..128 measured within noise of each other
# for a 4096 x 4096 float32 transpose (8 and 16 clearly slower, 256 falls out of cache).
TILE = 64
# The tiled path needs both transposed dims at least this long and this many elements; a
# smaller transpose fits in cache and the DimCounter loop is as fast.
TILE_MIN_SIDE = 16
TILE_MIN_NUMEL = 1 << 14
# Elements per cast chunk: the canonical chunk (up to 16 bytes an element) stays in L2.
CAST_CHUNK = 1 << 15

_UNIT_LANES = {
    8: np.dtype(np.uint64),
    4: np.dtype(np.uint32),
    2: np.dtype(np.uint16),
    1: np.dtype(np.uint8),
}

_loops: ModuleType | None = None
_convert: ModuleType | None = None
_parallel_lock = threading.Lock()
_parallel_pid: int | None = None
_pool: ThreadPoolExecutor | None = None
_pool_key: tuple[int, int] | None = None


def _load() -> tuple[ModuleType, ModuleType]:
    """The numba modules, imported on first use (importing the package must not import numba).

    ``_strided`` comes with the first copy; ``_convert`` with the first cast (a same-dtype
    copy does not pay for importing the conversion loops).
    """
    return _load_strided(), _load_convert()


def _load_strided() -> ModuleType:
    global _loops
    if _loops is None:
        from . import load_numba_modules

        (_loops,) = load_numba_modules("_strided")
    return _loops


def _load_convert() -> ModuleType:
    global _convert
    if _convert is None:
        from . import load_numba_modules

        (_convert,) = load_numba_modules("_convert")
    return _convert


def copy_strided(
    dst: np.ndarray,
    dst_offset: int,
    dst_dtype: torch.dtype,
    src: np.ndarray,
    src_offset: int,
    src_dtype: torch.dtype,
    shape: tuple[int, ...],
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
) -> None:
    """Write ``convert(src element)`` to every destination element of a planned iteration.

    Mirrors ATen ``copy_kernel`` (``cpu/CopyKernel.cpp``) over a TensorIterator plan: ``shape``
    and the byte strides are fastest dim first; ``src_strides`` may hold 0 (broadcast). ``dst``
    and ``src`` are 1-D ``uint8`` arrays over whole storages and may share memory when the
    layouts are identical or do not overlap. Values convert as ``src.to(dst_dtype)`` does on
    CPU (``c10::convert``).
    """
    shape = tuple(int(n) for n in shape)
    dst_strides = tuple(int(s) for s in dst_strides)
    src_strides = tuple(int(s) for s in src_strides)
    dst_offset = int(dst_offset)
    src_offset = int(src_offset)
    dst_layout = layout_of(dst_dtype)
    src_layout = layout_of(src_dtype)
    _check_buffer("dst", dst, writable=True)
    _check_buffer("src", src, writable=False)
    if not len(shape) == len(dst_strides) == len(src_strides):
        raise ValueError(
            f"shape {shape}, dst_strides {dst_strides} and src_strides {src_strides} "
            "must have the same length"
        )
    if any(n < 0 for n in shape):
        raise ValueError(f"negative size in shape {shape}")
    if math.prod(shape) == 0:
        return
    scalar = not shape  # a 0-dim copy
    shape, dst_strides, src_strides = _coalesce(shape, dst_strides, src_strides)
    if not shape:  # a single element
        shape, dst_strides, src_strides = (1,), (dst_layout.itemsize,), (src_layout.itemsize,)
    vector_nan = not scalar and _vector_bfloat16_nan(src_dtype, dst_dtype, dst_strides, src_strides)
    _check_extent("dst", dst, dst_offset, dst_layout.itemsize, shape, dst_strides)
    _check_extent("src", src, src_offset, src_layout.itemsize, shape, src_strides)
    if dst_dtype == src_dtype:
        _copy_same(
            dst, dst_offset, src, src_offset, dst_layout.itemsize, shape, dst_strides, src_strides
        )
    else:
        _copy_cast(
            dst,
            dst_offset,
            dst_layout,
            src,
            src_offset,
            src_layout,
            shape,
            dst_strides,
            src_strides,
            vector_nan,
        )


def _vector_bfloat16_nan(
    src_dtype: torch.dtype,
    dst_dtype: torch.dtype,
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
) -> bool:
    """Whether torch writes this float32 -> bfloat16 copy with its vector loop (NaN 0xFFFF).

    ``reduced_float_type_copy`` in ``cpu/CopyKernel.cpp``: float32 source, bfloat16
    destination, destination stride 2 along dim 0 and source stride 4 (stride 0 also takes
    that kernel, but converts its one value with the scalar ``BFloat16(float)``). Judged on
    the coalesced plan, whose dim 0 is TensorIterator's when the caller's order is; a 0-dim
    copy has no dim 0 and converts as a scalar (the caller checks that).
    """
    return (
        src_dtype == torch.float32
        and dst_dtype == torch.bfloat16
        and dst_strides[0] == 2
        and src_strides[0] == 4
    )


def plan_path(
    itemsize: int,
    shape: tuple[int, ...],
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
) -> str:
    """Name the loop a same-dtype copy of this plan takes (for tests and ``explain``).

    One of ``"empty"``, ``"contiguous"``, ``"contiguous-parallel"``, ``"tiled"``,
    ``"tiled-parallel"``, ``"strided"``, ``"strided-parallel"``; assumes disjoint, aligned
    buffers in the process that runs parallel loops.
    """
    numel = math.prod(shape)
    if numel == 0:
        return "empty"
    shape, dst_strides, src_strides = _coalesce(
        tuple(shape), tuple(dst_strides), tuple(src_strides)
    )
    if not shape or (len(shape) == 1 and dst_strides[0] == src_strides[0] == itemsize):
        large = numel * itemsize >= PARALLEL_MEMMOVE_MIN_BYTES
        return "contiguous-parallel" if large else "contiguous"
    parallel = "-parallel" if numel >= PARALLEL_MIN_NUMEL else ""
    if _transposed(shape, dst_strides, src_strides, itemsize) is not None:
        return "tiled" + parallel
    return "strided" + parallel


# ---- prepared same-dtype copies -------------------------------------------------------------


class PreparedCopy:
    """A same-dtype plan with every decision ``copy_strided`` makes before it sees memory.

    Made by ``prepare_copy``: the plan is checked and normalised once (size-1 dims dropped,
    neighbours coalesced), the unit is the widest dividing the itemsize and the strides, and
    the loop is chosen (one byte range, tiled or DimCounter). ``run`` then needs only raw
    memory, so an op that keeps one per layout does O(1) Python work per call; the bytes
    moved are those ``copy_strided`` moves for the same plan and memory.
    """

    __slots__ = (
        "dst_extent",
        "loop",
        "nbytes",
        "numel",
        "same_strides",
        "serial",
        "serial_args",
        "src_extent",
        "unit",
    )

    def __init__(
        self,
        numel: int,
        unit: int,
        nbytes: int,
        loop: _Loop | None,
        dst_extent: int,
        src_extent: int,
        same_strides: bool,
    ) -> None:
        self.numel = numel  # elements copied
        self.unit = unit  # start addresses must be multiples of it (1: any)
        self.nbytes = nbytes  # the byte range of a contiguous copy, else 0
        self.loop = loop  # the strided loop, None for a contiguous copy
        self.dst_extent = dst_extent  # bytes from the first element to the end of the last
        self.src_extent = src_extent
        self.same_strides = same_strides
        # The serial loop as its compiled entry point (``_entry.entry_point``) and the
        # arguments after the two addresses; None when the copy is large enough to run in
        # parallel, or moves nothing.
        self.serial: Callable | None = None
        self.serial_args: tuple = ()
        if numel == 0:
            return
        loops = _load_strided()
        if loop is None:
            if nbytes < PARALLEL_MEMMOVE_MIN_BYTES:
                self.serial_args = (nbytes,)
                self.serial = _entry_of(loops.move_bytes_at, 0, 0, *self.serial_args)
        elif loop.numel < PARALLEL_MIN_NUMEL:
            tail = (TILE, 0, loop.tiles) if loop.tiles else (0, loop.numel)
            self.serial_args = (
                dst_extent // unit,
                src_extent // unit,
                loop.dst_strides,
                loop.src_strides,
                loop.shape,
                loop.width,
                _LANE_TOKENS[unit],
                *tail,
            )
            kernel = loops.copy_tiles_at if loop.tiles else loops.copy_range_at
            self.serial = _entry_of(kernel, 0, 0, *self.serial_args)

    def run(self, dst_start: int, dst_bytes: int, src_start: int, src_bytes: int) -> bool:
        """Copy between two host memories: the addresses of element 0 of each operand, and the
        bytes each buffer holds from there on.

        The operands may share memory when the layouts are identical or do not overlap, as
        for ``copy_strided``. Returns False, having moved nothing, when an address is not a
        multiple of the plan's unit (``copy_strided`` then picks a smaller unit); raises
        ``IndexError`` when the plan reaches past the end of a buffer.
        """
        if self.dst_extent > dst_bytes:
            raise IndexError(f"dst: the plan reaches byte {self.dst_extent} of {dst_bytes}")
        if self.src_extent > src_bytes:
            raise IndexError(f"src: the plan reaches byte {self.src_extent} of {src_bytes}")
        if (dst_start | src_start) % self.unit:
            return False
        if self.numel == 0 or (self.same_strides and dst_start == src_start):
            return True  # nothing to move (Copy.cpp's same-data exit, for a strided plan)
        serial = self.serial
        if serial is not None:
            serial(dst_start, src_start, *self.serial_args)
            return True
        loop = self.loop
        if loop is None:
            nbytes = self.nbytes
            dst = _lanes_at(dst_start, nbytes, 1)
            _memmove(dst, dst_start, 0, _lanes_at(src_start, nbytes, 1), src_start, 0, nbytes)
            return True
        dst = _lanes_at(dst_start, self.dst_extent, self.unit)
        src = _lanes_at(src_start, self.src_extent, self.unit)
        _run_loop(loop, dst, 0, src, 0)
        return True


def prepare_copy(
    dtype: torch.dtype,
    shape: tuple[int, ...],
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
) -> PreparedCopy:
    """``copy_strided``'s decisions for a same-dtype plan (byte strides, dim 0 fastest).

    Raises as ``copy_strided`` does for a plan it refuses (lengths differ, negative sizes or
    strides); whether the plan fits the buffers is checked by ``PreparedCopy.run``.
    """
    itemsize = layout_of(dtype).itemsize
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
    for name, strides in (("dst", dst_strides), ("src", src_strides)):
        if any(s < 0 for s in strides):
            raise ValueError(f"{name}: negative stride ({strides})")
    numel = math.prod(shape)
    if numel == 0:  # nothing to move: a contiguous copy of no bytes
        return PreparedCopy(0, 1, 0, None, 0, 0, True)
    shape, dst_strides, src_strides = _coalesce(shape, dst_strides, src_strides)
    if not shape:  # a single element
        shape, dst_strides, src_strides = (1,), (itemsize,), (itemsize,)
    dst_extent = sum((n - 1) * s for n, s in zip(shape, dst_strides, strict=True)) + itemsize
    src_extent = sum((n - 1) * s for n, s in zip(shape, src_strides, strict=True)) + itemsize
    same = dst_strides == src_strides
    if len(shape) == 1 and dst_strides[0] == src_strides[0] == itemsize:
        return PreparedCopy(numel, 1, numel * itemsize, None, dst_extent, src_extent, same)
    unit = _unit(itemsize, *dst_strides, *src_strides)
    loop = _plan_loop(
        tuple(s // unit for s in dst_strides),
        tuple(s // unit for s in src_strides),
        shape,
        itemsize // unit,
    )
    return PreparedCopy(numel, unit, 0, loop, dst_extent, src_extent, same)


# Arrays of each unit type, for the loops over raw addresses to read the type from.
_LANE_TOKENS = {unit: np.zeros(1, lane) for unit, lane in _UNIT_LANES.items()}
_LANE_CTYPES = {8: ctypes.c_uint64, 4: ctypes.c_uint32, 2: ctypes.c_uint16, 1: ctypes.c_uint8}


def _entry_of(kernel, *args: object) -> Callable:
    from ._entry import entry_point  # imports numba

    return entry_point(kernel, *args)


def _lanes_at(address: int, nbytes: int, unit: int) -> np.ndarray:
    """The whole units of ``nbytes`` host bytes at ``address`` as a 1-D numpy array (no copy)."""
    count = nbytes // unit
    return np.frombuffer((_LANE_CTYPES[unit] * count).from_address(address), _UNIT_LANES[unit])


# ---- plan normalisation ---------------------------------------------------------------------


def _coalesce(
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


def _check_buffer(name: str, buf: np.ndarray, writable: bool) -> None:
    if not isinstance(buf, np.ndarray) or buf.dtype != np.uint8 or buf.ndim != 1:
        raise TypeError(f"{name} must be a 1-D numpy uint8 array, got {type(buf).__name__}")
    if not buf.flags.c_contiguous:
        raise ValueError(f"{name} must be contiguous")
    if writable and not buf.flags.writeable:
        raise ValueError(f"{name} is read-only")


def _check_extent(
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


def _unit(itemsize: int, *values: int) -> int:
    """The widest of 8/4/2/1 bytes dividing the itemsize and every offset, stride, address."""
    g = itemsize
    for v in values:
        g = math.gcd(g, v)
    return min(8, g & -g)


def _units(buf: np.ndarray, unit: int) -> np.ndarray:
    """View a byte buffer as unit lanes (a trailing partial unit holds no whole element)."""
    return buf[: buf.shape[0] - buf.shape[0] % unit].view(_UNIT_LANES[unit])


def _transposed(
    shape: tuple[int, ...],
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
    itemsize: int,
    src_itemsize: int | None = None,
) -> tuple[int, int] | None:
    """Dims ``(a, b)`` with dst contiguous along ``a`` and src along ``b``, if worth tiling."""
    src_itemsize = itemsize if src_itemsize is None else src_itemsize
    if len(shape) < 2 or math.prod(shape) < TILE_MIN_NUMEL:
        return None
    for a, b in ((0, 1), (1, 0)):
        if (
            dst_strides[a] == itemsize
            and src_strides[b] == src_itemsize
            and src_strides[a] != src_itemsize
            and shape[a] >= TILE_MIN_SIDE
            and shape[b] >= TILE_MIN_SIDE
        ):
            return a, b
    return None


def _dense_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Byte strides of a dense array in iteration order (dim 0 fastest)."""
    strides = [itemsize]
    for n in shape[:-1]:
        strides.append(strides[-1] * n)
    return tuple(strides)


def _parallel_allowed(numel: int) -> bool:
    """Parallel above the threshold, in the process that first went parallel only.

    numba's OpenMP layer terminates a forked child that launches a parallel region after its
    parent did, so a child (a DataLoader worker, say) copies serially.
    """
    global _parallel_pid
    if numel < PARALLEL_MIN_NUMEL:
        return False
    if _parallel_pid is None:
        _parallel_pid = os.getpid()
    return _parallel_pid == os.getpid()


# ---- same dtype -----------------------------------------------------------------------------


def _copy_same(
    dst: np.ndarray,
    dst_offset: int,
    src: np.ndarray,
    src_offset: int,
    itemsize: int,
    shape: tuple[int, ...],
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
) -> None:
    """``direct_copy_kernel``: move bytes, choosing the contiguous, tiled or DimCounter loop."""
    dst_address = dst.ctypes.data
    src_address = src.ctypes.data
    if len(shape) == 1 and dst_strides[0] == src_strides[0] == itemsize:
        _memmove(
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
    unit = _unit(
        itemsize, dst_offset, src_offset, dst_address, src_address, *dst_strides, *src_strides
    )
    _move(
        _units(dst, unit),
        dst_offset // unit,
        tuple(s // unit for s in dst_strides),
        _units(src, unit),
        src_offset // unit,
        tuple(s // unit for s in src_strides),
        shape,
        itemsize // unit,
    )


def _memmove(
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
    below ``PARALLEL_MEMMOVE_MIN_BYTES``; above it two threads move 64 MiB 1.6x faster here.
    Overlapping ranges always go through numpy.
    """
    disjoint = dst_start + nbytes <= src_start or src_start + nbytes <= dst_start
    if nbytes >= PARALLEL_MEMMOVE_MIN_BYTES and disjoint and _parallel_allowed(nbytes):
        unit = _unit(8, dst_start, src_start, nbytes)
        count = nbytes // unit
        _move(
            _units(dst, unit),
            dst_offset // unit,
            (1,),
            _units(src, unit),
            src_offset // unit,
            (1,),
            (count,),
            1,
        )
        return
    dst[dst_offset : dst_offset + nbytes] = src[src_offset : src_offset + nbytes]


@dataclass(frozen=True)
class _Loop:
    """The tiled or DimCounter loop of a same-dtype plan over unit arrays, chosen from the plan.

    Shape and unit strides as the numba loops take them (int64 arrays, dim 0 fastest; for a
    transpose dim 0 is the destination's contiguous dim), ``tiles`` > 0 for the tiled loop.
    """

    shape: np.ndarray
    dst_strides: np.ndarray
    src_strides: np.ndarray
    width: int
    numel: int
    tiles: int


def _plan_loop(
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
    shape: tuple[int, ...],
    width: int,
) -> _Loop:
    """Choose between the tiled and the DimCounter loop (strides in units)."""
    pair = _transposed(shape, dst_strides, src_strides, width)
    if pair == (1, 0):  # make dim 0 the destination's contiguous one; order is free
        shape = (shape[1], shape[0], *shape[2:])
        dst_strides = (dst_strides[1], dst_strides[0], *dst_strides[2:])
        src_strides = (src_strides[1], src_strides[0], *src_strides[2:])
    tiles = 0
    if pair is not None:
        tiles = -(-shape[0] // TILE) * -(-shape[1] // TILE) * math.prod(shape[2:])
    return _Loop(
        np.asarray(shape, np.int64),
        np.asarray(dst_strides, np.int64),
        np.asarray(src_strides, np.int64),
        width,
        math.prod(shape),
        tiles,
    )


def _run_loop(loop: _Loop, dst: np.ndarray, dst_base: int, src: np.ndarray, src_base: int) -> None:
    """Run ``loop`` over unit arrays, in parallel when large enough."""
    loops = _load_strided()
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
    if _parallel_allowed(loop.numel) and _parallel_lock.acquire(blocking=False):
        try:
            slices = loops.numba_threads()
            if loop.tiles:
                loops.copy_tiles_parallel(*args, TILE, slices)
            else:
                loops.copy_parallel(*args, loop.numel, slices)
        finally:
            _parallel_lock.release()
        return
    if loop.tiles:
        loops.copy_tiles(*args, TILE, 0, loop.tiles)
    else:
        loops.copy_range(*args, 0, loop.numel)


def _move(
    dst: np.ndarray,
    dst_base: int,
    dst_strides: tuple[int, ...],
    src: np.ndarray,
    src_base: int,
    src_strides: tuple[int, ...],
    shape: tuple[int, ...],
    width: int,
) -> None:
    """Run the tiled or DimCounter loop over unit arrays, in parallel when large enough."""
    _run_loop(_plan_loop(dst_strides, src_strides, shape, width), dst, dst_base, src, src_base)


# ---- different dtypes -----------------------------------------------------------------------


def _copy_cast(
    dst: np.ndarray,
    dst_offset: int,
    dst_layout: DtypeLayout,
    src: np.ndarray,
    src_offset: int,
    src_layout: DtypeLayout,
    shape: tuple[int, ...],
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
    vector_nan: bool,
) -> None:
    """``copy_kernel``'s casting branch: gather, read, write, scatter, chunk by chunk.

    A transposed pair first moves the source through the tiled loop into a contiguous
    temporary in iteration order, then casts that into the destination: the chunked gather
    alone would read the source with a large stride.
    """
    loops = _load_strided()
    numel = math.prod(shape)
    if (
        _transposed(shape, dst_strides, src_strides, dst_layout.itemsize, src_layout.itemsize)
        is not None
    ):
        packed = _dense_strides(shape, src_layout.itemsize)
        temporary = np.empty(numel * src_layout.itemsize, np.uint8)
        _copy_same(temporary, 0, src, src_offset, src_layout.itemsize, shape, packed, src_strides)
        shape, dst_strides, packed = _coalesce(shape, dst_strides, packed)
        _copy_cast(
            dst,
            dst_offset,
            dst_layout,
            temporary,
            0,
            src_layout,
            shape,
            dst_strides,
            packed,
            vector_nan,
        )
        return
    workers = 1
    if _parallel_allowed(numel):
        workers = min(loops.numba_threads(), -(-numel // CAST_CHUNK))
    chunk = min(CAST_CHUNK, numel)
    if _unstaged(
        dst, dst_offset, dst_layout, src, src_offset, src_layout, shape, dst_strides, src_strides
    ):
        chunk = -(-numel // workers)  # nothing to stage: one call per worker
    chunks = -(-numel // chunk)
    operands = (
        dst,
        dst_offset,
        dst_layout,
        src,
        src_offset,
        src_layout,
        shape,
        dst_strides,
        src_strides,
        chunk,
        vector_nan,
    )
    if workers <= 1:
        _cast_range(*operands, 0, numel)
        return
    # The numba loops release the GIL: threads, each on its own run of whole chunks.
    bounds = [min(numel, (w * chunks // workers) * chunk) for w in range(workers + 1)]
    pool = _thread_pool(workers)
    futures = [
        pool.submit(_cast_range, *operands, bounds[w], bounds[w + 1]) for w in range(workers)
    ]
    for future in futures:
        future.result()


def _unstaged(
    dst: np.ndarray,
    dst_offset: int,
    dst_layout: DtypeLayout,
    src: np.ndarray,
    src_offset: int,
    src_layout: DtypeLayout,
    shape: tuple[int, ...],
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
) -> bool:
    """Whether a cast needs no staging buffer: both sides contiguous and aligned, and the
    source already canonical (int64, float32, float64, complex)."""
    return (
        len(shape) == 1
        and dst_strides[0] == dst_layout.itemsize
        and src_strides[0] == src_layout.itemsize
        and (dst.ctypes.data + dst_offset) % dst_layout.lane.itemsize == 0
        and (src.ctypes.data + src_offset) % src_layout.lane.itemsize == 0
        and (src_layout.kind in ("float", "complex") or src_layout.lane == np.int64)
    )


def _cast_range(
    dst: np.ndarray,
    dst_offset: int,
    dst_layout: DtypeLayout,
    src: np.ndarray,
    src_offset: int,
    src_layout: DtypeLayout,
    shape: tuple[int, ...],
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
    chunk: int,
    vector_nan: bool,
    begin: int,
    end: int,
) -> None:
    """Cast iteration indices ``[begin, end)`` chunk by chunk, with private staging buffers."""
    loops, convert = _load()
    src_side = _Side(src, src_offset, src_layout, shape, src_strides, chunk)
    dst_side = _Side(dst, dst_offset, dst_layout, shape, dst_strides, chunk)
    reader = _reader(src_layout, chunk, convert)
    writer = _writer(dst_layout, src_layout, convert, vector_nan)
    for first in range(begin, end, chunk):
        last = min(first + chunk, end)
        source = src_side.gather(loops, first, last)
        canonical = reader(source, last - first)
        target = dst_side.target(first, last)
        writer(target, canonical, last - first)
        dst_side.scatter(loops, first, last)


def _thread_pool(workers: int) -> ThreadPoolExecutor:
    """This process's cast threads (a forked child gets its own: threads do not survive a fork)."""
    global _pool, _pool_key
    key = (os.getpid(), workers)
    if _pool is None or _pool_key != key:
        _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mydev-cast")
        _pool_key = key
    return _pool


class _Side:
    """One operand of a cast: a direct typed view when contiguous, else a staging buffer."""

    def __init__(
        self,
        buf: np.ndarray,
        offset: int,
        layout: DtypeLayout,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        chunk: int,
    ) -> None:
        self.buf = buf
        self.offset = offset
        self.layout = layout
        address = buf.ctypes.data
        itemsize = layout.itemsize
        self.direct = (
            len(shape) == 1
            and strides[0] == itemsize
            and (address + offset) % layout.lane.itemsize == 0
        )
        if self.direct:
            return
        unit = _unit(itemsize, offset, address, *strides)
        self.width = itemsize // unit
        self.units = _units(buf, unit)
        self.base = offset // unit
        self.strides = np.asarray([s // unit for s in strides], np.int64)
        self.shape = np.asarray(shape, np.int64)
        self.stage_strides = np.asarray(_dense_strides(shape, self.width), np.int64)
        self.stage = np.empty(chunk * itemsize, np.uint8)
        self.stage_units = self.stage.view(_UNIT_LANES[unit])
        self.stage_lanes = self.stage.view(layout.lane)

    def _direct(self, begin: int, end: int) -> np.ndarray:
        size = self.layout.itemsize
        start = self.offset + begin * size
        return self.buf[start : self.offset + end * size].view(self.layout.lane)

    def gather(self, loops: ModuleType, begin: int, end: int) -> np.ndarray:
        """Source lanes of iteration indices ``[begin, end)``, contiguous."""
        if self.direct:
            return self._direct(begin, end)
        loops.copy_range(
            self.stage_units,
            -begin * self.width,
            self.stage_strides,
            self.units,
            self.base,
            self.strides,
            self.shape,
            self.width,
            begin,
            end,
        )
        return self.stage_lanes[: (end - begin) * self.layout.lanes]

    def target(self, begin: int, end: int) -> np.ndarray:
        """Destination lanes to write for ``[begin, end)``: the storage itself or the stage."""
        if self.direct:
            return self._direct(begin, end)
        return self.stage_lanes[: (end - begin) * self.layout.lanes]

    def scatter(self, loops: ModuleType, begin: int, end: int) -> None:
        """Move the staged destination lanes of ``[begin, end)`` to their storage places."""
        if self.direct:
            return
        loops.copy_range(
            self.units,
            self.base,
            self.strides,
            self.stage_units,
            -begin * self.width,
            self.stage_strides,
            self.shape,
            self.width,
            begin,
            end,
        )


def _reader(layout: DtypeLayout, chunk: int, convert: ModuleType):
    """Source lanes -> ``(canonical lanes, step)``: int64, float32/64, or complex pairs."""
    if layout.kind in ("bool", "int") and layout.lane != np.int64:
        out = np.empty(chunk, np.int64)
        is_bool = layout.kind == "bool"

        def read_integral(lanes: np.ndarray, n: int) -> tuple[np.ndarray, int]:
            convert.read_integral(out, lanes, is_bool, n)
            return out[:n], 1

        return read_integral
    if layout.kind == "reduced":
        bits = np.empty(chunk, np.uint32)
        is_bfloat16 = layout.dtype == torch.bfloat16

        def read_reduced(lanes: np.ndarray, n: int) -> tuple[np.ndarray, int]:
            convert.read_reduced(bits, lanes, is_bfloat16, n)
            return bits[:n].view(np.float32), 1

        return read_reduced
    step = layout.lanes

    def read_as_is(lanes: np.ndarray, n: int) -> tuple[np.ndarray, int]:
        return lanes, step

    return read_as_is


def _writer(dst: DtypeLayout, src: DtypeLayout, convert: ModuleType, vector_nan: bool):
    """``(destination lanes, (canonical, step), n)`` -> None, for the destination dtype."""
    if dst.kind == "bool":

        def write_bool(target: np.ndarray, canonical: tuple[np.ndarray, int], n: int) -> None:
            convert.write_bool(target, canonical[0], canonical[1], n)

        return write_bool
    if dst.kind == "int":
        if src.kind in ("bool", "int"):

            def write_from_int(
                target: np.ndarray, canonical: tuple[np.ndarray, int], n: int
            ) -> None:
                convert.write_integral_from_int(target, canonical[0], n)

            return write_from_int
        route = convert.VIA_INT64 if dst.lane in (np.uint8, np.int64) else convert.VIA_INT32

        def write_from_float(target: np.ndarray, canonical: tuple[np.ndarray, int], n: int) -> None:
            convert.write_integral_from_float(target, canonical[0], canonical[1], route, n)

        return write_from_float
    if dst.kind == "reduced":
        is_bfloat16 = dst.dtype == torch.bfloat16
        nan_bits = convert.BFLOAT16_VECTOR_NAN if vector_nan else convert.BFLOAT16_NAN

        def write_reduced(target: np.ndarray, canonical: tuple[np.ndarray, int], n: int) -> None:
            convert.write_reduced(target, canonical[0], canonical[1], is_bfloat16, nan_bits, n)

        return write_reduced
    dst_step = dst.lanes

    def write_floating(target: np.ndarray, canonical: tuple[np.ndarray, int], n: int) -> None:
        convert.write_floating(target, dst_step, canonical[0], canonical[1], n)

    return write_floating
