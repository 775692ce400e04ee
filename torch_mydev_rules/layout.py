"""Decides what a (sizes, strides) layout is: contiguity, memory format, density and overlap.

This is the c10/ATen layout vocabulary re-implemented over plain tuples of ints, one
function per rule, each named after the c10/ATen function it mirrors:

- contiguity flags as ``TensorImpl::_refresh_contiguous`` caches them (c10/core/Contiguity.h,
  c10/core/TensorImpl.h), which is what ``Tensor.is_contiguous(memory_format=...)`` and
  ``is_non_overlapping_and_dense`` report;
- the "strides like channels_last" guesses (c10/core/MemoryFormat.h) and
  ``TensorBase::suggest_memory_format``;
- the strides ``at::empty`` gives for a memory format, and the strides ``empty_like`` /
  ``clone`` give with ``preserve_format`` (``at::infer_dense_strides``, ATen/ExpandUtils.cpp);
- ``at::detail::computeStorageNbytes`` (ATen/EmptyTensor.cpp);
- ``at::has_internal_overlap`` and ``at::get_overlap_status`` (ATen/MemoryOverlap.cpp).

Nothing here touches memory or tensors; torch is imported only inside the two
``MemoryFormat`` converters. Functions that take a memory format accept a
``torch.memory_format`` as well as a ``MemoryFormat``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

__all__ = [
    "MemOverlap",
    "MemOverlapStatus",
    "MemRange",
    "MemoryFormat",
    "compute_storage_nbytes",
    "contiguous_strides",
    "get_overlap_status",
    "has_internal_overlap",
    "infer_dense_strides",
    "is_channels_last_3d_contiguous",
    "is_channels_last_contiguous",
    "is_channels_last_strides_2d",
    "is_channels_last_strides_3d",
    "is_contiguous",
    "is_contiguous_for",
    "is_non_overlapping_and_dense",
    "is_strides_like",
    "numel",
    "preserve_format_strides",
    "strides_for_memory_format",
    "suggest_memory_format",
]

# The largest byte count a storage may have: ATen's storage_max() is int64's maximum.
_STORAGE_MAX = 2**63 - 1

# Dimension orders from the fastest-moving (stride 1) dimension outwards, as c10 writes them.
_CHANNELS_LAST_2D_ORDER = (1, 3, 2, 0)  # N, C, H, W: C fastest, then W, H, N
_CHANNELS_LAST_3D_ORDER = (1, 4, 3, 2, 0)  # N, C, D, H, W: C fastest, then W, H, D, N


class MemoryFormat(enum.Enum):
    """``c10::MemoryFormat``; each value is the name of the matching ``torch`` attribute."""

    CONTIGUOUS = "contiguous_format"
    CHANNELS_LAST = "channels_last"
    CHANNELS_LAST_3D = "channels_last_3d"
    PRESERVE = "preserve_format"

    @classmethod
    def from_torch(cls, fmt: torch.memory_format | MemoryFormat | None) -> MemoryFormat:
        """Convert a ``torch.memory_format`` (or one of ours) to a ``MemoryFormat``.

        ``None`` means ``CONTIGUOUS``: an absent ``memory_format`` argument is what
        ``aten::empty`` treats as ``contiguous_format``.
        """
        if fmt is None:
            return cls.CONTIGUOUS
        if isinstance(fmt, cls):
            return fmt
        import torch

        if isinstance(fmt, torch.memory_format):
            for member in cls:
                if getattr(torch, member.value) == fmt:
                    return member
        raise TypeError(f"expected a torch.memory_format, a MemoryFormat or None, got {fmt!r}")

    def to_torch(self) -> torch.memory_format:
        """The ``torch.memory_format`` object with the same meaning."""
        import torch

        return getattr(torch, self.value)


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


def numel(sizes: Sequence[int]) -> int:
    """Number of elements: the product of ``sizes``, 1 for rank 0; ``c10::multiply_integers``."""
    count = 1
    for size in sizes:
        count *= size
    return count


def _check_same_rank(sizes: Sequence[int], strides: Sequence[int]) -> None:
    """Raise ValueError unless sizes and strides have one entry per dimension each."""
    if len(sizes) != len(strides):
        raise ValueError(f"sizes {list(sizes)} and strides {list(strides)} have different lengths")


def _check_size_nonnegative(sizes: Sequence[int]) -> None:
    """Reject negative sizes like ``at::detail::check_size_nonnegative`` (RuntimeError)."""
    for size in sizes:
        if size < 0:
            raise RuntimeError(
                f"Trying to create tensor with negative dimension {size}: {list(sizes)}"
            )


def contiguous_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides for ``sizes``, as ``torch.empty(sizes)`` gives them.

    Rule (``c10::contiguous_strides``, and the ``Contiguous`` case of
    ``TensorImpl::empty_tensor_restride``): the last stride is 1 and each other stride is
    the next one times ``max(next size, 1)``, so a size-0 dimension never makes a stride 0.
    A stride beyond int64 raises ``RuntimeError("Stride calculation overflowed")`` like
    ``empty_tensor_restride`` does.
    """
    strides = [1] * len(sizes)
    for d in range(len(sizes) - 2, -1, -1):
        strides[d] = strides[d + 1] * max(sizes[d + 1], 1)
        if strides[d] > _STORAGE_MAX:
            raise RuntimeError("Stride calculation overflowed")
    return tuple(strides)


def is_contiguous(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether the layout is row-major dense; ``c10::_compute_contiguous``.

    Rule: an empty tensor (numel 0) is contiguous; otherwise, walking from the last
    dimension, every dimension of size other than 1 must have a stride equal to the product
    of the sizes after it. Strides of size-1 dimensions are ignored.
    """
    _check_same_rank(sizes, strides)
    if numel(sizes) == 0:
        return True
    expected = 1
    for d in range(len(sizes) - 1, -1, -1):
        if sizes[d] == 1:
            continue
        if strides[d] != expected:
            return False
        expected *= sizes[d]
    return True


def _is_dense_in_order(sizes: Sequence[int], strides: Sequence[int], order: Sequence[int]) -> bool:
    """Whether the dims of ``order`` (fastest first) have packed strides, size-1 dims ignored."""
    expected = 1
    for d in order:
        if sizes[d] == 1:
            continue
        if strides[d] != expected:
            return False
        expected *= sizes[d]
    return True


def is_channels_last_contiguous(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a 4-D layout is packed NHWC; ``c10::_compute_channels_last_contiguous_2d``.

    Rule: only rank 4 can be (any other rank gives False). Walking the dimensions in the
    order C, W, H, N, every dimension of size other than 1 must have a stride equal to the
    product of the sizes walked before it. Unlike ``is_contiguous`` there is no shortcut for
    numel 0: ``[2, 0, 3, 4]`` with strides ``(0, 1, 0, 0)`` is channels_last contiguous,
    with contiguous strides it is not.
    """
    _check_same_rank(sizes, strides)
    if len(sizes) != 4:
        return False
    return _is_dense_in_order(sizes, strides, _CHANNELS_LAST_2D_ORDER)


def is_channels_last_3d_contiguous(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a 5-D layout is packed NDHWC; ``c10::_compute_channels_last_contiguous_3d``.

    Rule: only rank 5 can be. Walking C, W, H, D, N, every dimension of size other than 1
    must have a stride equal to the product of the sizes walked before it (no numel-0
    shortcut). ``TensorImpl`` also requires the tensor not be channels_last (2-D)
    contiguous, which a rank-5 tensor never is, so this is the flag as cached.
    """
    _check_same_rank(sizes, strides)
    if len(sizes) != 5:
        return False
    return _is_dense_in_order(sizes, strides, _CHANNELS_LAST_3D_ORDER)


def _compute_non_overlapping_and_dense(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """``c10::_compute_non_overlapping_and_dense`` alone, without TensorImpl's shortcuts.

    Rule: a 1-D layout is dense when its size is below 2 or its stride is 1. Otherwise sort
    the dimensions of size 2 or more by stride (dimensions of size 0 or 1 go last and end
    the walk); each must have a stride equal to the product of the sizes before it.
    """
    if len(sizes) == 1:
        return sizes[0] < 2 or strides[0] == 1
    # Among the dims of size >= 2, two with equal strides can never both pass the walk
    # below, so the order std::sort leaves ties in does not change the answer.
    order = sorted(range(len(sizes)), key=lambda d: (sizes[d] < 2, strides[d]))
    required = 1
    for d in order:
        if sizes[d] < 2:
            return True
        if strides[d] != required:
            return False
        required *= sizes[d]
    return True


def is_non_overlapping_and_dense(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether the elements fill a block of memory exactly once, in some dimension order.

    Mirrors the flag ``TensorImpl::_refresh_contiguous`` caches (what
    ``aten::is_non_overlapping_and_dense`` returns): true when the layout is contiguous, or
    (rank 4) channels_last contiguous, or (rank 5) channels_last_3d contiguous, or
    ``c10::_compute_non_overlapping_and_dense`` says so. The contiguity shortcuts matter for
    empty tensors: numel 0 is always contiguous, hence always non-overlapping-and-dense.
    """
    _check_same_rank(sizes, strides)
    if is_contiguous(sizes, strides):
        return True
    if len(sizes) == 4 and is_channels_last_contiguous(sizes, strides):
        return True
    if len(sizes) == 5 and is_channels_last_3d_contiguous(sizes, strides):
        return True
    return _compute_non_overlapping_and_dense(sizes, strides)


def _is_strides_like_in_order(
    sizes: Sequence[int], strides: Sequence[int], order: Sequence[int]
) -> bool:
    """The shared walk of ``c10::is_channels_last_strides_2d_s4`` / ``_3d_s5``.

    ``order`` lists the dims fastest first, channel dim first and batch dim (0) last.
    """
    channel = order[0]
    # A stride-0 channel dim is a trivial C: default to the contiguous format.
    if strides[channel] == 0:
        return False
    minimum = 0
    for d in order:
        if sizes[d] == 0:
            return False
        if strides[d] < minimum:
            return False
        # Ambiguity (N111-like shapes): if the minimum arriving at N still equals the C
        # stride, nothing after C moved it on, and the strides cannot tell channels_last
        # from contiguous; default to contiguous.
        if d == 0 and minimum == strides[channel]:
            return False
        # Size-1 dims do not advance the minimum, but their own strides are still compared:
        # that is what tells [H,1,1,1] channels_last strides from [H,H,1,1] contiguous ones.
        minimum = strides[d] * sizes[d] if sizes[d] > 1 else strides[d]
    return True


def is_channels_last_strides_2d(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether 4-D strides look channels_last; ``c10::is_channels_last_strides_2d``.

    This is the "strides like" guess behind ``suggest_memory_format``, not a density test.
    Rule (``is_channels_last_strides_2d_s4``; rank other than 4 gives False): False if the C
    stride is 0. Walk C, W, H, N keeping a running minimum (start 0): any size 0 gives
    False; a stride below the minimum gives False; at N, a minimum equal to the C stride
    gives False (ambiguous, default to contiguous); then the minimum becomes the stride,
    times the size when the size is above 1.
    """
    _check_same_rank(sizes, strides)
    if len(sizes) != 4:
        return False
    return _is_strides_like_in_order(sizes, strides, _CHANNELS_LAST_2D_ORDER)


def is_channels_last_strides_3d(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether 5-D strides look channels_last_3d; ``c10::is_channels_last_strides_3d``.

    Same rule as ``is_channels_last_strides_2d`` (``is_channels_last_strides_3d_s5``), for
    rank 5 walking C, W, H, D, N; any other rank gives False.
    """
    _check_same_rank(sizes, strides)
    if len(sizes) != 5:
        return False
    return _is_strides_like_in_order(sizes, strides, _CHANNELS_LAST_3D_ORDER)


def is_strides_like(
    sizes: Sequence[int], strides: Sequence[int], memory_format: MemoryFormat | torch.memory_format
) -> bool:
    """The ``is_channels_last_`` / ``is_channels_last_3d_`` flags; ``TensorImpl::is_strides_like``.

    Rule (``_refresh_contiguous``): rank 4 is channels_last-like per
    ``is_channels_last_strides_2d`` and never channels_last_3d-like; rank 5 is
    channels_last_3d-like per ``is_channels_last_strides_3d`` (TensorImpl's extra
    conditions are always met at rank 5) and never channels_last-like; other ranks are
    neither. ``CONTIGUOUS`` and ``PRESERVE`` always give False.
    """
    memory_format = MemoryFormat.from_torch(memory_format)
    if memory_format is MemoryFormat.CHANNELS_LAST:
        return is_channels_last_strides_2d(sizes, strides)
    if memory_format is MemoryFormat.CHANNELS_LAST_3D:
        return is_channels_last_strides_3d(sizes, strides)
    return False


def is_contiguous_for(
    sizes: Sequence[int], strides: Sequence[int], memory_format: MemoryFormat | torch.memory_format
) -> bool:
    """What ``Tensor.is_contiguous(memory_format=...)`` returns; ``TensorImpl::is_contiguous``.

    Rule: ``CHANNELS_LAST`` reads the channels_last contiguity flag, ``CHANNELS_LAST_3D`` the
    channels_last_3d one, and anything else (``CONTIGUOUS`` and also ``PRESERVE``) the plain
    contiguity flag.
    """
    memory_format = MemoryFormat.from_torch(memory_format)
    if memory_format is MemoryFormat.CHANNELS_LAST:
        return is_channels_last_contiguous(sizes, strides)
    if memory_format is MemoryFormat.CHANNELS_LAST_3D:
        return is_channels_last_3d_contiguous(sizes, strides)
    return is_contiguous(sizes, strides)


def suggest_memory_format(
    sizes: Sequence[int],
    strides: Sequence[int],
    channels_last_strides_exact_match: bool = False,
) -> MemoryFormat:
    """The memory format a layout suggests; ``TensorBase::suggest_memory_format``.

    Rule: ``CHANNELS_LAST`` when the strides look channels_last (``is_strides_like``),
    otherwise ``CHANNELS_LAST_3D`` when they look channels_last_3d, otherwise
    ``CONTIGUOUS``. With ``channels_last_strides_exact_match`` a channels_last(_3d) answer
    also needs the strides to equal exactly those ``at::empty`` gives for that format
    (size-0/1 dims included); when they do not, the answer is ``CONTIGUOUS`` (the 3-D
    format is then not tried).
    """
    if is_strides_like(sizes, strides, MemoryFormat.CHANNELS_LAST):
        exact = tuple(strides) == _channels_last_2d_strides(sizes)
        if exact or not channels_last_strides_exact_match:
            return MemoryFormat.CHANNELS_LAST
    elif is_strides_like(sizes, strides, MemoryFormat.CHANNELS_LAST_3D):
        exact = tuple(strides) == _channels_last_3d_strides(sizes)
        if exact or not channels_last_strides_exact_match:
            return MemoryFormat.CHANNELS_LAST_3D
    return MemoryFormat.CONTIGUOUS


def _strides_in_order(sizes: Sequence[int], order: Sequence[int]) -> tuple[int, ...]:
    """Packed strides with the dims of ``order`` fastest first; plain products, no max(.,1)."""
    strides = [0] * len(sizes)
    stride = 1
    for d in order:
        strides[d] = stride
        stride *= sizes[d]
    return tuple(strides)


def _channels_last_2d_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    """``c10::get_channels_last_strides_2d`` for rank 4."""
    return _strides_in_order(sizes, _CHANNELS_LAST_2D_ORDER)


def _channels_last_3d_strides(sizes: Sequence[int]) -> tuple[int, ...]:
    """``c10::get_channels_last_strides_3d`` for rank 5."""
    return _strides_in_order(sizes, _CHANNELS_LAST_3D_ORDER)


def strides_for_memory_format(
    sizes: Sequence[int], memory_format: MemoryFormat | torch.memory_format
) -> tuple[int, ...]:
    """The strides ``torch.empty(sizes, memory_format=...)`` gives, or the error it raises.

    Mirrors ``at::empty`` (``check_size_nonnegative``, then
    ``TensorImpl::empty_tensor_restride``): negative sizes raise RuntimeError;
    ``CONTIGUOUS`` gives ``contiguous_strides``; ``CHANNELS_LAST`` needs rank 4 and gives
    ``c10::get_channels_last_strides_2d`` (C stride 1, then W, H, N, each the plain product
    of the sizes before it, so a size-0 dim zeroes the strides after it: ``[2, 0, 4, 5]``
    gives ``(0, 1, 0, 0)``); ``CHANNELS_LAST_3D`` needs rank 5 and gives
    ``c10::get_channels_last_strides_3d``; ``PRESERVE`` is refused. Every refusal raises
    RuntimeError with torch's message.
    """
    memory_format = MemoryFormat.from_torch(memory_format)
    _check_size_nonnegative(sizes)
    if memory_format is MemoryFormat.CONTIGUOUS:
        return contiguous_strides(sizes)
    if memory_format is MemoryFormat.CHANNELS_LAST:
        if len(sizes) != 4:
            raise RuntimeError("required rank 4 tensor to use channels_last format")
        return _channels_last_2d_strides(sizes)
    if memory_format is MemoryFormat.CHANNELS_LAST_3D:
        if len(sizes) != 5:
            raise RuntimeError("required rank 5 tensor to use channels_last_3d format")
        return _channels_last_3d_strides(sizes)
    raise RuntimeError("unsupported memory format Preserve")


def sort_dims(order: Iterable[int], comes_after: Callable[[int, int], int]) -> tuple[int, ...]:
    """ATen's dimension insertion sort, shared by ``infer_dense_strides`` and
    ``TensorIteratorBase::reorder_dimensions``.

    Each dim moves towards the front past every earlier dim it must precede
    (``comes_after(earlier, dim) > 0``), and stops at the first it must follow (``< 0``);
    dims the comparison cannot order (``0``) are stepped over without swapping, so the
    result is not a plain stable sort.
    """
    perm = list(order)
    for i in range(1, len(perm)):
        moving = i
        for earlier in range(i - 1, -1, -1):
            comparison = comes_after(perm[earlier], perm[moving])
            if comparison > 0:
                perm[earlier], perm[moving] = perm[moving], perm[earlier]
                moving = earlier
            elif comparison < 0:
                break
    return tuple(perm)


def infer_dense_strides(sizes: Sequence[int], strides: Sequence[int]) -> tuple[int, ...]:
    """Dense strides that keep the input's dimension order; ``at::infer_dense_strides``.

    Rule (ATen/ExpandUtils.cpp, the same ordering as TensorIterator's reorder_dimensions):
    rank 0 gives ``()`` and rank 1 gives ``(1,)``. Otherwise start from the dims in reverse
    order (last dim first = fastest) and insertion-sort them: comparing an earlier entry
    ``a`` with the entry ``b`` being placed, a stride of 0 on either side is "ambiguous"
    (keep looking further back without moving), a smaller stride on ``a`` stops the search,
    a larger stride on ``a`` swaps them, and equal strides swap only when ``a``'s size is
    larger. Because ambiguous entries are skipped, ``b`` can swap with a non-adjacent entry
    and stride-0 dims keep their places. Then hand out strides in that order, multiplying
    by each size above 1 (sizes 0 and 1 do not advance the stride).
    """
    _check_same_rank(sizes, strides)
    ndim = len(sizes)
    if ndim == 0:
        return ()
    if ndim == 1:
        return (1,)

    def comes_after(dim0: int, dim1: int) -> int:
        """1 if dim0 must go after dim1, -1 if before, 0 if the strides cannot tell."""
        stride0, stride1 = strides[dim0], strides[dim1]
        if stride0 == 0 or stride1 == 0:
            return 0
        if stride0 < stride1:
            return -1
        if stride0 > stride1:
            return 1
        return 1 if sizes[dim0] > sizes[dim1] else 0

    perm = sort_dims(range(ndim - 1, -1, -1), comes_after)
    out = [0] * ndim
    stride = 1
    for d in perm:
        out[d] = stride
        if sizes[d] > 1:
            stride *= sizes[d]
    return tuple(out)


def preserve_format_strides(sizes: Sequence[int], strides: Sequence[int]) -> tuple[int, ...]:
    """Strides of ``empty_like`` / ``clone`` / ``_to_copy`` with ``preserve_format``.

    Rule (``at::native::empty_like``, strided CPU-like devices): a non-overlapping-and-dense
    input keeps its strides exactly (size-1 dim strides included); any other input gets
    ``infer_dense_strides``. ``suggest_memory_format`` plays no part.
    """
    if is_non_overlapping_and_dense(sizes, strides):
        return tuple(strides)
    return infer_dense_strides(sizes, strides)


def compute_storage_nbytes(
    sizes: Sequence[int], strides: Sequence[int], itemsize: int, storage_offset: int = 0
) -> int:
    """Bytes a storage needs to hold the layout; ``at::detail::computeStorageNbytes``.

    Rule: any size 0 gives 0; otherwise ``(storage_offset + 1 + sum(stride * (size - 1)))
    * itemsize``. Errors, all RuntimeError with torch's messages, in ``empty_strided``'s
    order: a negative size (``check_size_nonnegative``); sizes and strides of different
    lengths; a negative storage offset (``as_strided``'s check); and
    ATen's overflow check: a result above ``2**63 - 1``, or a negative stride on a dim of
    size 2 or more (which ATen's uint64 arithmetic wraps to a huge value).
    """
    _check_size_nonnegative(sizes)
    if len(sizes) != len(strides):
        raise RuntimeError(
            f"dimensionality of sizes ({len(sizes)}) must match dimensionality of "
            f"strides ({len(strides)})"
        )
    if storage_offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {storage_offset}")
    nbytes = storage_offset + 1
    for size, stride in zip(sizes, strides, strict=True):
        if size == 0:
            return 0
        nbytes += stride * (size - 1)
    nbytes *= itemsize
    # ATen sums in uint64_t and fails on any wrap-around or a result above int64's maximum.
    # With non-negative strides every partial sum is at most the final one, so only the
    # final value matters; a negative stride on a dim of size >= 2 becomes a huge uint64
    # term, which always fails.
    overflowed = nbytes > _STORAGE_MAX or any(
        stride < 0 and size > 1 for size, stride in zip(sizes, strides, strict=True)
    )
    if overflowed:
        raise RuntimeError(
            f"Storage size calculation overflowed with sizes={list(sizes)} "
            f"and strides={list(strides)}"
        )
    return nbytes


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
