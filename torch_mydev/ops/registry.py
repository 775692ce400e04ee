"""The table of mydev's Python kernels: which aten op each function implements."""

from collections.abc import Callable

import torch

from torch_mydev.ops import conversions, copy, factories

KERNELS: dict[str, Callable] = {
    "empty.memory_format": factories.empty_memory_format,
    "empty_strided": factories.empty_strided,
    "empty_like": factories.empty_like,
    "copy_": copy.copy_,
    "_local_scalar_dense": copy.local_scalar_dense,
    "clone": conversions.clone,
    "_to_copy": conversions._to_copy,
}

_library: torch.library.Library | None = None


def register() -> None:
    """Register every kernel of `KERNELS` for PrivateUse1 (once per process)."""
    global _library
    if _library is not None:
        return
    _library = torch.library.Library("aten", "IMPL")
    for op, fn in KERNELS.items():
        _library.impl(op, fn, "PrivateUse1")
