"""Decides how a large elementwise op splits over threads: runs of the linear range.

As ``at::parallel_for(0, numel, grain, ...)`` drives ATen's elementwise loops, the linear
iteration range (dim 0 fastest) is cut in ``threads.count()`` equal runs; each run is a few
boxes (``parts.boxes``), and each box one call of the op's serial loop, through its C entry
(``elementwise._replay``), on the plan's strides over the box's shape, the operands'
addresses moved to the box's first element. ``threads.parallel_calls`` runs the runs on
numba's threads. Each element is computed exactly as on the serial path and there is no
reduction, so the split changes no bit. The parts write disjoint elements: the caller runs
these only on outputs that do not overlap themselves.

A large transposed binary plan is walked in tiles (``parts.tiled``, ``BINARY_TILE``): the
runs are then runs of the tiled plans' concatenated ranges.

``where`` and ``fill`` (``run_moves``) take the same boxes to their C entries in
``parallel._entries``, every operand's address in the block.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from torch_mydev.kernels.copy.loops import parallel_allowed
from torch_mydev.kernels.jit.compiler import NotCompiled
from torch_mydev.kernels.parallel import parts, threads

__all__ = ["ParallelKernel", "run_moves"]

# Where each kind's serial entry (``_elementwise_loops.<kind>_at``) takes each operand's lane
# token: its index among the arguments after the addresses. ``meta`` (operand extents in
# lanes first), ``strides`` and ``shape`` follow the tokens.
_LANE_ARGS = {"binary": (0, 1, 2), "compare": (0, 1, 1), "unary": (0, 0)}

_Plans = list[tuple[tuple[int, ...], np.ndarray, tuple[int, ...]]]


def _plans(strides: np.ndarray, shape: np.ndarray, tile: int) -> _Plans:
    """(shape, strides array, start offsets) of each plan the iteration is walked as."""
    shape_ = tuple(shape.tolist())
    rows = tuple(tuple(row) for row in strides.tolist())
    if not tile:
        return [(shape_, strides, (0,) * len(rows))]
    return [
        (p_shape, np.array(p_strides, dtype=np.int64), start)
        for p_shape, p_strides, start in parts.tiled(shape_, rows, tile)
    ]


def _boxes(plans: _Plans, begin: int, end: int):
    """(plan strides, box shape, each operand's offset) of the boxes covering ``[begin,
    end)`` of the plans' concatenated linear ranges."""
    first = 0
    for p_shape, p_strides, start in plans:
        n = math.prod(p_shape)
        lo, hi = max(begin, first) - first, min(end, first + n) - first
        rows = None
        for box_start, box_shape in parts.boxes(p_shape, lo, hi):
            if rows is None:
                rows = tuple(tuple(row) for row in p_strides.tolist())
            moved = parts.offsets(box_start, rows)
            offsets = tuple(s + m for s, m in zip(start, moved, strict=True))
            yield p_strides, np.array(box_shape, dtype=np.int64), offsets
        first += n


class ParallelKernel:
    """A prepared loop of ``numel`` elements at or above its threshold, called like the
    serial entry point it wraps (``serial``, ``<kind>_at``): its C entry over the boxes of
    ``threads.count()`` runs on numba's threads, or ``serial`` alone where a parallel region
    may not run (below ``PARALLEL_MIN_NUMEL``, one thread, a forked child, another region
    running, the C entry or the parallel loop still compiling in the background).

    Returns the largest status of the boxes (1: an integer zero divisor was met; the other
    boxes may have finished).
    """

    __slots__ = ("kind", "lane_args", "numel", "parts", "serial", "tile")

    def __init__(self, kind: str, serial: Callable, numel: int, tile: int = 0) -> None:
        self.kind = kind
        self.serial = serial
        self.lane_args = _LANE_ARGS[kind]
        self.numel = numel
        self.tile = tile
        self.parts: tuple | None = None  # (args it was laid out for, entry, runs of boxes)

    def __call__(self, *args: object) -> int:
        if not parallel_allowed(self.numel):
            return self.serial(*args)
        k = len(self.lane_args)
        addresses, rest = args[:k], args[k:]
        try:
            entry, runs = self._runs(rest)
        except NotCompiled:
            return self.serial(*args)
        pad = (0,) * (3 - k)  # a unary entry's third address is unused
        status = threads.parallel_calls(
            [
                [
                    (entry, *(a + m for a, m in zip(addresses, moved, strict=True)), *pad, block)
                    for moved, block in run
                ]
                for run in runs
            ]
        )
        return self.serial(*args) if status is None else status

    def _runs(self, rest: tuple) -> tuple[int, list]:
        """The C entry and, per run, each box's operand offsets in bytes and the address of
        its parameter block (laid out once for the arguments ``rest``)."""
        tokens = max(self.lane_args) + 1
        meta, strides, shape = rest[tokens : tokens + 3]
        if self.parts is not None and self.parts[0] is meta:
            return self.parts[1], self.parts[2]
        from torch_mydev.kernels.elementwise import _replay as replay

        entry = replay.entry(self.kind, rest)
        value = rest[tokens + 3] if self.kind == "binary" else None
        k = len(self.lane_args)
        itemsizes = [rest[i].itemsize for i in self.lane_args]
        plans = _plans(strides, shape, self.tile)
        blocks, runs = [], []
        for begin, end in threads.split(self.numel, threads.count()):
            run = []
            for p_strides, box_shape, offsets in _boxes(plans, begin, end):
                box_meta = meta.copy()
                box_meta[:k] -= offsets
                block = replay.pack(box_meta, p_strides, box_shape, value)
                blocks.append(block)
                moved = tuple(o * size for o, size in zip(offsets, itemsizes, strict=True))
                run.append((moved, block.ctypes.data))
            runs.append(run)
        self.parts = (meta, entry, runs, blocks)  # the blocks stay alive with it
        return entry, runs


def run_moves(kind: str, arrays: tuple, base: np.ndarray, strides: np.ndarray,
              shape: np.ndarray, value: np.ndarray | None = None) -> bool:  # fmt: skip
    """``<kind>_kernel`` (``where``: out, cond, a, b; ``fill``: out and ``value``), operands
    as lane arrays with start offsets ``base``, over the boxes of ``threads.count()`` runs on
    numba's threads through its C entry (``parallel._entries.move_entry``). False, having
    written nothing, where that cannot run (the entry compiling in the background, another
    region running): the caller runs the serial kernel."""
    from torch_mydev.kernels.parallel import _entries as entries

    try:
        entry = entries.move_entry(kind, arrays[0].dtype.type)
    except NotCompiled:
        return False
    plans = _plans(strides, shape, 0)
    blocks = []
    for begin, end in threads.split(int(np.prod(shape)), threads.count()):
        run = [
            entries.pack_move(arrays, base + np.array(offsets), p_strides, box_shape, value)
            for p_strides, box_shape, offsets in _boxes(plans, begin, end)
        ]
        blocks.append(run)
    calls = [[(entry, 0, 0, 0, block.ctypes.data) for block in run] for run in blocks]
    return threads.parallel_calls(calls) is not None
