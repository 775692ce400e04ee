"""``clone`` and ``_to_copy`` on mydev: allocate with our layout rule, then ``copy_``.

Both are registered below autograd, so ``grad_fn`` stays what CPU gives
(``CloneBackward0``, ``ToCopyBackward0``); ``contiguous`` and ``Tensor.to`` are torch's own
composites that end here.
"""

from __future__ import annotations

import torch

from torch_mydev.ops.copy import copy_
from torch_mydev.ops.factories import allocate, like_strides


def clone(self: torch.Tensor, *, memory_format: torch.memory_format | None = None) -> torch.Tensor:
    """aten::clone: a new tensor laid out by ``like_strides`` (preserve by default), copied."""
    sizes = tuple(self.shape)
    strides = like_strides(sizes, self.stride(), memory_format)
    return copy_(allocate(sizes, strides, self.dtype, self.device), self)


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
    sizes = tuple(self.shape)
    strides = like_strides(sizes, self.stride(), memory_format)
    out = allocate(sizes, strides, dtype or self.dtype, target)
    return copy_(out, self, non_blocking)
