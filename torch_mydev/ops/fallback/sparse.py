"""Sparse COO tensors on mydev: which kernel an op on a mydev sparse tensor runs.

A mydev sparse tensor carries the dispatch key ``SparsePrivateUse1`` (torch prints it
``Sparsemydev``), for which torch registers no kernel. Three kinds of registration fill it
(details in docs/fallback.md, "Sparse COO tensors"):

1. ``METADATA``: ops whose SparseCPU kernel only reads or sets ``SparseTensorImpl`` fields
   (``_indices``, ``_nnz``, ``_coalesced_``, ``sparse_resize_``) or builds a sparse tensor
   over given tensors (``_sparse_coo_tensor_with_dims_and_tensors``, which every constructor
   ends in) run that kernel itself on the mydev tensors (``redispatch``), as torch-xpu-ops
   registers ATen's own ``at::native`` functions for SparseXPU. Indices and values stay the
   mydev tensors themselves, so ``values()`` shares memory with the sparse tensor as on CPU.
2. every other op (``_coalesce``, ``_to_dense``, ``add``, ``mul``, ``addmm``, ``sum``, ...)
   runs CPU's kernel on CPU sparse tensors over aliases of the mydev indices and values
   (``fallback.sparse_convert.SparseArgs``): the boxed fallback for ``SparsePrivateUse1``, and an
   explicit registration for the ops whose composite kernel would otherwise win over a
   fallback (``composite_ops``). Counted in ``fallback_stats()`` like the dense fallback.
3. ``_to_sparse`` (``Tensor.to_sparse()``) of a dense or sparse mydev tensor runs the same
   way (PrivateUse1 and SparsePrivateUse1), a compressed ``layout`` refused first.

Sparse CSR/CSC/BSR/BSC are refused with ``fallback.sparse_convert.unsupported_layout``: their
constructors and conversions (``COMPRESSED``, for dense, sparse and compressed mydev keys)
and the boxed fallback for ``SparseCsrPrivateUse1``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torch_mydev.ops.fallback import boxed as fallback
from torch_mydev.ops.fallback import devices as fd
from torch_mydev.ops.fallback import schema as fs
from torch_mydev.ops.fallback.adopt import may_adopt
from torch_mydev.ops.fallback.sparse_convert import (
    SparseArgs,
    materialize,
    redispatch_cpu,
    unsupported_layout,
)

__all__ = [
    "COMPRESSED",
    "METADATA",
    "composite_ops",
    "register",
    "run_sparse",
    "sparse_fallback",
]

# Ops whose SparseCPU kernel is device-generic (aten/src/ATen/native/sparse/SparseTensor.cpp:
# it touches SparseTensorImpl fields and reaches memory only through other ops): run as is.
METADATA: tuple[str, ...] = (
    "_sparse_coo_tensor_with_dims_and_tensors",  # new_with_dims_and_tensor_sparse_symint
    "_sparse_coo_tensor_with_dims",  # new_with_dims_sparse
    "empty.memory_format",  # empty_sparse
    "empty_like",  # empty_like_sparse_coo
    "zeros.out",  # zeros_sparse_out
    "zero_",  # zero_sparse_
    "_indices",
    "_values",
    "indices",
    "values",
    "_nnz",
    "sparse_dim",
    "dense_dim",
    "_dimI",
    "_dimV",
    "is_coalesced",
    "_coalesced_",
    "sparse_resize_",
    "sparse_resize_and_clear_",
    "resize_as_sparse_",
    "clone",  # clone_sparse: new tensor, then indices/values copied by Tensor.to
    "copy_",  # copy_sparse_wrapper_ -> copy_sparse_to_sparse_
    "copy_sparse_to_sparse_",  # copy_sparse_: indices/values copied by Tensor.to
    "is_pinned",  # is_pinned_sparse_coo: asks the values
    "_pin_memory",  # _pin_memory_sparse_coo: pins indices and values (refused on mydev)
)

# Constructors and conversions that make sparse compressed tensors (CSR, CSC, BSR, BSC):
# refused on mydev. Registered for PrivateUse1 (dense mydev arguments) and for
# SparseCsrPrivateUse1 (where a factory's device and layout send it, BackendSelect): their
# composite kernels would build one (``new_compressed_tensor``) without asking mydev.
COMPRESSED: tuple[str, ...] = (
    "_sparse_compressed_tensor_with_dims",
    "_sparse_compressed_tensor_unsafe",
    "_sparse_csr_tensor_unsafe",
    "_sparse_csc_tensor_unsafe",
    "_sparse_bsr_tensor_unsafe",
    "_sparse_bsc_tensor_unsafe",
    "sparse_compressed_tensor.comp_plain_value",
    "sparse_compressed_tensor.comp_plain_value_size",
    "sparse_csr_tensor.crow_col_value",
    "sparse_csr_tensor.crow_col_value_size",
    "sparse_csc_tensor.ccol_row_value",
    "sparse_csc_tensor.ccol_row_value_size",
    "sparse_bsr_tensor.crow_col_value",
    "sparse_bsr_tensor.crow_col_value_size",
    "sparse_bsc_tensor.ccol_row_value",
    "sparse_bsc_tensor.ccol_row_value_size",
    "_to_sparse_csr",
    "_to_sparse_csc",
    "_to_sparse_bsr",
    "_to_sparse_bsc",
)

_COMPRESSED_LAYOUT = {
    "csr": torch.sparse_csr,
    "csc": torch.sparse_csc,
    "bsr": torch.sparse_bsr,
    "bsc": torch.sparse_bsc,
}

_COO_OR_STRIDED = (torch.strided, torch.sparse_coo)

# To COO from a dense or sparse mydev tensor: run on CPU like the sparse ops (another layout
# asked for is refused first).
TO_COO: tuple[str, ...] = ("_to_sparse", "_to_sparse.sparse_dim")


def _overload(name: str) -> torch._ops.OpOverload:
    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def run_sparse(op: torch._ops.OpOverload, args: tuple, kwargs: dict) -> Any:
    """Run ``op`` with CPU's kernel on CPU (sparse) tensors over the mydev arguments' memory.

    Devices are checked as CUDA checks them (``fallback.devices``); written arguments are
    materialised first (a copy-on-write one gets its own bytes, as on CPU) and end
    with what CPU left in their aliases; results come back as mydev tensors
    (``SparseArgs.to_mydev``). Aliases of parts CPU must grow move to CPU memory and are
    written back, as in the dense fallback; ``fallback.zero_copy`` set to False
    (``TORCH_MYDEV_FALLBACK_COPY=1``) runs the call over copies.
    """
    op_info = fs.resolve(op, args, kwargs)
    values = fs.bind(op_info, args, kwargs)
    fd.check_call(op_info.name, op_info.names, values, op_info.written)
    fallback.record_call(op_info.name)
    device = fallback.target_device(values)
    for written, value in zip(op_info.written, values, strict=True):
        if written:
            materialize(value)
    return _run(op_info, values, device, copies=not fallback.zero_copy)


def _run(op_info: fs.OpInfo, values: list[Any], device: torch.device, copies: bool) -> Any:
    to_cpu = SparseArgs(copies)
    cpu_values = [to_cpu(value) for value in values]
    cpu_args, cpu_kwargs = fs.unbind(op_info, cpu_values)
    result = op_info.op(*cpu_args, **cpu_kwargs)
    for written, value, cpu_value in zip(op_info.written, values, cpu_values, strict=True):
        if written and value is not fs.MISSING:
            to_cpu.write_back(value, cpu_value)
    del cpu_args, cpu_kwargs, cpu_values  # what is left of the call may be adopted
    n = len(op_info.return_alias)
    if n == 0:
        return result
    outs = [result] if n == 1 else list(result)
    del result
    adopt = may_adopt(op_info.op)
    mapped = []
    for alias in op_info.return_alias:
        out = outs.pop(0)
        if alias is not None and op_info.written[alias]:  # in-place, out=: the argument
            mapped.append(values[alias])
        else:
            mapped.append(to_cpu.to_mydev([out], device, adopt))
    return mapped[0] if n == 1 else tuple(mapped)


def _redispatch(op: torch._ops.OpOverload, args: tuple, kwargs: dict) -> Any:
    return redispatch_cpu(op, *args, **kwargs)


def sparse_fallback(op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
    """The boxed ``SparsePrivateUse1`` fallback: ``run_sparse`` (CPU's kernel on aliases)."""
    return run_sparse(op, args, kwargs)


def _compressed_layout(name: str, args: tuple, kwargs: dict) -> torch.layout:
    """The compressed layout a refused call is about: a tensor's, the ``layout`` asked for,
    else the one its name says (``_to_sparse_bsr``)."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor) and value.layout not in _COO_OR_STRIDED:
            return value.layout
    asked = kwargs.get("layout")
    if asked is not None:
        return asked
    return next((v for k, v in _COMPRESSED_LAYOUT.items() if k in name), torch.sparse_csr)


def _refuse(name: str) -> Callable:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        raise unsupported_layout(_compressed_layout(name, args, kwargs))

    kernel.__name__ = kernel.__qualname__ = f"refuse_{name}"
    return kernel


def _refuse_compressed(op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
    """The boxed ``SparseCsrPrivateUse1`` fallback: mydev has no compressed layouts."""
    raise unsupported_layout(_compressed_layout(fs.op_name(op), args, kwargs))


def _to_sparse(op: torch._ops.OpOverload) -> Callable:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        layout = kwargs.get("layout")
        if layout is not None and layout not in _COO_OR_STRIDED:
            raise unsupported_layout(layout)
        return run_sparse(op, args, kwargs)

    kernel.__name__ = kernel.__qualname__ = f"sparse_cpu_{fs.op_name(op)}"
    return kernel


def composite_ops() -> list[str]:
    """aten overloads with a SparseCPU kernel that ``SparsePrivateUse1`` would run as a
    composite kernel instead of reaching the boxed fallback, ``METADATA`` left out.

    The dispatcher prefers a CompositeExplicitAutograd(NonFunctional) kernel to a backend
    fallback: ``values()`` would raise "values expected sparse tensor layout", ``add`` would
    run the structured composite's meta on a sparse tensor. Listed from the dispatcher
    (torch 2.13: 82, ``add.Tensor``, ``mul.Tensor``, ``sum``, ``addmm``, ``mm``, the
    unary ops on values ...); each is registered to run CPU's kernel (``run_sparse``).
    """
    metadata = {f"aten::{name}" for name in METADATA}
    composite = fs.kernels_for("CompositeExplicitAutograd") | fs.kernels_for(
        "CompositeExplicitAutogradNonFunctional"
    )
    sparse = fs.kernels_for("SparseCPU") - metadata
    return sorted(
        name.removeprefix("aten::") for name in sparse & composite if name.startswith("aten::")
    )


_libraries: list[torch.library.Library] = []


def register() -> None:
    """Register the sparse kernels and fallbacks above (once)."""
    if _libraries:
        return
    boxed = torch.library.Library("_", "IMPL")
    sparse_key = "SparsePrivateUse1"
    boxed.fallback(sparse_fallback, sparse_key)
    boxed.fallback(_refuse_compressed, "SparseCsrPrivateUse1")
    explicit = torch.library.Library("aten", "IMPL")
    for name in METADATA:
        kernel = fs.op_kernel(_overload(name), _redispatch, "sparse_generic")
        explicit.impl(name, kernel, sparse_key)
    for name in composite_ops():
        explicit.impl(name, fs.op_kernel(_overload(name), run_sparse, "sparse_cpu"), sparse_key)
    for name in TO_COO:  # the layout asked for is checked before CPU runs
        for key in ("PrivateUse1", "SparsePrivateUse1"):
            explicit.impl(name, _to_sparse(_overload(name)), key)
    # dense or sparse mydev arguments, or a factory's device and layout (BackendSelect)
    for name in COMPRESSED:
        for key in ("PrivateUse1", "SparsePrivateUse1", "SparseCsrPrivateUse1"):
            explicit.impl(name, _refuse(name), key)
    _libraries.extend((boxed, explicit))
