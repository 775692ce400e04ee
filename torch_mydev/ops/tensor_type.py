"""Whether one tensor may take another's data in place: ``aten::_has_compatible_shallow_copy_type``.

``Module._apply`` (``model.to(device)``, ``.half()``) keeps each Parameter object, and so
the ties between modules that share one (``lm_head.weight is wte.weight``), only when this
says yes; otherwise every module gets a new Parameter. ``variable.set_data``
(``param.data = t``) refuses an incompatible tensor. c10's default
(``TensorImpl::has_compatible_shallow_copy_type``, c10/core/TensorImpl.h) lists CPU, CUDA,
MPS, HIP, XPU, HPU and MTIA as dense backends but not PrivateUse1; the op is
CompositeImplicitAutograd, so a backend kernel for PrivateUse1 overrides it, as OpenReg
does. This one is c10's rule with PrivateUse1 added to the dense backends, so a mydev
tensor and a dense tensor of CPU or CUDA are compatible, as CPU and CUDA tensors are.
"""

from __future__ import annotations

import torch

_Key = torch._C.DispatchKey

# c10's dense backends, and mydev (each key: the Dense functionality with the backend's bit).
_DENSE = (
    _Key.CPU,
    _Key.CUDA,
    _Key.MPS,
    _Key.HIP,
    _Key.XPU,
    _Key.HPU,
    _Key.MTIA,
    _Key.PrivateUse1,
)
# c10's sparse backends, without PrivateUse1: SparseTensorImpl::shallow_copy_from asserts
# c10's own rule, so a sparse mydev tensor cannot take data in place (docs/ops.md).
_SPARSE = (_Key.SparseCPU, _Key.SparseCUDA, _Key.SparseMPS, _Key.SparseHIP, _Key.SparseXPU)


def _is_dense(keys: torch._C.DispatchKeySet) -> bool:
    return any(keys.has(key) for key in _DENSE)


def _is_sparse(keys: torch._C.DispatchKeySet) -> bool:
    return any(keys.has(key) for key in _SPARSE)


def has_compatible_shallow_copy_type(self: torch.Tensor, from_: torch.Tensor) -> bool:
    """aten::_has_compatible_shallow_copy_type for PrivateUse1.

    ``TensorImpl::has_compatible_shallow_copy_type``: the same dispatch key set, or both
    dense on a listed backend (here with PrivateUse1), or both sparse COO on a listed
    backend, or both sparse compressed. A dense tensor and a sparse one never are.
    """
    a = torch._C._dispatch_keys(self)
    b = torch._C._dispatch_keys(from_)
    return (
        a.raw_repr() == b.raw_repr()
        or (_is_dense(a) and _is_dense(b))
        or (_is_sparse(a) and _is_sparse(b))
        or (a.has(_Key.SparseCsr) and b.has(_Key.SparseCsr))
    )
