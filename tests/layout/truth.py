"""Helpers that ask CPU torch for the truth about a (sizes, strides) layout."""

from __future__ import annotations

from collections.abc import Callable

import torch

from .strategies import storage_elements


def strided(
    sizes: tuple[int, ...],
    strides: tuple[int, ...],
    offset: int = 0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """A CPU view with exactly these sizes/strides/offset over a zeroed buffer.

    ``as_strided`` builds the TensorImpl through ``set_sizes_and_strides``, so its cached
    flags come from ``refresh_contiguous`` just as for any other view.
    """
    buffer = torch.zeros(max(storage_elements(sizes, strides, offset), 1), dtype=dtype)
    return buffer.as_strided(sizes, strides, offset)


def outcome(fn: Callable[[], object]) -> tuple[str, object]:
    """``("ok", value)`` or ``(exception type name, first line of its message)``."""
    try:
        return "ok", fn()
    except Exception as exc:  # the type and message are what is compared
        return type(exc).__name__, str(exc).splitlines()[0]
