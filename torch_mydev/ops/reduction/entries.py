"""Decides nothing: remembers how a functional reduction call ran, so its repeat skips the rest.

Kept per (op, the input's ``_C._signature`` key -- sizes, strides, dtype, device --, the
dims as given, ``keepdim``, ``dtype=``, torch's thread count): the result's sizes, strides
and dtype, and the prepared kernel (``kernels.reduction``) that the first call ran straight
on the input. A repeated call allocates the result and runs that kernel: the checks, the
plan and the kernel set-up gave the same answers the first time, and a call that raised,
fell back to CPU, reduced a cast temporary or an empty input was never recorded. Only
functional calls use it (``sum(x, 1)``, not ``sum(x, 1, out=y)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from torch_mydev import _C
from torch_mydev_rules.iterator.cache import LRUCache

__all__ = ["Entry", "lookup", "record"]

_signature = _C._signature
_empty_strided = _C._empty_strided


class Entry(NamedTuple):
    """A recorded call: the result's layout, and ``run(out address, input address, bytes
    the input's storage holds from there)``."""

    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: torch.dtype
    run: Callable[[int, int, int], None]


_entries: LRUCache[tuple, Entry] = LRUCache(4096)


def lookup(
    op: str, self: torch.Tensor, dim, keepdim: bool, dtype: torch.dtype | None
) -> tuple[torch.Tensor | None, tuple | None]:
    """``(result, key)``: the result of a recorded call (and its key), or ``(None, key)`` for
    a call to record after the full path (``key`` None: never recorded, such as a tensor
    with a lazy conjugate/negative bit)."""
    signature = _signature(self)
    if signature is None:
        return None, None
    key, lazy_bits, start, base, nbytes = signature
    if lazy_bits:
        return None, None
    dims = dim if dim is None or isinstance(dim, int) else tuple(dim)
    cache_key = (op, key, dims, keepdim, dtype, torch.get_num_threads())
    entry = _entries.peek(cache_key)
    if entry is None:
        return None, cache_key
    out = _empty_strided(entry.sizes, entry.strides, entry.dtype, self.get_device())
    entry.run(out.data_ptr(), start, base + nbytes - start)
    return out, cache_key


def record(key: tuple, result: torch.Tensor, run: Callable[[int, int, int], None]) -> None:
    """Remember that the call ``key`` made ``result``'s layout and ran ``run`` on its input."""
    _entries.put(key, Entry(tuple(result.shape), result.stride(), result.dtype, run))
