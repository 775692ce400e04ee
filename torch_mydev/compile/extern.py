"""Extern ``out=`` calls of compiled mydev graphs, run by the CPU op on aliases: no copy.

Inductor calls library kernels (``extern_kernels.mm``, ``addmm``, ``bmm``, ...) with an
``out=`` buffer it allocated. For a mydev graph the generated wrapper calls `run_out` instead:
each mydev tensor argument becomes a CPU tensor over the same bytes (``_C._cpu_alias``; two
views of one mydev storage share one CPU storage, so ATen's overlap checks see what they
would see on CPU), and the CPU kernel writes straight into the mydev output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torch_mydev import _C
from torch_mydev._names import DEVICE


def _aliaser() -> Callable[[Any], Any]:
    seen: dict[int, torch.Tensor] = {}

    def alias(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.device.type == DEVICE:
            storage = value.untyped_storage()
            key = (storage.data_ptr(), storage.nbytes())
            cpu = _C._cpu_alias(value, seen.get(key))
            seen.setdefault(key, cpu)
            return cpu
        if isinstance(value, (list, tuple)):
            return type(value)(alias(v) for v in value)
        return value

    return alias


def run_out(kernel: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Call ``kernel(*args, **kwargs)`` (an ``out=`` form) on CPU aliases of mydev tensors."""
    alias = _aliaser()
    kernel(*(alias(a) for a in args), **{k: alias(v) for k, v in kwargs.items()})


def run_multi_out(
    names: tuple[str, ...], kernel: Callable[..., Any], *args: Any, **kwargs: Any
) -> tuple[Any, ...]:
    """`run_out` for a kernel with several ``out`` keywords (``values=``, ``indices=``):
    returns the mydev outputs named by `names`, as the ``out=`` form returns its outputs."""
    run_out(kernel, *args, **kwargs)
    return tuple(kwargs[name] for name in names)
