"""Decides everything a same-dtype copy of one layout needs before it sees memory, once.

``prepare_copy`` makes every decision ``copy.copy_strided`` makes from the plan alone
(normalised shape, element unit, loop, tiles or planes, extents); ``PreparedCopy.run`` then
takes two start addresses and moves the same bytes (the serial loops read raw addresses, so
no numpy view is built per call; a contiguous range below the parallel threshold is one
``memmove``).
``plan_path`` names the loop a plan takes, for tests and the benchmarks.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable

import numpy as np
import torch

from torch_mydev.kernels import numba_loaded
from torch_mydev.kernels.copy.loops import (
    LANE_TOKENS,
    PARALLEL_MEMMOVE_MIN_BYTES,
    PARALLEL_MIN_NUMEL,
    PLANE_BLOCK,
    TILE,
    UNIT_LANES,
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
from torch_mydev.kernels.dtypes import layout_of

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
        "fresh",
        "loop",
        "nbytes",
        "numel",
        "pending",
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
        # parallel, moves nothing, or waits for numba (``pending``).
        self.serial: Callable | None = None
        self.serial_args: tuple = ()
        # The serial loop's name in its numba module, until ``load`` resolves it: set while
        # numba is not loaded in this process (see ``run``).
        self.pending: str | None = None
        self.fresh = True  # not run yet
        if numel == 0:
            return
        if loop is None:
            if nbytes < PARALLEL_MEMMOVE_MIN_BYTES:
                self.serial_args = (nbytes,)
                self.pending = "move_bytes_at"
        elif loop.numel < PARALLEL_MIN_NUMEL:
            if loop.blocks:
                tail: tuple = (PLANE_BLOCK, 0, loop.blocks)
                self.pending = "copy_planes_at"
            elif loop.tiles:
                tail = (TILE, 0, loop.tiles)
                self.pending = "copy_tiles_at"
            else:
                tail = (0, loop.numel)
                self.pending = "copy_range_at"
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
        if self.pending is not None and numba_loaded():
            self.load()

    def load(self) -> None:
        """Resolve the serial loop's compiled entry point (loading numba if need be)."""
        name = self.pending
        if name is None:
            return
        module = load_planes() if name == "copy_planes_at" else load_strided()
        self.serial = entry_of(getattr(module, name), 0, 0, *self.serial_args)
        self.pending = None

    def replay_block(self) -> tuple[int, np.ndarray] | None:
        """The C entry's address and the parameter block that run this copy's serial loop
        from the stub's replay (``_replay.py``), or None for a copy it does not replay: one
        of nothing, or a parallel one. Loads the loop (and numba) if need be."""
        if not self.numel:
            return None
        self.load()
        if self.serial is None:  # a parallel copy
            return None
        from torch_mydev.kernels.copy import _replay

        loop = self.loop
        if loop is None:  # one byte range
            return _replay.move_entry(), np.array([self.nbytes], dtype=np.int64)
        kind = "planes" if loop.blocks else "tiles" if loop.tiles else "range"
        dst_units, src_units, dst_strides, src_strides, shape, width, lane, *tail = self.serial_args
        params = _replay.pack(shape, dst_units, src_units, width, tail, dst_strides, src_strides)
        return _replay.strided_entry(kind, lane.dtype.type), params

    def new_tensor_block(self) -> tuple[int, np.ndarray] | None:
        """``replay_block``: a copy into a new tensor replays as any other."""
        return self.replay_block()

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
        if self.pending is not None:
            if self.fresh and not numba_loaded() and self._run_without_numba(dst_start, src_start):
                return True
            self.load()
            self.serial(dst_start, src_start, *self.serial_args)
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

    def _run_without_numba(self, dst_start: int, src_start: int) -> bool:
        """The first serial run in a process that has not loaded numba: the same bytes moved
        by ``ctypes.memmove`` (one range) or numpy's strided copy over views of the two
        buffers, so a program that copies a layout once never pays numba's load (about
        0.2 s) and exit (about 0.1 s) for it. Later runs load the loop (``load``): a layout
        copied twice is likely copied again, and the loop is faster per call.

        Order-free, so only where order cannot matter: the destination's elements are
        distinct (its unit strides, sorted, nest densely) and the two ranges are disjoint;
        otherwise returns False and the loop runs.
        """
        self.fresh = False
        loop = self.loop
        if loop is None:
            ctypes.memmove(dst_start, src_start, self.nbytes)
            return True
        disjoint = (
            dst_start + self.dst_extent <= src_start or src_start + self.src_extent <= dst_start
        )
        shape = (*loop.shape.tolist(), loop.width)
        dst_strides = (*loop.dst_strides.tolist(), 1)
        if not disjoint or not _dense(shape, dst_strides):
            return False
        unit, lane = self.unit, UNIT_LANES[self.unit]
        src_strides = (*loop.src_strides.tolist(), 1)
        np.copyto(
            _view(dst_start, self.dst_extent, unit, lane, shape, dst_strides),
            _view(src_start, self.src_extent, unit, lane, shape, src_strides),
        )
        return True


def _dense(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether ``strides`` (in units) place every index of ``shape`` at a distinct unit with
    no gaps: sorted by stride, each dim's stride is the product of the sizes before it."""
    expected = 1
    for size, stride in sorted(zip(shape, strides, strict=True), key=lambda d: d[1]):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _view(
    address: int,
    extent: int,
    unit: int,
    lane: np.dtype,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
) -> np.ndarray:
    """A numpy view of ``extent`` host bytes at ``address`` as ``shape`` units of ``unit``
    bytes with these unit ``strides`` (no copy)."""
    buffer = (ctypes.c_uint8 * extent).from_address(address)
    byte_strides = tuple(s * unit for s in strides)
    return np.ndarray(shape, lane, buffer, 0, byte_strides)


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
