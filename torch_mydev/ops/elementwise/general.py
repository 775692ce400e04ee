"""Decides the general path of add/sub/mul/div, the comparisons, neg and abs: any call.

ATen's meta checks (``native/BinaryOps.cpp``, ``native/UnaryOps.cpp``), the plan and its
temporaries (``elementwise.plan``), then one kernel of ``torch_mydev.kernels.elementwise.kernel``
over the plan's coalesced iteration. Every call can take this path; the entry cache
(``elementwise.entries``) answers repeated call signatures without it.
"""

from __future__ import annotations

import torch

from torch_mydev.kernels.elementwise import kernel as kernels
from torch_mydev.ops.buffers import byte_offset, storage_bytes
from torch_mydev.ops.elementwise.checks import (
    Arg,
    alpha_check,
    check_range,
    check_supported,
    neg_check,
    sub_check,
)
from torch_mydev.ops.elementwise.plan import (
    device_of,
    finish,
    input_tensors,
    kernel_op,
    kernel_operand,
    make_plan,
    opmath_scalar,
    output_tensors,
)
from torch_mydev.ops.factories import allocate
from torch_mydev_rules.iterator.families import iterator_config
from torch_mydev_rules.iterator.numbers import Number
from torch_mydev_rules.iterator.promotion import dtype_name, is_complex


def general_arithmetic(
    name: str,
    self: Arg,
    other: Arg,
    *,
    alpha: Number = 1,
    rounding_mode: str | None = None,
    out: torch.Tensor | None = None,
    inplace: bool = False,
) -> torch.Tensor:
    """add, sub, mul and div: BinaryOps.cpp's meta checks, the plan, ``kernels.binary``."""
    if name == "div" and rounding_mode not in (None, "trunc", "floor"):
        raise RuntimeError(
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
            f"'{rounding_mode}'"
        )
    config = iterator_config(
        name, rounding_mode=rounding_mode, default_dtype=torch.get_default_dtype()
    )
    if name == "sub":
        sub_check(self, other)
    inputs = [self, other]
    plan, target = make_plan(out, inputs, config, inplace=inplace)
    common = plan.common_dtype
    if name in ("add", "sub"):
        alpha_check(common, alpha)
    op = kernel_op(name, rounding_mode)
    if rounding_mode is not None and (common == torch.bool or is_complex(common)):
        raise NotImplementedError(
            f"\"div_{rounding_mode}_cpu\" not implemented for '{dtype_name(common)}'"
        )
    check_supported(name, common)
    if name == "sub":
        alpha = -alpha
    if op == "add":
        check_range(alpha, common)  # ``alpha.to<scalar_t>()`` in the kernel is checked
    device = device_of(target, inputs)
    result, written = output_tensors(plan, target, device)
    ops = input_tensors(plan, inputs, device)
    scalar_other = opmath_scalar(op, plan, other)
    try:
        kernels.binary(
            op,
            kernel_operand(written, plan, 0),
            kernel_operand(ops[0], plan, 1),
            kernel_operand(ops[1], plan, 2),
            plan.coalesced_shape,
            alpha=alpha,
            scalar_other=scalar_other,
        )
    except ZeroDivisionError:
        raise RuntimeError("ZeroDivisionError") from None
    return finish(result, written)


def general_compare(
    name: str, self: Arg, other: Arg, *, out: torch.Tensor | None = None, inplace: bool = False
) -> torch.Tensor:
    """eq, ne, lt, le, gt, ge: ``build_borrowing_comparison_op``, then ``kernels.compare``.

    The functional form's output is bool; an ``out=`` (or in-place ``self``) keeps its dtype
    and receives 1/0. The kernel always writes bool: a non-bool output gets a bool temporary
    laid out like the tensor torch's kernel would write, copied in afterwards.
    """
    config = iterator_config(
        name,
        out_dtype=None if out is None else out.dtype,
        default_dtype=torch.get_default_dtype(),
    )
    inputs = [self, other]
    plan, target = make_plan(out, inputs, config, inplace=inplace)
    common = plan.common_dtype
    if name not in ("eq", "ne") and is_complex(common):
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{dtype_name(common)}'")
    check_supported(name, common)
    device = device_of(target, inputs)
    result, written = output_tensors(plan, target, device)
    ops = input_tensors(plan, inputs, device)
    if written.dtype == torch.bool:
        flags, strides = written, plan.coalesced_stride_bytes[0]
    else:
        flags = allocate(plan.shape, plan.operand_strides[0], torch.bool, device)
        strides = tuple(s // plan.dtypes[0].itemsize for s in plan.coalesced_stride_bytes[0])
    kernels.compare(
        name,
        kernels.Operand(storage_bytes(flags), byte_offset(flags), torch.bool, strides),
        kernel_operand(ops[0], plan, 1),
        kernel_operand(ops[1], plan, 2),
        plan.coalesced_shape,
    )
    return finish(result, flags)


def general_unary(
    name: str, self: torch.Tensor, *, out: torch.Tensor | None = None, inplace: bool = False
) -> torch.Tensor:
    """neg and abs: ``build_borrowing_unary_op`` (one dtype throughout), ``kernels.unary``."""
    if name == "neg":
        neg_check(self.dtype)
    plan, target = make_plan(out, [self], iterator_config(name), inplace=inplace)
    if name == "abs" and self.dtype == torch.bool:
        raise NotImplementedError("\"abs_cpu\" not implemented for 'Bool'")
    check_supported(name, self.dtype)
    device = device_of(target, [self])
    result, written = output_tensors(plan, target, device)
    ops = input_tensors(plan, [self], device)
    kernels.unary(
        name,
        kernel_operand(written, plan, 0),
        kernel_operand(ops[0], plan, 1),
        plan.coalesced_shape,
    )
    return finish(result, written)
