"""Native relu family on mydev: relu, clamp_min, threshold, threshold_backward, as torch CPU does.

- ``relu`` / ``relu_`` is ``clamp_min(self, 0)`` (``native/Activation.cpp``): a bool tensor
  is refused, a complex one too (``clamp is not supported for complex types``); the
  iterator is ``build_borrowing_unary_op`` (output laid out like the input, one dtype).
  Each element is ``x < 0 ? 0 : x``, which is ``std::max(x, 0)`` with a NaN ``x`` kept and
  ``-0.0`` kept, as torch CPU's loops give.
- ``clamp_min(self, min)`` (a Scalar bound; ``clamp_min_``, ``clamp_min.out``): the same
  loop with the bound converted to the dtype; a non-float tensor is first converted to
  ``result_type(self, min)``, and a NaN bound makes every element NaN (``clamp_min_out``).
- ``threshold(self, threshold, value)`` (and ``threshold_``, ``threshold.out``) is
  ``self <= threshold ? value : self``; ``threshold_backward(grad, self, threshold)`` (and
  ``.grad_input``) is ``self <= threshold ? 0 : grad`` -- relu's derivative. Both build
  ``threshold``'s iterator (promote to a common dtype, cast to the output, safe casting, no
  overlap check; ``torch_mydev_rules.iterator.families``) and run ``threshold_kernel``:
  bool and complex dtypes are refused, the threshold converts to the dtype (float32 for
  float16/bfloat16, which compare in float32) with ``Scalar::to``'s overflow check.

All three run the binary loop of ``kernels.elementwise`` (``THRESHOLDS``). ``relu``,
``relu_`` and ``threshold_backward`` keep an ``elementwise.entries.Entry`` per call signature,
as add does: a repeated call allocates its output and runs the prepared loop.
"""

from __future__ import annotations

import torch

from torch_mydev import _C
from torch_mydev.kernels.elementwise import kernel as kernels
from torch_mydev.ops import replay
from torch_mydev.ops.elementwise import entries
from torch_mydev.ops.elementwise.aten import fill_
from torch_mydev.ops.elementwise.checks import check_range, check_supported, cpu_bool_error
from torch_mydev.ops.elementwise.entries import entry_of
from torch_mydev.ops.elementwise.plan import (
    device_of,
    finish,
    input_tensors,
    kernel_operand,
    make_plan,
    output_tensors,
)
from torch_mydev.ops.per_call import GENERAL, Entry, serve, serve_one
from torch_mydev_rules.iterator.families import iterator_config
from torch_mydev_rules.iterator.numbers import NUMBER_DTYPES, Number, number_dtype, number_key
from torch_mydev_rules.iterator.promotion import OperandDtype, dtype_name, result_type

_REDUCED = (torch.float16, torch.bfloat16)
_FAST_DTYPES = frozenset(kernels.SUPPORTED_DTYPES)
_signature = _C._signature


_RELU = replay.TABLES["relu"]


# ---- the registered kernels ------------------------------------------------------------------


def relu(self: torch.Tensor) -> torch.Tensor:
    """aten::relu: ``clamp_min(self, 0)``."""
    result = replay.replay(_RELU, self)
    if result is not None:
        return result
    _check_relu(self)
    result = _fast_relu(self, False)
    return _general_relu(self, False) if result is None else result


def relu_(self: torch.Tensor) -> torch.Tensor:
    """aten::relu_: ``clamp_min_(self, 0)``."""
    _check_relu(self)
    result = _fast_relu(self, True)
    return _general_relu(self, True) if result is None else result


def clamp_min(self: torch.Tensor, min: Number, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """aten::clamp_min / clamp_min.out (a Scalar bound): ``self < min ? min : self``."""
    return _general_clamp_min(self, min, out, False)


def clamp_min_(self: torch.Tensor, min: Number) -> torch.Tensor:
    """aten::clamp_min_ (a Scalar bound)."""
    return _general_clamp_min(self, min, self, True)


def threshold(
    self: torch.Tensor, threshold: Number, value: Number, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """aten::threshold / threshold.out: ``self <= threshold ? value : self``."""
    return _general_threshold("threshold", self, self, threshold, value, out, False)


def threshold_(self: torch.Tensor, threshold: Number, value: Number) -> torch.Tensor:
    """aten::threshold_."""
    return _general_threshold("threshold", self, self, threshold, value, self, True)


def threshold_backward(
    grad_output: torch.Tensor,
    self: torch.Tensor,
    threshold: Number,
    *,
    grad_input: torch.Tensor | None = None,
) -> torch.Tensor:
    """aten::threshold_backward / threshold_backward.grad_input:
    ``self <= threshold ? 0 : grad_output``."""
    if grad_input is None:
        result = _fast_threshold_backward(grad_output, self, threshold)
        if result is not None:
            return result
    return _general_threshold(
        "threshold_backward", self, grad_output, threshold, 0, grad_input, False
    )


# ---- checks ------------------------------------------------------------------------------------


def _check_relu(self: torch.Tensor) -> None:
    """``relu``'s own check (CPU's exception type: ``cpu_bool_error``), then ``clamp_min``'s
    meta function's."""
    if self.dtype == torch.bool:
        raise cpu_bool_error("relu")("Boolean inputs not supported for relu")
    if self.is_complex():
        raise NotImplementedError("clamp is not supported for complex types")


def _check_threshold(common: torch.dtype, threshold: Number, value: Number) -> None:
    """``threshold_kernel``'s dispatch (all types but bool and complex, plus float16 and
    bfloat16) and its ``Scalar::to`` conversions of the threshold and the value."""
    if common == torch.bool or common.is_complex:
        raise NotImplementedError(f"\"threshold_cpu\" not implemented for '{dtype_name(common)}'")
    check_supported("threshold", common)
    check_range(threshold, torch.float32 if common in _REDUCED else common)
    check_range(value, common)


# ---- general paths -----------------------------------------------------------------------------


def _general_relu(self: torch.Tensor, inplace: bool) -> torch.Tensor:
    """The plan (``build_borrowing_unary_op``), the output, ``clamp_min`` with bound 0."""
    plan, target = make_plan(
        self if inplace else None, [self], iterator_config("relu"), inplace=inplace
    )
    check_supported("relu", self.dtype)
    device = device_of(target, [self])
    result, written = output_tensors(plan, target, device)
    a = kernel_operand(_resolved(self), plan, 1)
    kernels.binary(
        "clamp_min", kernel_operand(written, plan, 0), a, a, plan.coalesced_shape, alpha=0
    )
    return finish(result, written)


def _general_clamp_min(
    self: torch.Tensor, bound: Number, out: torch.Tensor | None, inplace: bool
) -> torch.Tensor:
    """``TORCH_META_FUNC(clamp_min)`` then ``clamp_min_out``: complex refused; a non-float
    ``self`` first becomes ``self.to(result_type(self, bound))`` (in place, that type must be
    ``self``'s); ``build_borrowing_unary_op``; a NaN bound fills the output with NaN, any
    other runs ``clamp_min_scalar_kernel`` with the bound converted to the dtype."""
    if self.is_complex() or isinstance(bound, complex):
        raise NotImplementedError("clamp is not supported for complex types")
    x = self
    if not self.dtype.is_floating_point:
        common = result_type(
            [
                OperandDtype(self.dtype, self.dim()),
                OperandDtype(number_dtype(bound), 0, is_wrapped_number=True),
            ],
            default_dtype=torch.get_default_dtype(),
        )
        if inplace and common != self.dtype:
            raise RuntimeError(
                f"result type {dtype_name(common)} can't be cast to the desired output type "
                f"{dtype_name(self.dtype)}"
            )
        if common != self.dtype:
            x = self.to(common)
    plan, target = make_plan(out, [x], iterator_config("clamp_min"), inplace=inplace)
    dtype = plan.common_dtype
    if dtype == torch.bool:
        raise NotImplementedError("\"clamp_min_scalar_cpu\" not implemented for 'Bool'")
    check_supported("clamp_min", dtype)
    device = device_of(target, [x])
    result, written = output_tensors(plan, target, device)
    if isinstance(bound, float) and bound != bound:
        fill_(written, bound)
        return finish(result, written)
    check_range(bound, dtype)
    a = kernel_operand(_resolved(x), plan, 1)
    kernels.binary(
        "clamp_min", kernel_operand(written, plan, 0), a, a, plan.coalesced_shape, alpha=bound
    )
    return finish(result, written)


def _general_threshold(
    name: str,
    self: torch.Tensor,
    other: torch.Tensor,
    threshold: Number,
    value: Number,
    out: torch.Tensor | None,
    inplace: bool,
) -> torch.Tensor:
    """``threshold`` (``other`` is ``self``, ``value`` the number written) and
    ``threshold_backward`` (``other`` the gradient, ``value`` 0): the iterator over
    (out, self, other), the casts it plans, then the binary loop."""
    config = iterator_config(name, default_dtype=torch.get_default_dtype())
    inputs = [self, other]
    plan, target = make_plan(out, inputs, config, inplace=inplace)
    common = plan.common_dtype
    _check_threshold(common, threshold, value)
    device = device_of(target, inputs)
    result, written = output_tensors(plan, target, device)
    ops = input_tensors(plan, [_resolved(x) for x in inputs], device)
    a = kernel_operand(ops[0], plan, 1)
    if name == "threshold":  # b: the value, one element read everywhere
        b = kernels.Operand(
            kernels.scalar_bytes(value, common), 0, common, (0,) * len(plan.coalesced_shape)
        )
    else:
        b = kernel_operand(ops[1], plan, 2)
    kernels.binary(
        name, kernel_operand(written, plan, 0), a, b, plan.coalesced_shape, alpha=threshold
    )
    return finish(result, written)


def _resolved(x: torch.Tensor) -> torch.Tensor:
    """``x`` with a lazy negation applied (``torch._neg_view``); the loops read plain values."""
    return x.resolve_neg() if x.is_neg() else x


# ---- per-signature entries (as ``elementwise.entries.fast_binary``) ---------------------------


def _fast_relu(self: torch.Tensor, inplace: bool) -> torch.Tensor | None:
    """relu / relu_ through a cached ``Entry`` (``per_call.serve_one``: ``a`` read twice);
    None where the general path must run."""
    target = self if inplace else None
    record_in = replay.target("relu", inplace)
    memory = entries.MEMORY
    return serve_one(
        memory, ("relu", inplace), self, _first_relu, (self, inplace), target, record_in
    )


def _first_relu(self: torch.Tensor, inplace: bool) -> tuple[torch.Tensor, Entry | object]:
    return _general_relu(self, inplace), _relu_entry(self, inplace)


def _relu_entry(self: torch.Tensor, inplace: bool) -> Entry | object:
    if self.device.type == "cpu" or self.dtype not in _FAST_DTYPES:
        return GENERAL
    plan, _ = make_plan(self if inplace else None, [self], iterator_config("relu"), inplace=inplace)
    strides = plan.coalesced_stride_bytes
    prepared = kernels.prepare_binary(
        "clamp_min", self.dtype, plan.coalesced_shape, (strides[0], strides[1], strides[1]), alpha=0
    )
    return entry_of(prepared, plan.shape, plan.output_strides[0], self.dtype, self.get_device())


def _fast_threshold_backward(
    grad_output: torch.Tensor, self: torch.Tensor, threshold: Number
) -> torch.Tensor | None:
    """threshold_backward through a cached ``Entry`` (``per_call.serve``; ``a`` is ``self``,
    ``b`` the gradient); None where the general path must run (arguments it alone handles,
    a signature marked ``GENERAL``, a storage too small)."""
    if not (isinstance(grad_output, torch.Tensor) and isinstance(self, torch.Tensor)):
        return None
    if type(threshold) not in NUMBER_DTYPES:
        return None
    signature = _signature(self, grad_output)
    if signature is None:
        return None
    key, lazy_bits, a_start, a_base, a_nbytes, b_start, b_base, b_nbytes = signature
    if lazy_bits:
        return None
    cache_key = ("threshold_backward", key, number_key(threshold))
    memory = entries.MEMORY
    entry = memory.peek(cache_key)
    call = (grad_output, self, threshold)
    return serve(
        memory, cache_key, entry, _first_threshold_backward, call, None, None, key,
        a_start, a_base + a_nbytes - a_start, b_start, b_base + b_nbytes - b_start,
    )  # fmt: skip


def _first_threshold_backward(
    grad_output: torch.Tensor, self: torch.Tensor, threshold: Number
) -> tuple[torch.Tensor, Entry | object]:
    result = _general_threshold("threshold_backward", self, grad_output, threshold, 0, None, False)
    return result, _threshold_backward_entry(grad_output, self, threshold)


def _threshold_backward_entry(
    grad_output: torch.Tensor, self: torch.Tensor, threshold: Number
) -> Entry | object:
    if grad_output.device.type == "cpu" or self.device.type == "cpu":
        return GENERAL
    config = iterator_config("threshold_backward", default_dtype=torch.get_default_dtype())
    plan, _ = make_plan(None, [self, grad_output], config)
    if any(plan.temporaries) or plan.common_dtype not in _FAST_DTYPES:
        return GENERAL
    prepared = kernels.prepare_binary(
        "threshold_backward",
        plan.common_dtype,
        plan.coalesced_shape,
        plan.coalesced_stride_bytes,
        alpha=threshold,
    )
    out_dtype = plan.output_dtypes[0]
    return entry_of(prepared, plan.shape, plan.output_strides[0], out_dtype, self.get_device())
