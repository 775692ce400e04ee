"""The strides ``at::empty`` gives for a memory format, and the strides ``empty_like`` /
``clone`` give with ``preserve_format`` (``at::infer_dense_strides``, ATen/ExpandUtils.cpp)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from torch_mydev_rules.layout.contiguity import is_non_overlapping_and_dense
from torch_mydev_rules.layout.formats import (
    MemoryFormat,
    _channels_last_2d_strides,
    _channels_last_3d_strides,
    _check_same_rank,
    _check_size_nonnegative,
    contiguous_strides,
)

if TYPE_CHECKING:
    import torch


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
