"""The vocabulary of layouts: ``MemoryFormat`` (c10/core/MemoryFormat.h), the dimension
orders of the channels_last formats and their dense strides, ``contiguous_strides``,
``numel``, and the rank and size checks of ``TensorImpl``."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# The largest byte count a storage may have: ATen's storage_max() is int64's maximum.
_STORAGE_MAX = 2**63 - 1

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
