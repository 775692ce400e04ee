"""Sparse COO tensors between mydev and CPU: what the sparse fallback hands CPU, and back.

A mydev sparse COO tensor is a ``SparseTensorImpl`` whose indices and values are dense mydev
tensors. mydev memory is host memory, so a CPU sparse tensor built over CPU aliases of those
two tensors (``_C._cpu_alias``) reads and writes what the mydev one holds: CPU's sparse
kernels run on it with no copy, as the dense fallback runs CPU's dense kernels
(``fallback.copy.Aliases``). Back from CPU:

- a strided result over memory of a mydev argument (``values()`` of a permuted sparse
  tensor) is a mydev tensor over that same memory, with CPU's sizes, strides and offset;
- any other strided result is adopted (``_C._adopt``: CPU's block becomes mydev memory) when
  nothing else holds it, else copied once with CPU's sizes and strides;
- a sparse COO result is a new mydev sparse tensor over its indices and values moved that way,
  with CPU's sizes, sparse/dense dims and ``is_coalesced`` flag;
- a written sparse argument (``add_``, ``out=``) is given what CPU left in its alias: nothing to
  do when CPU worked on the values in place, else CPU's new indices and values, through
  ``copy_sparse_to_sparse_`` as ``Tensor.copy_`` does for two sparse tensors.

Other layouts (CSR, CSC, BSR, BSC, mkldnn) are refused with ``unsupported_layout``.
"""

from __future__ import annotations

from typing import Any

import torch

from torch_mydev import _C
from torch_mydev._names import DEVICE
from torch_mydev.ops.fallback import copy as fc

__all__ = ["SparseArgs", "materialize", "redispatch_cpu", "unsupported_layout"]

_CPU = torch.device("cpu")
_aten = torch.ops.aten
_SPARSE_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.SparseCPU)


def unsupported_layout(layout: torch.layout) -> NotImplementedError:
    """The error for a sparse layout mydev does not have: it names the one it has (COO)."""
    return NotImplementedError(
        f"mydev supports the sparse COO layout (torch.sparse_coo) only; {layout} tensors "
        "cannot be created on or moved to mydev. Use to_sparse() / torch.sparse_coo_tensor, "
        "or keep this tensor on CPU."
    )


def _check_layout(t: torch.Tensor) -> None:
    if t.layout not in (torch.strided, torch.sparse_coo):
        raise unsupported_layout(t.layout)


def _device_index(args: tuple, kwargs: dict) -> int | None:
    """The mydev device a call is on: its ``device`` argument's, else its first tensor's."""
    device = kwargs.get("device")
    if isinstance(device, torch.device) and device.type == DEVICE:
        return device.index
    for value in args:
        if isinstance(value, torch.Tensor) and value.device.type == DEVICE:
            return value.device.index
    return None


def redispatch_cpu(op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
    """``op``'s SparseCPU kernel run on the arguments as they are (mydev ones included).

    For the sparse metadata ops whose SparseCPU kernel is device-generic: it reads or sets
    ``SparseTensorImpl`` fields and reaches memory only through other ops. Run on the call's
    device, as the DeviceGuard of a generated CUDA wrapper does: a new ``SparseTensorImpl``
    allocates its first (empty) indices and values on the current device, and takes its
    device from them.
    """
    index = _device_index(args, kwargs)
    if index is None or index == _C._current_device():
        return op.redispatch(_SPARSE_CPU, *args, **kwargs)
    previous = _C._exchange_device(index)
    try:
        return op.redispatch(_SPARSE_CPU, *args, **kwargs)
    finally:
        _C._exchange_device(previous)


def _same_tensor(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` view the same bytes the same way (an alias of the other)."""
    return (
        a.data_ptr() == b.data_ptr()
        and a.dtype == b.dtype
        and a.shape == b.shape
        and a.stride() == b.stride()
    )


def materialize(value: Any) -> None:
    """Take mutable access to the memory of the mydev tensor(s) an op writes, before any
    argument is aliased: a copy-on-write storage (``Tensor._lazy_clone``) gets its own bytes
    first, as a CPU kernel's mutable access gives them, so the write lands in the tensor the
    op was given (for a sparse tensor: in its indices and values) and nowhere else."""
    if isinstance(value, (list, tuple)):
        for item in value:
            materialize(item)
    elif isinstance(value, torch.Tensor) and value.device.type == DEVICE:
        if value.layout == torch.sparse_coo:
            value._indices().data_ptr()
            value._values().data_ptr()
        elif value.layout == torch.strided:
            value.data_ptr()


class SparseArgs(fc.ArgumentMap):
    """The CPU side of one sparse call: aliases (or, with ``copies``, copies) of its tensors.

    Dense mydev tensors go through ``fallback.copy.Aliases`` / ``Copies`` (one CPU storage
    per mydev storage, so overlap checks see what CPU sees); a mydev sparse tensor becomes a
    CPU sparse tensor over its indices and values converted the same way.
    """

    def __init__(self, copies: bool) -> None:
        self.dense = fc.Copies([]) if copies else fc.Aliases([])
        self.sparse: dict[int, torch.Tensor] = {}  # id(mydev sparse) -> CPU sparse
        self.originals: dict[int, torch.Tensor] = {}  # id(CPU sparse) -> mydev sparse
        self.passed: set[int] = set()  # ids of the CPU tensors passed as they are

    def _check(self, value: torch.Tensor) -> None:
        _check_layout(value)

    def _mydev_tensor(self, value: torch.Tensor) -> torch.Tensor:
        if value.layout == torch.strided:
            return self.dense(value)
        return self._once(value, self.sparse, self._sparse_to_cpu)

    def _sparse_to_cpu(self, t: torch.Tensor) -> torch.Tensor:
        """A CPU sparse tensor over (aliases of) ``t``'s indices and values."""
        return _aten._sparse_coo_tensor_with_dims_and_tensors(
            t.sparse_dim(),
            t.dense_dim(),
            t.shape,
            self.dense(t._indices()),
            self.dense(t._values()),
            dtype=t.dtype,
            layout=torch.sparse_coo,
            device=_CPU,
            is_coalesced=t.is_coalesced(),
        )

    # ------------------------------------------------------------------------- results

    def _dense_original(self, t: torch.Tensor) -> torch.Tensor | None:
        """The mydev tensor whose alias ``t`` is, or one over the same mydev memory."""
        original = self.dense.originals.get(id(t))
        if original is not None or self.dense.copy_in:
            return original
        ptr = t.untyped_storage().data_ptr()
        if not ptr:
            return None
        for mydev in self.dense.originals.values():
            storage = mydev.untyped_storage()
            if storage.data_ptr() == ptr:
                out = torch.empty(0, dtype=t.dtype, device=mydev.device)
                return out.set_(storage, t.storage_offset(), t.shape, t.stride())
        return None

    def dense_to_mydev(self, t: torch.Tensor, device: torch.device, adopt: bool) -> torch.Tensor:
        """A CPU strided result as a mydev tensor (module docstring: view, adopt or copy)."""
        over = self._dense_original(t)
        if over is not None:
            return over
        if adopt and id(t) not in self.passed:
            index = device.index if device.index is not None else _C._current_device()
            moved = _C._adopt(t, index)
            if moved is not None:
                return moved
        return fc.to_mydev(t, device)

    def to_mydev(self, holder: list[Any], device: torch.device, adopt: bool) -> Any:
        """``holder[0]`` (a CPU result) as a mydev result; ``holder`` is emptied first, so
        that a new result's indices and values may be adopted once this is their last use."""
        value = holder.pop()
        if isinstance(value, (list, tuple)):
            return type(value)(self.to_mydev([item], device, adopt) for item in value)
        if not isinstance(value, torch.Tensor) or value.device.type != "cpu":
            return value
        if device.type == "cpu":
            return value
        original = self.originals.get(id(value))
        if original is not None:  # the op returned one of its sparse inputs
            return original
        if value.layout == torch.strided:
            return self.dense_to_mydev(value, device, adopt)
        _check_layout(value)
        sizes, sparse_dim, dense_dim = value.shape, value.sparse_dim(), value.dense_dim()
        coalesced, dtype = value.is_coalesced(), value.dtype
        indices, values = value._indices(), value._values()
        del value  # the result's own references die here: its indices and values may move
        return _aten._sparse_coo_tensor_with_dims_and_tensors(
            sparse_dim,
            dense_dim,
            sizes,
            self._part_to_mydev([indices], device, adopt),
            self._part_to_mydev([values], device, adopt),
            dtype=dtype,
            layout=torch.sparse_coo,
            device=device,
            is_coalesced=coalesced,
        )

    def _part_to_mydev(self, holder: list[torch.Tensor], device: torch.device, adopt: bool):
        return self.dense_to_mydev(holder.pop(), device, adopt)

    # ---------------------------------------------------------------------- write-back

    def write_back(self, original: Any, cpu: Any) -> None:
        """Make the mydev argument ``original`` hold what the CPU op left in ``cpu``."""
        if isinstance(original, (list, tuple)):
            for o, c in zip(original, cpu, strict=True):
                self.write_back(o, c)
            return
        if not isinstance(original, torch.Tensor) or original.device.type != DEVICE:
            return
        if original.layout == torch.strided:
            fc.write_back(original, cpu)
            return
        indices, values = cpu._indices(), cpu._values()
        if (
            not self.dense.copy_in
            and _same_tensor(indices, original._indices())
            and _same_tensor(values, original._values())
        ):
            # CPU worked in place on the values: only sizes and the flag can have changed
            if cpu.shape != original.shape:
                redispatch_cpu(
                    _aten.sparse_resize_.default,
                    original,
                    cpu.shape,
                    cpu.sparse_dim(),
                    cpu.dense_dim(),
                )
            redispatch_cpu(_aten._coalesced_.default, original, cpu.is_coalesced())
            return
        if (original.sparse_dim(), original.dense_dim()) != (cpu.sparse_dim(), cpu.dense_dim()):
            # SparseTensorImpl refuses new dims while it holds elements; CPU's tensor changed
            # them after dropping its own, so drop ours too before taking CPU's.
            redispatch_cpu(
                _aten.sparse_resize_and_clear_.default,
                original,
                cpu.shape,
                cpu.sparse_dim(),
                cpu.dense_dim(),
            )
        redispatch_cpu(_aten.copy_sparse_to_sparse_.default, original, cpu)
