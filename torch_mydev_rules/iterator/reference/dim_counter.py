"""Decides how a range of a (coalesced) iteration is cut into 2-D blocks for a kernel loop.

Mirrors ``at::DimCounter`` (``ATen/TensorIterator.cpp``) and ``at::internal::serial_for_each``
(``ATen/TensorIteratorInternal.h``): a linear range ``[begin, end)`` of the iteration space
is walked as a sequence of blocks, each ``size0`` elements along the fastest dimension by
``size1`` along the next, starting at the byte offsets the counter's position gives.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["Block", "DimCounter", "serial_for_each"]


class DimCounter:
    """A position in ``shape`` (fastest dimension first) that advances in 2-D steps.

    ``values`` is the multi-index of ``offset``, the linear position inside
    ``range = (begin, end)``. Mutable on purpose: kernels drive it in a loop, as ATen's does.
    """

    def __init__(self, shape: Sequence[int], range: tuple[int, int]) -> None:
        """Start at ``range[0]``: ``values`` is its mixed-radix digits over ``shape``."""
        self.shape = tuple(shape)
        self.range = (int(range[0]), int(range[1]))
        self.values = [0] * len(self.shape)
        self.offset = self.range[0]
        linear = self.range[0]
        if linear == 0:
            return
        for dim, size in enumerate(self.shape):
            if size > 0:
                self.values[dim] = linear % size
                linear //= size
        if linear != 0:
            raise ValueError(f"range begin {self.range[0]} lies outside shape {list(self.shape)}")

    def is_done(self) -> bool:
        """True once ``offset`` has reached the end of the range."""
        return self.offset >= self.range[1]

    def max_2d_step(self) -> tuple[int, int]:
        """The largest block that starts here (``max_2d_step``).

        ``step0`` runs to the end of the fastest dimension or of the range. Only when it spans
        the whole fastest dimension does ``step1`` grow past 1: to the end of the second
        dimension, or as many full rows as the range still holds.
        """
        remaining = self.range[1] - self.offset
        step0 = min(self.shape[0] - self.values[0], remaining)
        step1 = 1
        if step0 == self.shape[0] and len(self.shape) > 1:
            step1 = min(self.shape[1] - self.values[1], remaining // self.shape[0])
        return step0, step1

    def increment(self, step: tuple[int, int]) -> None:
        """Advance by a block of ``step[0] * step[1]`` elements, carrying into slower dims.

        A 2-D step (``step[1] != 1``) must start at the beginning of a row and span it.
        """
        step0, step1 = step
        self.offset += step0 * step1
        overflow = step0
        i = 0
        if step1 != 1:
            if step0 != self.shape[0] or self.values[0] != 0:
                raise ValueError("a 2-D step must span the fastest dimension from its start")
            i = 1
            overflow = step1
        while i < len(self.shape) and overflow > 0:
            size = self.shape[i]
            value = self.values[i] + overflow
            if value >= size:
                overflow = 1
                value -= size
                if value >= size:
                    raise ValueError(f"step {step} overflows dimension {i} of size {size}")
            else:
                overflow = 0
            self.values[i] = value
            i += 1
        if overflow not in (0, 1):
            raise ValueError(f"step {step} overflows the shape {list(self.shape)}")


@dataclass(frozen=True)
class Block:
    """One call of ATen's 2-D loop: start offsets, extents, and the strides to walk them.

    Element ``(i, j)`` of operand ``k`` is at byte ``offsets[k] + i * inner[k] + j * outer[k]``
    for ``0 <= i < size0``, ``0 <= j < size1``.
    """

    offsets: tuple[int, ...]
    size0: int
    size1: int
    inner: tuple[int, ...]
    outer: tuple[int, ...]


def serial_for_each(
    shape: Sequence[int],
    stride_bytes: Sequence[Sequence[int]],
    begin: int = 0,
    end: int | None = None,
) -> Iterator[Block]:
    """Cut ``[begin, end)`` of the iteration into 2-D blocks (``serial_for_each``).

    ``shape`` and ``stride_bytes`` (one tuple per operand) are fastest-first, as a plan's
    coalesced fields are. Up to one dimension the range is one block; otherwise a
    ``DimCounter`` yields ``max_2d_step`` blocks until the range is done. ``end`` defaults to
    the number of elements.
    """
    shape = tuple(shape)
    ntensors = len(stride_bytes)
    numel = 1
    for size in shape:
        numel *= size
    end = numel if end is None else end
    if end <= begin:
        return
    inner = tuple(s[0] if len(shape) > 0 else 0 for s in stride_bytes)
    outer = tuple(s[1] if len(shape) > 1 else 0 for s in stride_bytes)
    if len(shape) <= 1:
        yield Block(tuple(begin * inner[k] for k in range(ntensors)), end - begin, 1, inner, outer)
        return
    counter = DimCounter(shape, (begin, end))
    while not counter.is_done():
        offsets = tuple(
            sum(v * s for v, s in zip(counter.values, stride_bytes[k], strict=True))
            for k in range(ntensors)
        )
        step = counter.max_2d_step()
        yield Block(offsets, step[0], step[1], inner, outer)
        counter.increment(step)
