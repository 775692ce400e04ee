"""Cuts an elementwise plan's iteration space into parts a serial loop can walk (pure).

A plan is a shape (dim 0 fastest, as TensorIterator orders it) and, per operand, strides in
elements. ``at::parallel_for`` gives each thread a run ``[begin, end)`` of the linear
iteration range and ``serial_for_each`` walks it with a ``DimCounter``. A serial loop of
ours walks a whole plan instead, so a run becomes ``boxes``: the few rectangular sub-plans
that cover it (a partial row, whole rows, a partial row, and so on for each slower dim),
each one the plan's strides over a smaller shape from a start multi-index. Every element
is computed as in the whole plan, so an elementwise op's bits do not depend on the cut.

``tiled`` rewrites a plan as the walk ``kernels.elementwise`` takes for a large transposed
binary op: square tiles of dims 0 and 1, each walked in runs along dim 1.
"""

from __future__ import annotations

import math

__all__ = ["Box", "Plan", "boxes", "offsets", "tiled"]

Box = tuple[tuple[int, ...], tuple[int, ...]]  # (start multi-index, shape)
Plan = tuple[tuple[int, ...], tuple[tuple[int, ...], ...], tuple[int, ...]]
# (shape, strides of each operand, start offset of each operand): offsets and strides in
# elements of each operand


def boxes(shape: tuple[int, ...], begin: int, end: int) -> list[Box]:
    """Rectangles, in iteration order, that cover linear indices ``[begin, end)`` of ``shape``.

    At most ``2 * len(shape) - 1`` of them; each has ``len(shape)`` dims.
    """
    if begin >= end:
        return []
    if len(shape) <= 1:
        return [((begin,), (end - begin,))]
    *faster, _ = shape
    inner = math.prod(faster)
    first, last = begin // inner, (end - 1) // inner
    lo, hi = begin - first * inner, end - last * inner  # 0 <= lo < inner, 0 < hi <= inner
    if first == last:
        return _within(first, boxes(tuple(faster), lo, hi))
    result = []
    if lo:  # the partial slab where the range starts
        result += _within(first, boxes(tuple(faster), lo, inner))
        first += 1
    stop = last + 1 if hi == inner else last
    if stop > first:  # whole slabs
        result.append(((*(0 for _ in faster), first), (*faster, stop - first)))
    if hi != inner:  # the partial slab where it ends
        result += _within(last, boxes(tuple(faster), 0, hi))
    return result


def _within(index: int, inner: list[Box]) -> list[Box]:
    """``inner`` boxes of the faster dims placed at ``index`` of the slowest dim."""
    return [((*start, index), (*shape, 1)) for start, shape in inner]


def offsets(start: tuple[int, ...], strides: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """Each operand's offset (in its elements) at multi-index ``start``."""
    return tuple(sum(i * s for i, s in zip(start, row, strict=True)) for row in strides)


def tiled(shape: tuple[int, ...], strides: tuple[tuple[int, ...], ...], tile: int) -> list[Plan]:
    """``shape`` walked in ``tile`` x ``tile`` tiles of dims 0 and 1, as plans.

    The tiles dims 0 and 1 hold whole are one plan of ``len(shape) + 2`` dims: inside a tile
    along dim 1, then dim 0, then the tile's index along dim 0 and dim 1, then the outer
    dims. The rows (dim 0) and columns (dim 1) past the last whole tile are two more plans,
    also walked along dim 1. A plan of fewer than two dims, or dims 0 and 1 shorter than
    one tile, is itself.
    """
    zero = (0,) * len(strides)
    if len(shape) < 2 or shape[0] < tile or shape[1] < tile:
        return [(shape, strides, zero)]
    n0, n1, rest = shape[0], shape[1], shape[2:]
    m0, m1 = n0 - n0 % tile, n1 - n1 % tile
    main = (
        (tile, tile, m0 // tile, m1 // tile, *rest),
        tuple((s[1], s[0], tile * s[0], tile * s[1], *s[2:]) for s in strides),
        zero,
    )
    swapped = tuple((s[1], s[0], *s[2:]) for s in strides)
    plans = [main]
    if n0 > m0:  # the rows below the last whole tile, every column
        plans.append(((n1, n0 - m0, *rest), swapped, tuple(m0 * s[0] for s in strides)))
    if n1 > m1:  # the columns right of the last whole tile, the whole-tile rows
        plans.append(((n1 - m1, m0, *rest), swapped, tuple(m1 * s[1] for s in strides)))
    return plans
