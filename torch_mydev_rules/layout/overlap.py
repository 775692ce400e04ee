"""``at::has_internal_overlap`` and ``at::get_overlap_status`` (ATen/MemoryOverlap.cpp)."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from torch_mydev_rules.layout.contiguity import is_non_overlapping_and_dense
from torch_mydev_rules.layout.formats import numel


class MemOverlap(enum.Enum):
    """``at::MemOverlap``: does a layout make two elements share one memory location?

    The values are the integers ``torch._debug_has_internal_overlap`` returns. A member has
    no truth value on purpose (``TOO_HARD`` is neither yes nor no): compare with a member.
    """

    NO = 0
    YES = 1
    TOO_HARD = 2

    def __bool__(self) -> bool:
        raise TypeError("MemOverlap has no truth value; compare it with MemOverlap.YES/NO")


class MemOverlapStatus(enum.Enum):
    """``at::MemOverlapStatus``: how the memory of two tensors relates.

    ``FULL``: the same elements at the same places; ``PARTIAL``: some memory shared but not
    element for element; ``NO``: disjoint; ``TOO_HARD``: not decided (a non-dense operand).
    A member has no truth value on purpose: compare with a member.
    """

    FULL = 0
    PARTIAL = 1
    NO = 2
    TOO_HARD = 3

    def __bool__(self) -> bool:
        raise TypeError("MemOverlapStatus has no truth value; compare it with a member")


def has_internal_overlap(sizes: Sequence[int], strides: Sequence[int]) -> MemOverlap:
    """Whether two elements of one layout share memory; ``at::has_internal_overlap``.

    Rule: ``NO`` when the layout is non-overlapping-and-dense; ``YES`` when some dimension of
    size above 1 has stride 0; ``TOO_HARD`` otherwise (ATen does not search further, so
    ``[2, 2]`` strides ``(1, 1)`` overlaps but is ``TOO_HARD``, and ``[2, 2]`` strides
    ``(1, 4)`` does not overlap but is ``TOO_HARD`` too).
    """
    if is_non_overlapping_and_dense(sizes, strides):
        return MemOverlap.NO
    if any(size > 1 and stride == 0 for size, stride in zip(sizes, strides, strict=True)):
        return MemOverlap.YES
    return MemOverlap.TOO_HARD


@dataclass(frozen=True)
class MemRange:
    """What ``at::get_overlap_status`` reads from one tensor.

    ``storage``: identity of the storage (anything comparable, e.g. the storage data_ptr);
    ranges of different storages never overlap. ``start``: address of the first element in
    bytes, in one frame for all ranges of a storage (absolute, or offset into the storage).
    ``nbytes``: ``numel * itemsize``, the span ATen assumes for a dense tensor. ``dense``:
    ``is_non_overlapping_and_dense``. ``numel``: element count. ``strides``: element strides;
    ATen calls two ranges with equal start and end ``FULL`` only if their strides are equal,
    so ``get_overlap_status`` raises ValueError when it meets that case with ``None`` here.
    ``from_layout`` fills every field from sizes/strides/itemsize.
    """

    storage: int
    start: int
    nbytes: int
    dense: bool
    numel: int
    strides: tuple[int, ...] | None = None

    @classmethod
    def from_layout(
        cls,
        storage: int,
        sizes: Sequence[int],
        strides: Sequence[int],
        itemsize: int,
        storage_offset: int = 0,
    ) -> MemRange:
        """The range of a tensor view: ``start`` is ``storage_offset * itemsize`` bytes."""
        count = numel(sizes)
        return cls(
            storage=storage,
            start=storage_offset * itemsize,
            nbytes=count * itemsize,
            dense=is_non_overlapping_and_dense(sizes, strides),
            numel=count,
            strides=tuple(strides),
        )

    @property
    def end(self) -> int:
        """One past the last byte of the span."""
        return self.start + self.nbytes


def get_overlap_status(a: MemRange, b: MemRange) -> MemOverlapStatus:
    """How the memory of two tensors relates; ``at::get_overlap_status``.

    ATen first answers ``FULL`` when ``a`` and ``b`` are the same TensorImpl; that identity
    is the caller's to check, this function only sees the ranges. Then: ``NO`` if either is
    empty; ``TOO_HARD`` if either is not non-overlapping-and-dense; for ranges of one
    storage, equal start and end give ``FULL`` when the strides are equal and ``PARTIAL``
    otherwise, and intersecting spans give ``PARTIAL``; everything else is ``NO``.
    """
    if a.numel == 0 or b.numel == 0:
        return MemOverlapStatus.NO
    if not a.dense or not b.dense:
        return MemOverlapStatus.TOO_HARD
    if a.storage == b.storage:
        if a.start == b.start and a.end == b.end:
            if a.strides is None or b.strides is None:
                raise ValueError(
                    "MemRange.strides is needed to tell FULL from PARTIAL for two ranges "
                    "spanning the same bytes"
                )
            return MemOverlapStatus.FULL if a.strides == b.strides else MemOverlapStatus.PARTIAL
        if a.start < b.end and b.start < a.end:
            return MemOverlapStatus.PARTIAL
    return MemOverlapStatus.NO
