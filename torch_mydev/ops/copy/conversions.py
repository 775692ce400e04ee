"""``clone`` and ``_to_copy`` on mydev: allocate with our layout rule, then ``copy_``.

Both are registered below autograd, so ``grad_fn`` stays what CPU gives
(``CloneBackward0``, ``ToCopyBackward0``); ``contiguous`` and ``Tensor.to`` are torch's own
composites that end here.
"""

from __future__ import annotations

import torch

from torch_mydev import _C
from torch_mydev.ops import replay
from torch_mydev.ops.copy.aten import CopyEntry, check_dtypes, copy_into_new, entry_for
from torch_mydev.ops.factories import allocate, cached_like_strides, empty_mydev
from torch_mydev_rules.iterator.cache import LRUCache

_signature = _C._signature
_empty_strided = _C._empty_strided
_check_device = _C._check_device


def clone(self: torch.Tensor, *, memory_format: torch.memory_format | None = None) -> torch.Tensor:
    """aten::clone: a new tensor laid out by ``like_strides`` (preserve by default), copied.

    ``self`` is on mydev (clone dispatches on it), and so is the result.
    """
    records = replay.NEW_COPY.get(memory_format)
    if records is not None:  # a recorded layout, in one stub call
        result = replay.replay_copy(records, None, self)
        if result is not None:
            return result
    signature = _signature(self)  # None, or (key, lazy bits, start, base, storage bytes)
    if signature is not None:
        key, lazy_bits, start, base, nbytes = signature
    if signature is None or lazy_bits:  # no host storage, or a lazy conjugate/negative bit
        strides, entry = _new_layout(self, self.dtype, memory_format)
        out = empty_mydev(self.shape, strides, self.dtype, self.get_device())
        return copy_into_new(out, self, entry)
    new = _by_signature.peek((key, None, memory_format))
    if new is None:
        new = _new_copy((key, None, memory_format), self, self.dtype, memory_format, self.device)
        return new.fill(new.allocate(), self, start, base + nbytes - start)
    records = replay.NEW_COPY.setdefault(memory_format, {})
    if key not in records and new.index is not None:  # a second call: the stub replays the third
        layout = (new.sizes, new.strides, new.dtype, new.index)
        replay.record_copy(records, key, new.entry.prepared, layout)
        replay.record_clone(key, memory_format, new.entry.prepared, layout)
    return new.fill(new.allocate(), self, start, base + nbytes - start)


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
    ``like_strides`` on the target device and filled by ``copy_``. A non-blocking copy to
    CPU lands in pinned memory, as ATen's ``pin_out`` rule gives for an accelerator's tensor
    (``at::accelerator::isAcceleratorExcluded(self.device().type(), kMPS)``).
    """
    if layout is not None and layout != self.layout:
        raise RuntimeError(
            "to(options) doesn't support converting to a different layout, but got "
            f"self.layout being {self.layout} and options.layout set as {layout}"
        )
    target = self.device if device is None else torch.device(device)
    if non_blocking and target.type == "cpu":
        strides, entry = _new_layout(self, dtype or self.dtype, memory_format)
        out = torch.empty_strided(
            tuple(self.shape), strides, dtype=dtype or self.dtype, pin_memory=True
        )
        return copy_into_new(out, self, entry)
    signature = _signature(self)
    if signature is not None:
        key, lazy_bits, start, base, nbytes = signature
    if signature is None or lazy_bits:
        strides, entry = _new_layout(self, dtype or self.dtype, memory_format)
        out = allocate(tuple(self.shape), strides, dtype or self.dtype, target)
        return copy_into_new(out, self, entry)
    cache_key = (key, dtype, memory_format, target)
    new = _by_signature.peek(cache_key)
    if new is None:
        new = _new_copy(cache_key, self, dtype or self.dtype, memory_format, target)
    elif not new.recorded and dtype is not None and target == self.device:
        layout = (new.sizes, new.strides, new.dtype, new.index)  # a second call onto mydev:
        recorded = replay.record_to_copy(key, dtype, memory_format, new.entry.prepared, layout)
        new.recorded = bool(recorded)  # the stub replays the third (None: its entry compiles)
    return new.fill(new.allocate(), self, start, base + nbytes - start)


class NewCopy:
    """A copy of one source layout into a new tensor: its layout and the copy, made once.

    ``sizes``/``strides``/``dtype``/``device`` describe the new tensor (``like_strides``);
    ``entry`` is the ``CopyEntry`` of the copy into it. A new tensor is dense, shares no
    memory with the source and its storage holds exactly its elements, so ``fill`` needs
    none of Copy.cpp's overlap checks nor a bounds check on the destination.
    """

    __slots__ = ("device", "dtype", "entry", "index", "recorded", "sizes", "strides")

    def __init__(
        self,
        sizes: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: torch.dtype,
        device: torch.device,
        entry: CopyEntry,
    ) -> None:
        self.sizes = sizes
        self.strides = strides
        self.dtype = dtype
        self.device = device
        self.index = None if device.type == "cpu" else -1 if device.index is None else device.index
        self.entry = entry
        self.recorded = False  # handed to the stub's _to_copy replay (ops/replay.py)

    def allocate(self) -> torch.Tensor:
        """The new, uninitialised tensor (on mydev: the stub's allocator, without Python)."""
        if self.index is None:
            return torch.empty_strided(self.sizes, self.strides, dtype=self.dtype)
        return _empty_strided(self.sizes, self.strides, self.dtype, self.index)

    def fill(
        self, out: torch.Tensor, src: torch.Tensor, src_start: int, src_bytes: int
    ) -> torch.Tensor:
        """Copy ``src`` (element 0 at ``src_start``, ``src_bytes`` bytes to its storage's end)
        into ``out``, a tensor made by ``allocate``; return ``out``."""
        entry = self.entry
        dst_bytes = entry.prepared.dst_extent if entry.prepared is not None else 0
        entry.run(out, out.data_ptr(), dst_bytes, src, src_start, src_bytes, stacklevel=4)
        return out


def _new_copy(
    key: tuple,
    self: torch.Tensor,
    dtype: torch.dtype,
    memory_format: torch.memory_format | None,
    device: torch.device,
) -> NewCopy:
    """Make (and remember under ``key``) the ``NewCopy`` of ``self`` into ``dtype``/``device``."""
    if device.type != "cpu":
        _check_device(device.index or 0)
    check_dtypes(dtype, self.dtype)
    strides, entry = _new_layout(self, dtype, memory_format)
    new = NewCopy(tuple(self.shape), strides, dtype, device, entry)
    _by_signature.put(key, new)
    return new


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
# (source signature, dtype, memory_format[, device]) -> NewCopy: the per-call lookup.
_by_signature: LRUCache[tuple, NewCopy] = LRUCache(LAYOUT_CACHE_SIZE)
