"""``clone`` and ``_to_copy`` on mydev: allocate with our layout rule, then ``copy_``.

Both are registered below autograd, so ``grad_fn`` stays what CPU gives
(``CloneBackward0``, ``ToCopyBackward0``); ``contiguous`` and ``Tensor.to`` are torch's own
composites that end here.
"""

from __future__ import annotations

import torch

from torch_mydev.iterator.cache import LRUCache
from torch_mydev.ops.copy import CopyEntry, copy_into_new, entry_for
from torch_mydev.ops.factories import allocate, cached_like_strides, empty_mydev


def clone(self: torch.Tensor, *, memory_format: torch.memory_format | None = None) -> torch.Tensor:
    """aten::clone: a new tensor laid out by ``like_strides`` (preserve by default), copied.

    ``self`` is on mydev (clone dispatches on it), and so is the result.
    """
    strides, entry = _new_layout(self, self.dtype, memory_format)
    out = empty_mydev(self.shape, strides, self.dtype, self.get_device())
    return copy_into_new(out, self, entry)


def _to_copy(
    self: torch.Tensor,
    *,
    dtype: torch.dtype | None = None,
    layout: torch.layout | None = None,
    device: torch.device | None = None,
    pin_memory: bool | None = None,
    non_blocking: bool = False,
    memory_format: torch.memory_format | None = None,
) -> torch.Tensor:
    """aten::_to_copy from mydev (to mydev or CPU): TensorConversions.cpp's ``_to_copy``.

    A layout change is refused as torch refuses it; the result is laid out by
    ``like_strides`` on the target device and filled by ``copy_``.
    """
    if layout is not None and layout != self.layout:
        raise RuntimeError(
            "to(options) doesn't support converting to a different layout, but got "
            f"self.layout being {self.layout} and options.layout set as {layout}"
        )
    target = self.device if device is None else torch.device(device)
    strides, entry = _new_layout(self, dtype or self.dtype, memory_format)
    out = allocate(tuple(self.shape), strides, dtype or self.dtype, target)
    return copy_into_new(out, self, entry)


def _new_layout(
    self: torch.Tensor, dtype: torch.dtype, memory_format: torch.memory_format | None
) -> tuple[tuple[int, ...], CopyEntry]:
    """Strides of the new tensor (``like_strides``) and the copy into it, cached per layout."""
    key = (self.shape, self.stride(), self.dtype, dtype, memory_format)
    hit = _layouts.get(key)
    if hit is None:
        strides = cached_like_strides(self.shape, self.stride(), memory_format)
        entry = entry_for(self.shape, strides, dtype, self.shape, self.stride(), self.dtype)
        hit = (strides, entry)
        _layouts.put(key, hit)
    return hit


# (sizes, strides, dtype, new dtype, memory_format) -> (new strides, CopyEntry).
LAYOUT_CACHE_SIZE = 4096
_layouts: LRUCache[tuple, tuple[tuple[int, ...], CopyEntry]] = LRUCache(LAYOUT_CACHE_SIZE)
