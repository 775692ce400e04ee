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
   - such a transpose with one dim of at most ``PLANES_MAX`` elements and the other of at
     least ``PLANES_MIN_LONG`` (NCHW <-> channels_last with C <= 8): the planes loop
     (``copy._planes``), blocks of the long dim, every position moving all its planes;
   - otherwise the DimCounter loop (``serial_for_each``);
   - at ``PARALLEL_MIN_NUMEL`` elements or more, the planes, tiled and DimCounter loops run in
     parallel (numba ``prange``, ``at::parallel_for``), one slice of the linear range per
     thread; below it the serial loop, because a parallel launch costs more than it saves.

   Elements move as *units* -- the widest of 8/4/2/1 bytes dividing the itemsize, both
   offsets, all strides and both buffer addresses -- so complex128 moves as two uint64 and
   a misaligned operand still copies exactly.
3. different dtypes (``copy_kernel`` casting branch, ``c10::convert``): chunks of at most
   ``CAST_CHUNK`` elements of the linear iteration range are gathered into a contiguous
   staging buffer (skipped when the source is contiguous), read into a canonical chunk,
   written in the destination dtype (``cast.converters`` picks the ``_convert`` loops),
   and scattered (skipped when the
   destination is contiguous). Each chunk is read completely before it is written, so an
   operand pair in the same memory with the same layout is safe. From
   ``PARALLEL_MIN_NUMEL`` elements the chunks are shared among threads (the numba loops
   release the GIL); a contiguous cast from an already canonical source stages nothing and
   takes one call per thread. A transposed cast first tiles the source (or, with a tiny
   dim 0, runs the planes loop) into a dense temporary in iteration order, so the cast
   itself reads contiguously.

Out-of-range floating values to integers are undefined in C++; ``_convert`` documents the
deterministic result used here (torch's result on x86). NaN bit patterns follow torch's
scalar conversions, except float32 -> bfloat16 where torch's vector loop runs (dim-0
strides 2 and 4): there a NaN is 0xFFFF, as torch writes it (see ``_convert``).

For a caller that copies one layout many times, ``prepare_copy`` (``copy.prepared``) makes
every same-dtype decision above from the plan alone, once. The same-dtype loops and the
thresholds live in ``copy.loops``; this module is ``copy_strided`` and the casting branch.

Importing this module does not import numba: the loops live in ``_strided`` and
``_convert``, imported on the first copy; ``cache=True`` keeps their machine code between
processes.
"""

from __future__ import annotations

import math
from types import ModuleType

import numpy as np
import torch

from torch_mydev.kernels import numba_module
from torch_mydev.kernels.copy.cast import converters
from torch_mydev.kernels.copy.loops import (
    CAST_CHUNK,
    PARALLEL_MEMMOVE_MIN_BYTES,
    PARALLEL_MIN_NUMEL,
    TILE,
    TILE_MIN_NUMEL,
    TILE_MIN_SIDE,
    UNIT_LANES,
    check_buffer,
    check_extent,
    check_plan,
    coalesce,
    copy_same,
    dense_strides,
    load_strided,
    parallel_allowed,
    planes_pair,
    transposed,
    unit_of,
    units_of,
)
from torch_mydev.kernels.copy.prepared import PreparedCopy, plan_path, prepare_copy
from torch_mydev.kernels.copy.prepared_cast import PreparedCast, prepare_cast
from torch_mydev.kernels.dtypes import layout_of
from torch_mydev.kernels.operand import Operand
from torch_mydev.kernels.parallel import threads

__all__ = [
    "CAST_CHUNK",
    "PARALLEL_MEMMOVE_MIN_BYTES",
    "PARALLEL_MIN_NUMEL",
    "TILE",
    "TILE_MIN_NUMEL",
    "TILE_MIN_SIDE",
    "Operand",
    "PreparedCast",
    "PreparedCopy",
    "copy_strided",
    "plan_path",
    "prepare_cast",
    "prepare_copy",
]


def _load() -> tuple[ModuleType, ModuleType]:
    """The numba modules, imported on first use (importing the package must not import numba).

    ``_strided`` comes with the first copy; ``_convert`` with the first cast (a same-dtype
    copy does not pay for importing the conversion loops).
    """
    return load_strided(), _load_convert()


def _load_convert() -> ModuleType:
    return numba_module("copy._convert")


def copy_strided(dst: Operand, src: Operand, shape: tuple[int, ...]) -> None:
    """Write ``convert(src element)`` to every destination element of a planned iteration.

    Mirrors ATen ``copy_kernel`` (``cpu/CopyKernel.cpp``) over a TensorIterator plan: ``shape``
    and the operands' byte strides are fastest dim first; ``src.strides`` may hold 0
    (broadcast). ``dst.data`` and ``src.data`` are 1-D ``uint8`` arrays over whole storages
    and may share memory when the layouts are identical or do not overlap. Values convert as
    ``src.to(dst.dtype)`` does on CPU (``c10::convert``). A same-dtype copy moves bytes, also
    for a bool byte other than 0/1 (undefined behaviour in C++: CPU's direct copy writes 1
    there, its transposed copy moves the byte); a cast reads any nonzero bool byte as true.
    """
    shape, dst_strides, src_strides = check_plan(shape, dst.strides, src.strides)
    dst_layout = layout_of(dst.dtype)
    src_layout = layout_of(src.dtype)
    if dst.dtype != src.dtype and "bits" in (dst_layout.kind, src_layout.kind):
        raise TypeError(f"mydev kernels do not cast {src.dtype} to {dst.dtype} (bytes only move)")
    check_buffer("dst", dst.data, writable=True)
    check_buffer("src", src.data, writable=False)
    if math.prod(shape) == 0:
        return
    scalar = not shape  # a 0-dim copy
    shape, dst_strides, src_strides = coalesce(shape, dst_strides, src_strides)
    if not shape:  # a single element
        shape, dst_strides, src_strides = (1,), (dst_layout.itemsize,), (src_layout.itemsize,)
    vector_nan = not scalar and _vector_bfloat16_nan(src.dtype, dst.dtype, dst_strides, src_strides)
    dst = Operand(dst.data, int(dst.offset), dst.dtype, dst_strides)
    src = Operand(src.data, int(src.offset), src.dtype, src_strides)
    check_extent("dst", dst.data, dst.offset, dst_layout.itemsize, shape, dst_strides)
    check_extent("src", src.data, src.offset, src_layout.itemsize, shape, src_strides)
    if dst.dtype == src.dtype:
        copy_same(dst, src, shape)
    else:
        _copy_cast(dst, src, shape, vector_nan)


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


# ---- different dtypes -----------------------------------------------------------------------


def _copy_cast(dst: Operand, src: Operand, shape: tuple[int, ...], vector_nan: bool) -> None:
    """``copy_kernel``'s casting branch: gather, read, write, scatter, chunk by chunk.

    A transposed pair (tiles, or planes with the tiny dim first: NCHW -> channels_last)
    first moves the source through the tiled or planes loop into a contiguous temporary in
    iteration order, then casts that into the destination: the chunked gather alone would
    read the source with a large stride, or in runs of a few elements.
    """
    numel = math.prod(shape)
    src_itemsize = layout_of(src.dtype).itemsize
    dst_itemsize = layout_of(dst.dtype).itemsize
    pair = transposed(shape, dst.strides, src.strides, dst_itemsize, src_itemsize)
    if pair is None:
        tiny = planes_pair(shape, dst.strides, src.strides, dst_itemsize, src_itemsize)
        # Only when the tiny dim is dim 0: the gather below runs along dim 0, a few elements
        # at a time there; with the long dim first it reads long runs and a temporary is
        # one more pass (channels_last -> NCHW casts ran 3x slower through it).
        pair = tiny if tiny is not None and tiny[0] == 0 else None
    if pair is not None:
        packed = dense_strides(shape, src_itemsize)
        temporary = Operand(np.empty(numel * src_itemsize, np.uint8), 0, src.dtype, packed)
        copy_same(temporary, src, shape)
        shape, dst_strides, packed = coalesce(shape, dst.strides, packed)
        dst = dst._replace(strides=dst_strides)
        _copy_cast(dst, temporary._replace(strides=packed), shape, vector_nan)
        return
    workers = 1
    if parallel_allowed(numel):
        workers = min(threads.count(), -(-numel // CAST_CHUNK))
    chunk = min(CAST_CHUNK, numel)
    if _unstaged(dst, src, shape):
        chunk = -(-numel // workers)  # nothing to stage: one call per worker
    chunks = -(-numel // chunk)
    # The numba loops release the GIL: threads, each on its own run of whole chunks.
    threads.parallel_for(
        chunks,
        lambda first, last: _cast_range(
            dst, src, shape, chunk, vector_nan, first * chunk, min(numel, last * chunk)
        ),
        workers,
    )


def _unstaged(dst: Operand, src: Operand, shape: tuple[int, ...]) -> bool:
    """Whether a cast needs no staging buffer: both sides contiguous and aligned, and the
    source already canonical (int64, uint64, float32, float64, complex)."""
    dst_layout, src_layout = layout_of(dst.dtype), layout_of(src.dtype)
    return (
        len(shape) == 1
        and dst.strides[0] == dst_layout.itemsize
        and src.strides[0] == src_layout.itemsize
        and (dst.data.ctypes.data + dst.offset) % dst_layout.lane.itemsize == 0
        and (src.data.ctypes.data + src.offset) % src_layout.lane.itemsize == 0
        and (src_layout.kind in ("float", "complex") or src_layout.lane in (np.int64, np.uint64))
    )


def _cast_range(
    dst: Operand,
    src: Operand,
    shape: tuple[int, ...],
    chunk: int,
    vector_nan: bool,
    begin: int,
    end: int,
) -> None:
    """Cast iteration indices ``[begin, end)`` chunk by chunk, with private staging buffers."""
    loops, convert = _load()
    src_layout, dst_layout = layout_of(src.dtype), layout_of(dst.dtype)
    src_side = _Side(src, shape, chunk)
    dst_side = _Side(dst, shape, chunk)
    reader, writer = converters(src_layout, dst_layout, chunk, convert, vector_nan)
    for first in range(begin, end, chunk):
        last = min(first + chunk, end)
        source = src_side.gather(loops, first, last)
        canonical = reader(source, last - first)
        target = dst_side.target(first, last)
        writer(target, canonical, last - first)
        dst_side.scatter(loops, first, last)


class _Side:
    """One operand of a cast: a direct typed view when contiguous, else a staging buffer."""

    def __init__(self, operand: Operand, shape: tuple[int, ...], chunk: int) -> None:
        buf, offset, dtype, strides = operand
        layout = layout_of(dtype)
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
        unit = unit_of(itemsize, offset, address, *strides)
        self.width = itemsize // unit
        self.units = units_of(buf, unit)
        self.base = offset // unit
        self.strides = np.asarray([s // unit for s in strides], np.int64)
        self.shape = np.asarray(shape, np.int64)
        self.stage_strides = np.asarray(dense_strides(shape, self.width), np.int64)
        self.stage = np.empty(chunk * itemsize, np.uint8)
        self.stage_units = self.stage.view(UNIT_LANES[unit])
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
