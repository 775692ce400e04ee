"""The table of mydev's Python kernels: which aten op each function implements."""

from collections.abc import Callable

import torch

from torch_mydev.ops import factories

KERNELS: dict[str, Callable] = {
    "empty.memory_format": factories.empty_memory_format,
    "empty_strided": factories.empty_strided,
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
