"""Decides everything a same-dtype copy of one layout needs before it sees memory, once.

``prepare_copy`` makes every decision ``copy.copy_strided`` makes from the plan alone
(normalised shape, element unit, loop, tiles or planes, extents); ``PreparedCopy.run`` then
takes two start addresses and moves the same bytes (the serial loops read raw addresses, so
no numpy view is built per call; a contiguous range below the parallel threshold is one
``memmove``).
``plan_path`` names the loop a plan takes, for tests and the benchmarks.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .copy_loops import (
    LANE_TOKENS,
    PARALLEL_MEMMOVE_MIN_BYTES,
    PARALLEL_MIN_NUMEL,
    PLANE_BLOCK,
    TILE,
    Loop,
    check_plan,
    coalesce,
    entry_of,
    lanes_at,
    load_planes,
    load_strided,
    memmove,
    plan_loop,
    planes_pair,
    run_loop,
    transposed,
    unit_of,
)
from .dtypes import layout_of

__all__ = ["PreparedCopy", "plan_path", "prepare_copy"]


def plan_path(
    itemsize: int,
    shape: tuple[int, ...],
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
) -> str:
    """Name the loop a same-dtype copy of this plan takes (for tests and ``explain``).

    One of ``"empty"``, ``"contiguous"``, ``"contiguous-parallel"``, ``"planes"``,
    ``"planes-parallel"``, ``"tiled"``, ``"tiled-parallel"``, ``"strided"``,
    ``"strided-parallel"``; assumes disjoint, aligned buffers in the process that runs
    parallel loops.
    """
    numel = math.prod(shape)
    if numel == 0:
        return "empty"
    shape, dst_strides, src_strides = coalesce(tuple(shape), tuple(dst_strides), tuple(src_strides))
    if not shape or (len(shape) == 1 and dst_strides[0] == src_strides[0] == itemsize):
        large = numel * itemsize >= PARALLEL_MEMMOVE_MIN_BYTES
        return "contiguous-parallel" if large else "contiguous"
    parallel = "-parallel" if numel >= PARALLEL_MIN_NUMEL else ""
    if planes_pair(shape, dst_strides, src_strides, itemsize) is not None:
        return "planes" + parallel
    if transposed(shape, dst_strides, src_strides, itemsize) is not None:
        return "tiled" + parallel
    return "strided" + parallel


class PreparedCopy:
    """A same-dtype plan with every decision ``copy_strided`` makes before it sees memory.

    Made by ``prepare_copy``: the plan is checked and normalised once (size-1 dims dropped,
    neighbours coalesced), the unit is the widest dividing the itemsize and the strides, and
    the loop is chosen (one byte range, planes, tiled or DimCounter). ``run`` then needs only raw
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
        loop: Loop | None,
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
        loops = load_strided()
        if loop is None:
            if nbytes < PARALLEL_MEMMOVE_MIN_BYTES:
                self.serial_args = (nbytes,)
                self.serial = entry_of(loops.move_bytes_at, 0, 0, *self.serial_args)
        elif loop.numel < PARALLEL_MIN_NUMEL:
            if loop.blocks:
                tail: tuple = (PLANE_BLOCK, 0, loop.blocks)
                kernel = load_planes().copy_planes_at
            elif loop.tiles:
                tail = (TILE, 0, loop.tiles)
                kernel = loops.copy_tiles_at
            else:
                tail = (0, loop.numel)
                kernel = loops.copy_range_at
            self.serial_args = (
                dst_extent // unit,
                src_extent // unit,
                loop.dst_strides,
                loop.src_strides,
                loop.shape,
                loop.width,
                LANE_TOKENS[unit],
                *tail,
            )
            self.serial = entry_of(kernel, 0, 0, *self.serial_args)

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
            dst = lanes_at(dst_start, nbytes, 1)
            memmove(dst, dst_start, 0, lanes_at(src_start, nbytes, 1), src_start, 0, nbytes)
            return True
        dst = lanes_at(dst_start, self.dst_extent, self.unit)
        src = lanes_at(src_start, self.src_extent, self.unit)
        run_loop(loop, dst, 0, src, 0)
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
    shape, dst_strides, src_strides = check_plan(shape, dst_strides, src_strides)
    for name, strides in (("dst", dst_strides), ("src", src_strides)):
        if any(s < 0 for s in strides):
            raise ValueError(f"{name}: negative stride ({strides})")
    numel = math.prod(shape)
    if numel == 0:  # nothing to move: a contiguous copy of no bytes
        return PreparedCopy(0, 1, 0, None, 0, 0, True)
    shape, dst_strides, src_strides = coalesce(shape, dst_strides, src_strides)
    if not shape:  # a single element
        shape, dst_strides, src_strides = (1,), (itemsize,), (itemsize,)
    dst_extent = sum((n - 1) * s for n, s in zip(shape, dst_strides, strict=True)) + itemsize
    src_extent = sum((n - 1) * s for n, s in zip(shape, src_strides, strict=True)) + itemsize
    same = dst_strides == src_strides
    if len(shape) == 1 and dst_strides[0] == src_strides[0] == itemsize:
        return PreparedCopy(numel, 1, numel * itemsize, None, dst_extent, src_extent, same)
    unit = unit_of(itemsize, *dst_strides, *src_strides)
    loop = plan_loop(
        tuple(s // unit for s in dst_strides),
        tuple(s // unit for s in src_strides),
        shape,
        itemsize // unit,
    )
    return PreparedCopy(numel, unit, 0, loop, dst_extent, src_extent, same)
