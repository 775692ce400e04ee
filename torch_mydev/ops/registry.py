"""The table of mydev's Python kernels: which aten op each function implements."""

from collections.abc import Callable

import torch

from torch_mydev.ops import conversions, copy, elementwise, factories, fallback

KERNELS: dict[str, Callable] = {
    "empty.memory_format": factories.empty_memory_format,
    "empty_strided": factories.empty_strided,
    "empty_like": factories.empty_like,
    "copy_": copy.copy_,
    "_local_scalar_dense": copy.local_scalar_dense,
    "clone": conversions.clone,
    "_to_copy": conversions._to_copy,
    # native elementwise ops (ops/elementwise.py): functional, out= and in-place overloads
    "add.Tensor": elementwise.add,
    "add.Scalar": elementwise.add,
    "add.out": elementwise.add,
    "add.Scalar_out": elementwise.add,
    "add_.Tensor": elementwise.add_,
    "add_.Scalar": elementwise.add_,
    "sub.Tensor": elementwise.sub,
    "sub.Scalar": elementwise.sub,
    "sub.out": elementwise.sub,
    "sub.Scalar_out": elementwise.sub,
    "sub_.Tensor": elementwise.sub_,
    "sub_.Scalar": elementwise.sub_,
    "mul.Tensor": elementwise.mul,
    "mul.Scalar": elementwise.mul,
    "mul.out": elementwise.mul,
    "mul.Scalar_out": elementwise.mul,
    "mul_.Tensor": elementwise.mul_,
    "mul_.Scalar": elementwise.mul_,
    "div.Tensor": elementwise.div,
    "div.Scalar": elementwise.div,
    "div.out": elementwise.div,
    "div.Scalar_out": elementwise.div,
    "div.Tensor_mode": elementwise.div,
    "div.Scalar_mode": elementwise.div,
    "div.out_mode": elementwise.div,
    "div.Scalar_mode_out": elementwise.div,
    "div_.Tensor": elementwise.div_,
    "div_.Scalar": elementwise.div_,
    "div_.Tensor_mode": elementwise.div_,
    "div_.Scalar_mode": elementwise.div_,
    "floor_divide": elementwise.floor_divide,
    "floor_divide.Scalar": elementwise.floor_divide,
    "floor_divide.out": elementwise.floor_divide,
    "floor_divide.Scalar_out": elementwise.floor_divide,
    "floor_divide_.Tensor": elementwise.floor_divide_,
    "floor_divide_.Scalar": elementwise.floor_divide_,
    "neg": elementwise.neg,
    "neg.out": elementwise.neg,
    "neg_": elementwise.neg_,
    "abs": elementwise.absolute,
    "abs.out": elementwise.absolute,
    "abs_": elementwise.absolute_,
    "fill_.Scalar": elementwise.fill_,
    "fill_.Tensor": elementwise.fill_,
    "zero_": elementwise.zero_,
    "where.self": elementwise.where,
    "where.self_out": elementwise.where,
    "eq.Tensor": elementwise.eq,
    "eq.Scalar": elementwise.eq,
    "eq.Tensor_out": elementwise.eq,
    "eq.Scalar_out": elementwise.eq,
    "eq_.Tensor": elementwise.eq_,
    "eq_.Scalar": elementwise.eq_,
    "ne.Tensor": elementwise.ne,
    "ne.Scalar": elementwise.ne,
    "ne.Tensor_out": elementwise.ne,
    "ne.Scalar_out": elementwise.ne,
    "ne_.Tensor": elementwise.ne_,
    "ne_.Scalar": elementwise.ne_,
    "lt.Tensor": elementwise.lt,
    "lt.Scalar": elementwise.lt,
    "lt.Tensor_out": elementwise.lt,
    "lt.Scalar_out": elementwise.lt,
    "lt_.Tensor": elementwise.lt_,
    "lt_.Scalar": elementwise.lt_,
    "le.Tensor": elementwise.le,
    "le.Scalar": elementwise.le,
    "le.Tensor_out": elementwise.le,
    "le.Scalar_out": elementwise.le,
    "le_.Tensor": elementwise.le_,
    "le_.Scalar": elementwise.le_,
    "gt.Tensor": elementwise.gt,
    "gt.Scalar": elementwise.gt,
    "gt.Tensor_out": elementwise.gt,
    "gt.Scalar_out": elementwise.gt,
    "gt_.Tensor": elementwise.gt_,
    "gt_.Scalar": elementwise.gt_,
    "ge.Tensor": elementwise.ge,
    "ge.Scalar": elementwise.ge,
    "ge.Tensor_out": elementwise.ge,
    "ge.Scalar_out": elementwise.ge,
    "ge_.Tensor": elementwise.ge_,
    "ge_.Scalar": elementwise.ge_,
}

_library: torch.library.Library | None = None


def register() -> None:
    """Register every kernel of `KERNELS` for PrivateUse1, then the CPU fallback (once)."""
    global _library
    if _library is not None:
        return
    _library = torch.library.Library("aten", "IMPL")
    for op, fn in KERNELS.items():
        _library.impl(op, fn, "PrivateUse1")
    fallback.register()
