"""The table of mydev's Python kernels: which aten op each function implements.

``empty.memory_format`` and ``empty_strided`` are C++ (``csrc_stub/ops/factories.cpp``).

The elementwise overloads come from the op-family table (``ops/elementwise/families.py``).
"""

from collections.abc import Callable
from typing import Any

import torch

from torch_mydev import _C
from torch_mydev.kernels.jit import compiler
from torch_mydev.kernels.jit.compiler import NotCompiled
from torch_mydev.ops import factories, quantized, replay, tensor_type
from torch_mydev.ops.copy import aten as copy
from torch_mydev.ops.copy import conversions
from torch_mydev.ops.elementwise import families
from torch_mydev.ops.elementwise.checks import NotNative
from torch_mydev.ops.fallback import boxed as fallback
from torch_mydev.ops.fallback import sparse as fallback_sparse
from torch_mydev.ops.reduction import aten as reduction
from torch_mydev.ops.reduction import histogram
from torch_mydev.runtime import streams

KERNELS: dict[str, Callable] = {
    "empty_like": factories.empty_like,
    "copy_": copy.copy_,
    "_local_scalar_dense": copy.local_scalar_dense,
    "clone": conversions.clone,
    "_to_copy": conversions._to_copy,
    "record_stream": streams.record_stream,
    # Module._apply keeps Parameters (and ties) only when this says yes (ops/tensor_type.py)
    "_has_compatible_shallow_copy_type": tensor_type.has_compatible_shallow_copy_type,
    # native elementwise ops: functional, out= and in-place overloads (ops/elementwise/families.py)
    **families.overload_kernels(),
    # native reductions (ops/reduction/aten.py, docs/reductions.md)
    **reduction.KERNELS,
    # histc: CUDA's integer histogram; other dtypes run CPU's kernel (ops/reduction/histogram.py)
    **histogram.KERNELS,
}

_library: torch.library.Library | None = None


# A call's key -> the compile its first call waited for: a repeat while that compile runs
# goes straight to CPU's kernel instead of planning again to meet the same missing loop.
_waiting: dict[tuple, compiler.Job] = {}


def _part(value: Any) -> Any:
    """What of one argument can choose a loop: a tensor's layout key, a number's type."""
    if isinstance(value, torch.Tensor):
        signature = _C._signature(value)
        return (value.dtype, value.shape) if signature is None else signature[0]
    if isinstance(value, (bool, int, float, complex)):
        return type(value)
    if isinstance(value, (list, tuple)):
        return tuple(_part(item) for item in value)
    return (
        value
        if isinstance(value, (str, torch.dtype, torch.device, torch.memory_format))
        else type(value)
    )


def _served(name: str, fn: Callable) -> Callable:
    """``fn``, except that a call whose loop is still compiling (``kernels.compiler``: a
    first use with no numba cache) runs through CPU's kernel on aliases of its mydev
    buffers: CPU's exact bits, not counted in ``fallback_stats``. A repeat of that call
    (the same op, layouts and number types) goes there directly until the compile it met
    is done. A call in a dtype the native kernels lack (``NotNative``: uint16/32/64,
    float8, complex32) goes the same way, counted: CPU computes it or raises its own
    error."""
    base, _, overload = name.partition(".")
    op = getattr(getattr(torch.ops.aten, base), overload or "default")

    def on_cpu(args: tuple, kwargs: dict) -> Any:
        compiler.served_on_cpu(name)
        return fallback.run_on_cpu(op, args, kwargs, count=False)

    def call_key(args: tuple, kwargs: dict) -> tuple:
        return (name, _part(args), _part(tuple(kwargs.items())))

    def kernel(*args: Any, **kwargs: Any) -> Any:
        key = None
        if _waiting:
            if not compiler.pending():
                _waiting.clear()
            else:
                key = call_key(args, kwargs)
                job = _waiting.get(key)
                if job is not None and compiler.pending(job):
                    return on_cpu(args, kwargs)
        try:
            return fn(*args, **kwargs)
        except NotCompiled as error:
            if error.job is not None:
                _waiting[key or call_key(args, kwargs)] = error.job
            return on_cpu(args, kwargs)
        except NotNative:
            return fallback.run_on_cpu(op, args, kwargs)

    kernel.__name__ = kernel.__qualname__ = getattr(fn, "__name__", name)
    kernel.__wrapped__ = fn
    return kernel


def register() -> None:
    """Register every kernel of `KERNELS` for PrivateUse1, then the CPU fallback (once)."""
    global _library
    if _library is not None:
        return
    _library = torch.library.Library("aten", "IMPL")
    for op, fn in KERNELS.items():
        if op in replay.NATIVE:  # the stub replays recorded calls first (ops/replay.py)
            _library.impl(op, _served(op, fn), "PrivateUse3")
            _C._native_replay_kernel(op, *replay.NATIVE[op])
        else:
            _library.impl(op, _served(op, fn), "PrivateUse1")
    fallback.register()
    fallback_sparse.register()  # sparse COO tensors (docs/fallback.md)
    quantized.register()  # refuses quantized tensors with one clear error (docs/ops.md)
