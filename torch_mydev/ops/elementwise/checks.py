"""Decides whether an elementwise call is allowed: ATen's argument checks, with its messages.

``BinaryOps.h`` (``sub_check``, ``alpha_check``), TensorIterator's same-device rule and
``assert_no_partial_overlap``, the dispatch macros' refusal of unsupported dtypes, and
``Scalar::to``'s overflow check (``c10::overflows``). Nothing here plans or computes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np
import torch

from torch_mydev.kernels.elementwise import kernel as kernels
from torch_mydev.ops.buffers import storage_span
from torch_mydev_rules import layout
from torch_mydev_rules.iterator.numbers import Number, number_dtype
from torch_mydev_rules.iterator.promotion import to_real

Arg = torch.Tensor | Number

_PARTIAL_OVERLAP = (
    "unsupported operation: some elements of the input tensor and the written-to tensor refer "
    "to a single memory location. Please clone() the tensor before performing the operation."
)
_BOOL_NEG = (
    "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
    "invert a mask, use the `~` or `logical_not()` operator instead."
)
_BOOL_SUB_BOTH = (
    "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
    "`logical_xor()` operator instead."
)
_BOOL_SUB = (
    "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
    "invert a mask, use the `~` or `logical_not()` operator instead."
)
# c10 type names, as Scalar::to's overflow error spells them.
_C_TYPE_NAMES = {
    torch.bool: "bool",
    torch.uint8: "uint8_t",
    torch.int8: "int8_t",
    torch.int16: "int16_t",
    torch.int32: "int",
    torch.int64: "int64_t",
    torch.float16: "c10::Half",
    torch.bfloat16: "c10::BFloat16",
    torch.float32: "float",
    torch.float64: "double",
    torch.complex64: "c10::complex<float>",
    torch.complex128: "c10::complex<double>",
}


def check_devices(out: torch.Tensor | None, inputs: Sequence[Arg]) -> None:
    """TensorIterator's same-device rule: CPU zero-dim inputs may join any device."""
    device = None
    tensors = [(out, True)] + [(x, False) for x in inputs]
    for t, is_output in tensors:
        if not isinstance(t, torch.Tensor):
            continue
        if not is_output and t.device.type == "cpu" and t.dim() == 0:
            continue
        if device is None:
            device = t.device
        elif t.device != device:
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least two "
                f"devices, {device} and {t.device}!"
            )


def check_partial_overlap(out: torch.Tensor, inputs: Sequence[Arg]) -> None:
    """``assert_no_partial_overlap(output, input)`` for every input that is not ``out``."""
    for x in inputs:
        if not isinstance(x, torch.Tensor) or x is out or not shares_storage(out, x):
            continue
        status = layout.get_overlap_status(_mem_range(out), _mem_range(x))
        if status is layout.MemOverlapStatus.PARTIAL:
            raise RuntimeError(_PARTIAL_OVERLAP)


class NotNative(NotImplementedError):
    """A dtype the native kernels do not compute in: the registration (``ops/registry.py``)
    runs the call through CPU's kernel instead (the fallback), which computes it or raises
    CPU's own error."""


def check_supported(name: str, dtype: torch.dtype | None) -> None:
    """Hand dtypes the kernels lack (complex32, uint16/32/64, float8...) to CPU's kernel:
    raises ``NotNative``, before anything is allocated or written."""
    if dtype not in kernels.SUPPORTED_DTYPES:
        raise NotNative(f"mydev {name}: dtype {dtype} is not supported by the native kernels")


@functools.cache
def cpu_bool_error(op: str) -> type[RuntimeError]:
    """The exception CPU's own check raises for ``op`` ("sub", "neg", "relu") on a bool
    tensor, read once from CPU: ``RuntimeError`` in torch 2.13 (``TORCH_CHECK``),
    ``NotImplementedError`` from torch 2.14 (``TORCH_CHECK_NOT_IMPLEMENTED``)."""
    t = torch.tensor([True])
    probes: dict[str, Callable[[], object]] = {
        "sub": lambda: torch.sub(t, t),
        "neg": lambda: torch.neg(t),
        "relu": lambda: torch.relu(t),
    }
    try:
        probes[op]()
    except RuntimeError as error:
        return type(error)
    raise RuntimeError(f"torch_mydev: this torch's CPU {op} of a bool tensor no longer raises")


def sub_check(self: Arg, other: Arg) -> None:
    """``sub_check`` (BinaryOps.h): no bool operands (CPU's exception type, ``cpu_bool_error``)."""
    self_bool = _arg_dtype(self) == torch.bool
    other_bool = _arg_dtype(other) == torch.bool
    if self_bool and other_bool:
        raise cpu_bool_error("sub")(_BOOL_SUB_BOTH)
    if self_bool or other_bool:
        raise cpu_bool_error("sub")(_BOOL_SUB)


def neg_check(dtype: torch.dtype) -> None:
    """``neg``'s check (UnaryOps.cpp): no bool tensor (CPU's exception type)."""
    if dtype == torch.bool:
        raise cpu_bool_error("neg")(_BOOL_NEG)


def alpha_check(dtype: torch.dtype, alpha: Number) -> None:
    """``alpha_check`` (BinaryOps.h) against the common dtype."""
    if isinstance(alpha, bool) and dtype != torch.bool:
        raise RuntimeError("Boolean alpha only supported for Boolean results.")
    if not (dtype.is_floating_point or dtype.is_complex or isinstance(alpha, int)):
        raise RuntimeError(
            "For integral input tensors, argument alpha must not be a floating point number."
        )
    if not dtype.is_complex and isinstance(alpha, complex):
        raise RuntimeError(
            "For non-complex input tensors, argument alpha must not be a complex number."
        )


def checked_scalar(value: Number, dtype: torch.dtype) -> np.ndarray:
    """``Scalar::to<T>()``: ``c10::checked_convert``'s overflow check, then the conversion."""
    check_range(value, dtype)
    return kernels.scalar_bytes(value, dtype)


def check_range(value: Number, dtype: torch.dtype) -> None:
    """Raise ``Scalar::to<T>``'s error when ``value`` overflows ``dtype``."""
    if _overflows(value, dtype):
        raise RuntimeError(
            f"value cannot be converted to type {_C_TYPE_NAMES[dtype]} without overflow"
        )


def _overflows(value: Number, dtype: torch.dtype) -> bool:
    """``c10::overflows<To, From>`` for a Scalar holding ``value`` (TypeCast.h)."""
    if isinstance(value, bool) or dtype == torch.bool:
        return False
    if isinstance(value, complex):
        if not dtype.is_complex and value.imag != 0:
            return True
        return _overflows(value.real, dtype) or _overflows(value.imag, dtype)
    if dtype.is_complex:
        dtype = to_real(dtype)
    if isinstance(value, int):
        if dtype.is_floating_point:
            return dtype == torch.float16 and not -65504 <= value <= 65504
        info = torch.iinfo(dtype)
        if dtype == torch.uint8:  # negative values may wrap (two's complement)
            return value > info.max or (value < 0 and -value > info.max)
        return not info.min <= value <= info.max
    if math.isinf(value) and dtype.is_floating_point:
        return False
    if math.isnan(value):
        return not dtype.is_floating_point
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    # c10 compares in double: int64's maximum becomes 2**63, which itself passes.
    return not float(info.min) <= value <= float(info.max)


def _arg_dtype(x: Arg) -> torch.dtype:
    return x.dtype if isinstance(x, torch.Tensor) else number_dtype(x)


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``Storage::is_alias_of``: one storage object. Copy-on-write siblings
    (``Tensor._lazy_clone``) share bytes but not a storage: CPU checks them as unrelated, and
    the kernel materialises the one it writes before reading the other."""
    if a.device != b.device:
        return False
    return a.untyped_storage()._cdata == b.untyped_storage()._cdata


def _mem_range(t: torch.Tensor) -> layout.MemRange:
    return layout.MemRange.from_layout(
        storage_span(t)[0], t.shape, t.stride(), t.element_size(), t.storage_offset()
    )
