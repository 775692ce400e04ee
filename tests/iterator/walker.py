"""A reference walker: the byte offsets a plan visits, against the naive broadcast loop.

Truth for ``test_copy``: iterating a plan's coalesced shape with ``serial_for_each`` must visit
exactly the ``(offset of operand 0, offset of operand 1, ...)`` tuples that a plain nested loop
over the broadcast shape visits, each as often.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence

from torch_mydev_rules.iterator import Plan
from torch_mydev_rules.iterator.reference import serial_for_each


def naive_offsets(
    shape: Sequence[int],
    layouts: Sequence[tuple[Sequence[int], Sequence[int], int]],
) -> Counter:
    """Offsets from a nested loop over ``shape``; ``layouts`` are (sizes, strides, itemsize).

    Each operand aligns at the last dimension; its size-1 dims stay at index 0 (broadcast).
    """
    visits: Counter = Counter()
    for index in itertools.product(*(range(s) for s in shape)):
        offsets = []
        for sizes, strides, itemsize in layouts:
            lead = len(shape) - len(sizes)
            offset = 0
            for j, (size, stride) in enumerate(zip(sizes, strides, strict=True)):
                if size != 1:
                    offset += index[lead + j] * stride
            offsets.append(offset * itemsize)
        visits[tuple(offsets)] += 1
    return visits


def plan_offsets(
    shape: Sequence[int], stride_bytes: Sequence[Sequence[int]], begin: int = 0, end=None
) -> Counter:
    """Offsets visited by walking ``serial_for_each`` blocks of an iteration."""
    visits: Counter = Counter()
    for block in serial_for_each(shape, stride_bytes, begin, end):
        for j in range(block.size1):
            for i in range(block.size0):
                visits[
                    tuple(
                        off + i * inner + j * outer
                        for off, inner, outer in zip(
                            block.offsets, block.inner, block.outer, strict=True
                        )
                    )
                ] += 1
    return visits


def plan_layouts(plan: Plan, sizes: Sequence[Sequence[int] | None]):
    """(sizes, strides, itemsize) of each operand as the plan iterates it.

    ``sizes`` gives each operand's own sizes (None for outputs, which have the plan's shape).
    """
    return [
        (plan.shape if s is None else tuple(s), strides, dtype.itemsize)
        for s, strides, dtype in zip(sizes, plan.operand_strides, plan.dtypes, strict=True)
    ]


def assert_walk_matches(plan: Plan, sizes: Sequence[Sequence[int] | None]) -> None:
    """The coalesced plan and the naive loop visit the same offset tuples equally often."""
    coalesced_numel = 1
    for s in plan.coalesced_shape:
        coalesced_numel *= s
    assert coalesced_numel == plan.numel
    expected = naive_offsets(plan.shape, plan_layouts(plan, sizes))
    assert plan_offsets(plan.coalesced_shape, plan.coalesced_stride_bytes) == expected
    assert plan_offsets(plan.reordered_shape, plan.reordered_stride_bytes) == expected
