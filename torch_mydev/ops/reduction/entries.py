"""Decides nothing: serves a repeated functional reduction call through ``per_call.serve``.

Kept per (op, the input's ``_C._signature`` key -- sizes, strides, dtype, device --, the
dims as given, ``keepdim``, ``dtype=``, torch's thread count): the result's sizes, strides
and dtype, and the prepared kernel (``kernels.reduction``) that the first call ran straight
on the input. A repeated call allocates the result and runs that kernel: the checks, the
plan and the kernel set-up gave the same answers the first time. A signature whose first
call fell back to CPU, reduced a cast temporary, went through a float32 buffer or reduced
an empty input is ``GENERAL``: its repeats take the whole path again. A call that raised
leaves nothing. Only functional calls use it (``sum(x, 1)``, not ``sum(x, 1, out=y)``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from torch_mydev.ops import replay
from torch_mydev.ops.per_call import GENERAL, Entry, serve_one
from torch_mydev_rules.iterator.cache import LRUCache

__all__ = ["Full", "Repeat", "served"]

Repeat = tuple[Callable[[int, int, int], None], int]
"""What a repeat of a call may run: ``run(out address, input address, bytes the input's
storage holds from there)`` (``kernels.reduction.runner`` / ``cascade_runner``), and the
bytes from the input's element 0 that it reads."""
Full = Callable[..., tuple[torch.Tensor, Repeat | None]]
"""An op's whole path, ``full(self, dim, keepdim, dtype, out)``: its result, and what a
repeat may run (None: the kernel did not run straight from the input into a new result)."""

_entries: LRUCache[tuple, Entry | object] = LRUCache(4096)


def served(
    op: str, full: Full, self: torch.Tensor, dim, keepdim: bool, dtype: torch.dtype | None
) -> torch.Tensor | None:
    """The result of a functional call through its signature's entry (the first call runs
    ``full``), or None where the caller runs ``full`` itself: a tensor without host storage
    or with a lazy conjugate/negative bit, a ``GENERAL`` signature, a storage too small."""
    dims = dim if dim is None or isinstance(dim, int) else tuple(dim)
    head = (op, dims, keepdim, dtype, torch.get_num_threads())
    record_in = None if isinstance(dims, int) else replay.reduction_target(op, dims, keepdim, dtype)
    call = (full, self, dim, keepdim, dtype)
    return serve_one(_entries, head, self, _first, call, None, record_in)


def _first(
    full: Full, self: torch.Tensor, dim, keepdim: bool, dtype: torch.dtype | None
) -> tuple[torch.Tensor, Entry | object]:
    """A signature's first call: the whole path, then the entry of what it ran, if any."""
    result, repeat = full(self, dim, keepdim, dtype, None)
    if repeat is None:
        return result, GENERAL
    run, extent = repeat
    # The loop is told the input holds ``extent`` bytes: ``serve`` has checked the storage
    # holds at least that many; the runner still checks the alignment.
    sizes, strides = tuple(result.shape), result.stride()
    device = result.get_device()
    # an exact float replica the stub can replay (``CascadeRun``: its C entry and block)
    prepared = run if hasattr(run, "replay_block") else None
    entry = Entry(run, (extent,), (0, extent), 1, sizes, strides, result.dtype, device,
                  prepared=prepared)  # fmt: skip
    return result, entry
