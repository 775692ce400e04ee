"""Decides an elementwise call's plan and tensors: the iterator plan, outputs, cast temporaries.

Steps 2 to 4 of every elementwise op (``torch_mydev.ops.elementwise.aten``): a TensorIterator
plan (``torch_mydev_rules.iterator``, through its plan cache), the tensor the caller gets and
the one the kernel writes (a new tensor with the plan's strides, an ``out=`` tensor resized
as structured kernels resize it, or ``self``), CPU's cast temporaries, and each operand as
the kernel reads it (``kernels.Operand``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import torch

from torch_mydev.kernels.elementwise import kernel as kernels
from torch_mydev.ops.buffers import byte_offset, storage_bytes, writable
from torch_mydev.ops.copy.aten import copy_
from torch_mydev.ops.elementwise.checks import Arg, check_devices, check_partial_overlap
from torch_mydev.ops.factories import allocate
from torch_mydev_rules.iterator.cache import cached_build
from torch_mydev_rules.iterator.numbers import number_dtype
from torch_mydev_rules.iterator.operands import IteratorConfig, OperandSpec
from torch_mydev_rules.iterator.plan import Plan

_REDUCED = (torch.float16, torch.bfloat16)
# The loop of ``kernels.binary`` each arithmetic op runs (sub is add with -alpha, as ATen's
# sub_stub is).
_KERNEL_OPS = {"add": "add", "sub": "add", "mul": "mul"}

_RESIZED = (
    "An output with one or more elements was resized since it had shape {old}, which does not "
    "match the required output shape {new}. This behavior is deprecated, and in a future "
    "PyTorch release outputs will not be resized unless they have zero elements. You can "
    "explicitly reuse an out tensor t by resizing it, inplace, to zero elements with "
    "t.resize_(0)."
)


def make_plan(
    out: torch.Tensor | None,
    inputs: Sequence[Arg],
    config: IteratorConfig,
    *,
    inplace: bool = False,
    dtype: torch.dtype | None = None,
) -> tuple[Plan, torch.Tensor | None]:
    """Check devices and overlap, then build the plan of ``out = op(*inputs)``.

    ``out`` is None for the functional form (an output the iterator allocates, of ``dtype``
    when given); for ``out=`` and in-place forms it is the tensor written, which counts as
    read-write when it is also one of the inputs.
    """
    check_devices(out, inputs)
    if out is None:
        output = OperandSpec.output(dtype)
    else:
        read_write = inplace or any(x is out for x in inputs)
        output = OperandSpec(
            tuple(out.shape), out.stride(), out.dtype, is_output=True, is_read_write=read_write
        )
    specs = [output, *(_spec(x) for x in inputs)]
    if out is not None:
        check_partial_overlap(out, inputs)
    return cached_build(specs, config), out


def _spec(x: Arg) -> OperandSpec:
    if isinstance(x, torch.Tensor):
        return OperandSpec(tuple(x.shape), x.stride(), x.dtype)
    return OperandSpec((), (), number_dtype(x), is_scalar=True)


def output_tensors(
    plan: Plan, target: torch.Tensor | None, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """The tensor the caller gets and the one the kernel writes (a temporary on a cast)."""
    if target is None:
        result = allocate(plan.shape, plan.output_strides[0], plan.output_dtypes[0], device)
        return result, result
    if plan.will_resize[0]:
        resize_output(target, plan.shape, plan.output_strides[0])
    writable(target)  # materialised before any input's address is read (buffers.py)
    if plan.temporaries[0]:
        return target, allocate(plan.shape, plan.operand_strides[0], plan.dtypes[0], device)
    return target, target


def input_tensors(plan: Plan, inputs: Sequence[Arg], device: torch.device) -> list[Arg]:
    """The inputs the kernel reads: CPU's ``.to(common_dtype)`` temporaries where planned.

    A tensor becomes a new mydev tensor with the plan's (preserve_format) strides, filled by
    ``copy_``; a Python number is converted when the kernel operand is built.
    """
    out = []
    for i, x in enumerate(inputs, start=plan.num_outputs):
        if plan.temporaries[i] and isinstance(x, torch.Tensor):
            tmp = allocate(tuple(x.shape), plan.operand_strides[i], plan.dtypes[i], device)
            x = copy_(tmp, x)
        out.append(x)
    return out


def kernel_operand(x: Arg, plan: Plan, index: int) -> kernels.Operand:
    """Operand ``index`` of the plan as the kernel reads it (a number: its converted bytes)."""
    strides = plan.coalesced_stride_bytes[index]
    if isinstance(x, torch.Tensor):
        return kernels.Operand(storage_bytes(x), byte_offset(x), x.dtype, strides)
    dtype = plan.dtypes[index]
    return kernels.Operand(kernels.scalar_bytes(x, dtype), 0, dtype, strides)


def finish(result: torch.Tensor, written: torch.Tensor) -> torch.Tensor:
    """Copy a temporary output into the caller's tensor (casting), and return the latter."""
    if written is not result:
        copy_(result, written)
    return result


def resize_output(out: torch.Tensor, shape: tuple[int, ...], strides=None) -> None:
    """``at::native::resize_output`` (+ the structured kernels' restride): warn, resize."""
    if tuple(out.shape) == tuple(shape):
        return
    if out.numel() != 0:
        warnings.warn(
            _RESIZED.format(old=list(out.shape), new=list(shape)), UserWarning, stacklevel=4
        )
    out.resize_(shape)
    if strides is not None:
        out.as_strided_(shape, strides)


def opmath_scalar(op: str, plan: Plan, other: Arg) -> float | None:
    """The float32 divisor/factor of torch's float16/bfloat16 ``opmath`` loop, if it runs.

    ``mul_kernel``, ``div_true_kernel``, ``div_trunc_kernel`` and ``div_floor_kernel`` take
    that loop when the common dtype is float16/bfloat16 and the second input is a scalar of
    the iteration (every stride 0): they compute in float32 with ``other``'s original value
    (before any cast to the common dtype) and round once.
    """
    if op == "add" or plan.common_dtype not in _REDUCED:
        return None
    if 0 in plan.coalesced_shape:
        return None  # no loop runs (for_each returns at numel 0): nothing reads ``other``
    strides = plan.coalesced_stride_bytes[plan.num_outputs + 1]
    if any(s != 0 and n != 1 for n, s in zip(plan.coalesced_shape, strides, strict=True)):
        return None
    if isinstance(other, torch.Tensor):
        source = kernels.Operand(storage_bytes(other), byte_offset(other), other.dtype, ())
        raw = kernels.read_scalar(source, torch.float32)
    else:
        raw = kernels.scalar_bytes(other, torch.float32)
    return float(raw.view(np.float32)[0])


def device_of(target: torch.Tensor | None, inputs: Sequence[Arg]) -> torch.device:
    if target is not None:
        return target.device
    return first_device(*inputs)


def first_device(*args: Arg) -> torch.device:
    """The first non-CPU device among the tensors (torch's ``out_device``), else CPU."""
    for x in args:
        if isinstance(x, torch.Tensor) and x.device.type != "cpu":
            return x.device
    return torch.device("cpu")


def kernel_op(name: str, rounding_mode: str | None = None) -> str:
    """The ``kernels.ARITHMETIC`` loop of add/sub/mul/div (div: by its rounding mode)."""
    if name == "div":
        return "div" if rounding_mode is None else f"div_{rounding_mode}"
    return _KERNEL_OPS[name]
