"""Factory kernels: ``empty.memory_format``, ``empty_strided`` and ``empty_like`` on mydev.

Strides come from `torch_mydev_rules.layout`; the bytes come from the stub's allocator through
its one primitive, ``_C._empty_strided`` (storage sized as ATen's computeStorageNbytes),
wrapped by ``empty_mydev``. That primitive never fills: kernels allocate their outputs
through it, as TensorIterator allocates through ``at::detail::empty_*``. The factories users
call (``empty_like`` here, ``empty``/``empty_strided`` in the stub) fill under deterministic
algorithms, as ATen's do.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from torch_mydev import _C
from torch_mydev.ops import replay
from torch_mydev_rules.iterator.cache import LRUCache
from torch_mydev_rules.layout import (
    MemoryFormat,
    preserve_format_strides,
    strides_for_memory_format,
)

HUGE_PAGE_MIN_BYTES: int = _C.HUGE_PAGE_MIN_BYTES  # the allocator advises huge pages from here
_fill_uninitialized = _C._fill_uninitialized


def empty_mydev(
    sizes: Sequence[int], strides: Sequence[int], dtype: torch.dtype, index: int
) -> torch.Tensor:
    """An uninitialised mydev tensor from the stub's allocator (``_C._empty_strided``).

    Blocks of at least ``HUGE_PAGE_MIN_BYTES`` come advised for transparent huge pages
    (``csrc_stub/runtime/allocator.cpp``); contents, sizes, strides and statistics are unaffected.
    """
    return _C._empty_strided(sizes, strides, dtype, index)


def _check_options(
    device: torch.device | None, layout_: torch.layout | None, pin_memory: bool | None
) -> int:
    """Validate the TensorOptions a factory got and return the device index.

    Mirrors what ATen's CPU/CUDA factories accept: strided layout only, no pinning of
    device memory, and an existing device ordinal.
    """
    if layout_ is not None and layout_ != torch.strided:
        raise RuntimeError(f"mydev supports only the strided layout, got {layout_}")
    if pin_memory:
        raise RuntimeError("Only dense CPU tensors can be pinned")
    index = -1 if device is None or device.index is None else device.index  # -1: current
    _C._check_device(index)
    return index


def like_strides(
    sizes: tuple[int, ...], strides: tuple[int, ...], memory_format: torch.memory_format | None
) -> tuple[int, ...]:
    """Strides of a new tensor made "like" one of `sizes`/`strides` in `memory_format`.

    The rule of empty_like, clone and _to_copy (TensorFactories.cpp, TensorConversions.cpp):
    preserve_format (the default) keeps the strides of a non-overlapping-and-dense tensor and
    otherwise uses infer_dense_strides; any other format gives that format's strides.
    """
    fmt = MemoryFormat.from_torch(torch.preserve_format if memory_format is None else memory_format)
    if fmt is MemoryFormat.PRESERVE:
        return preserve_format_strides(sizes, strides)
    return strides_for_memory_format(sizes, fmt)


def cached_like_strides(
    sizes: Sequence[int], strides: Sequence[int], memory_format: torch.memory_format | None
) -> tuple[int, ...]:
    """``like_strides``, remembered per (sizes, strides, memory_format); errors are not kept."""
    key = (sizes, strides, memory_format)
    result = _like.get(key)
    if result is None:
        result = tuple(like_strides(tuple(sizes), tuple(strides), memory_format))
        _like.put(key, result)
    return result


_like: LRUCache[tuple, tuple[int, ...]] = LRUCache(4096)


def allocate(
    sizes: tuple[int, ...], strides: tuple[int, ...], dtype: torch.dtype, device: torch.device
) -> torch.Tensor:
    """An uninitialised strided tensor on mydev (our allocator) or on CPU (torch's)."""
    if device.type == "cpu":
        return torch.empty_strided(sizes, strides, dtype=dtype, device=device)
    index = -1 if device.index is None else device.index  # -1: the current device
    return empty_mydev(sizes, strides, dtype, index)


def empty_like(
    self: torch.Tensor,
    *,
    dtype: torch.dtype | None = None,
    layout: torch.layout | None = None,
    device: torch.device | None = None,
    pin_memory: bool | None = None,
    memory_format: torch.memory_format | None = None,
) -> torch.Tensor:
    """aten::empty_like: sizes of `self`, strides from `like_strides`, options merged in.

    Under ``torch.use_deterministic_algorithms(True)`` with
    ``torch.utils.deterministic.fill_uninitialized_memory`` the memory is filled as ATen's
    empty_like fills it (``_C._fill_uninitialized``: NaN, or the dtype's largest value).
    """
    target = self.device if device is None else torch.device(device)
    if target.type != "cpu":
        _check_options(target, layout, pin_memory)
    strides = cached_like_strides(self.shape, self.stride(), memory_format)
    result = allocate(tuple(self.shape), strides, dtype or self.dtype, target)
    if target.type != "cpu":  # CPU's empty_strided has filled its own
        _fill_uninitialized(result)
    if (
        dtype in (None, self.dtype)
        and layout in (None, torch.strided)
        and (device is None or torch.device(device) == self.device)
        and not pin_memory
        and target.type != "cpu"
    ):
        _record(self, memory_format, result)
    return result


def _record(self: torch.Tensor, memory_format: torch.memory_format | None, new) -> None:
    """Hand the stub this layout's answer (ops/replay.py ``record_empty_like``): its next
    ``empty_like`` of the same layout and format runs there."""
    signature = _C._signature(self)
    if signature is None or signature[1]:  # no host storage, or a lazy bit
        return
    layout = (tuple(new.shape), tuple(new.stride()), new.dtype, new.get_device())
    replay.record_empty_like(signature[0], memory_format, layout)
