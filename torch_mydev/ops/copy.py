"""``copy_`` on mydev (and between mydev and CPU): Copy.cpp's checks, our plan, a numba kernel.

The order of decisions is ``copy_impl``'s (aten/src/ATen/native/Copy.cpp): same tensor and
same-data early exits, internal overlap of the destination, partial overlap between the two,
then a TensorIterator plan (``torch_mydev.iterator``) whose coalesced shape and byte strides
drive ``torch_mydev.kernels.copy``.
"""

from __future__ import annotations

import warnings

import torch

from torch_mydev import layout
from torch_mydev.iterator.operands import OperandSpec, copy_config
from torch_mydev.iterator.plan import Plan, build
from torch_mydev.kernels.dtypes import SUPPORTED_DTYPES
from torch_mydev.ops.buffers import byte_offset, storage_bytes

_INTERNAL_OVERLAP = (
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation."
)
_PARTIAL_OVERLAP = (
    "unsupported operation: some elements of the input tensor and the written-to tensor refer "
    "to a single memory location. Please clone() the tensor before performing the operation."
)
_HOST_DEVICES = ("cpu", "mydev")


def copy_(self: torch.Tensor, src: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """aten::copy_ for PrivateUse1: write ``src`` (broadcast, cast) into ``self``.

    ``non_blocking`` is accepted and has no effect: kernels run synchronously.
    """
    if self is src:
        return self
    _check_copy_args(self, src)
    if layout.has_internal_overlap(tuple(self.shape), self.stride()) is layout.MemOverlap.YES:
        raise RuntimeError(_INTERNAL_OVERLAP)
    if _is_same_data(self, src):
        return self
    plan = copy_plan(self, src)
    if plan.numel == 0:
        return self
    overlap = layout.get_overlap_status(_mem_range(self), _mem_range(src))
    if overlap is layout.MemOverlapStatus.PARTIAL:
        raise RuntimeError(_PARTIAL_OVERLAP)
    if self.is_complex() is False and src.is_complex():
        warnings.warn("Casting complex values to real discards the imaginary part", stacklevel=2)
    if overlap is layout.MemOverlapStatus.TOO_HARD and _shares_storage(self, src):
        # torch allows it and reads whatever its loop order leaves; we read from a private
        # copy instead, so every element gets the value src had before the copy.
        src = src.clone() if src.device.type == "cpu" else _private_copy(src)
        plan = copy_plan(self, src)
    run_plan(plan, self, src)
    return self


def copy_plan(dst: torch.Tensor, src: torch.Tensor) -> Plan:
    """The TensorIterator plan of ``dst.copy_(src)``: output ``dst``, input ``src``."""
    operands = (
        OperandSpec(tuple(dst.shape), dst.stride(), dst.dtype, is_output=True),
        OperandSpec(tuple(src.shape), src.stride(), src.dtype),
    )
    return build(operands, copy_config())


def run_plan(plan: Plan, dst: torch.Tensor, src: torch.Tensor) -> None:
    """Move the bytes ``plan`` describes from ``src`` into ``dst`` with the numba kernel."""
    from torch_mydev.kernels import copy as kernels

    dst_strides, src_strides = plan.coalesced_stride_bytes
    kernels.copy_strided(
        storage_bytes(dst),
        byte_offset(dst),
        dst.dtype,
        storage_bytes(src),
        byte_offset(src),
        src.dtype,
        plan.coalesced_shape,
        dst_strides,
        src_strides,
    )


def _check_copy_args(self: torch.Tensor, src: torch.Tensor) -> None:
    for name, t in (("destination", self), ("source", src)):
        if t.device.type not in _HOST_DEVICES:
            raise RuntimeError(f"mydev copy_: cannot copy with a {name} on {t.device}")
        if t.layout != torch.strided:
            raise RuntimeError(f"mydev copy_: the {name} layout {t.layout} is not supported")
        if t.dtype not in SUPPORTED_DTYPES:
            raise RuntimeError(
                f"mydev copy_: dtype {t.dtype} of the {name} is not supported "
                f"(supported: {', '.join(sorted(str(d) for d in SUPPORTED_DTYPES))})"
            )
        if t.is_conj() or t.is_neg():
            raise RuntimeError(
                f"mydev copy_: the {name} has a lazy conjugate/negative bit; "
                "call resolve_conj()/resolve_neg() first"
            )


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _is_same_data(self: torch.Tensor, src: torch.Tensor) -> bool:
    """Copy.cpp's early exit: the same elements of the same storage, same dtype."""
    return (
        _shares_storage(self, src)
        and self.storage_offset() == src.storage_offset()
        and self.stride() == src.stride()
        and self.shape == src.shape
        and self.dtype == src.dtype
    )


def _mem_range(t: torch.Tensor) -> layout.MemRange:
    return layout.MemRange.from_layout(
        t.untyped_storage().data_ptr(), t.shape, t.stride(), t.element_size(), t.storage_offset()
    )


def _private_copy(src: torch.Tensor) -> torch.Tensor:
    """A dense copy of a mydev tensor in its own storage (layout as clone would give it)."""
    strides = layout.preserve_format_strides(tuple(src.shape), src.stride())
    tmp = torch.empty_strided(tuple(src.shape), strides, dtype=src.dtype, device=src.device)
    run_plan(copy_plan(tmp, src), tmp, src)
    return tmp


def local_scalar_dense(self: torch.Tensor) -> bool | int | float | complex:
    """aten::_local_scalar_dense (``Tensor.item()``): the one element, read via a CPU copy."""
    out = torch.empty(tuple(self.shape), dtype=self.dtype)
    return copy_(out, self).item()
