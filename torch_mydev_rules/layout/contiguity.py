"""Contiguity flags as ``TensorImpl::_refresh_contiguous`` caches them (c10/core/Contiguity.h),
the "strides like channels_last" guesses (c10/core/MemoryFormat.h) and
``TensorBase::suggest_memory_format``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from torch_mydev_rules.layout.formats import (
    _CHANNELS_LAST_2D_ORDER,
    _CHANNELS_LAST_3D_ORDER,
    MemoryFormat,
    _channels_last_2d_strides,
    _channels_last_3d_strides,
    _check_same_rank,
    numel,
)

if TYPE_CHECKING:
    import torch


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
