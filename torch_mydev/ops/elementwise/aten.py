"""Native elementwise ops on mydev: the registered functions, and ``where`` / ``fill_``.

This module is the entry of each op (``families.NATIVE_OPS`` registers its functions); the
steps below live in ``elementwise.checks`` (1), ``elementwise.plan`` (2-4, the config from
``torch_mydev_rules.iterator.families``), ``elementwise.general`` (the whole general path)
and ``elementwise.entries`` (the per-signature cache that skips 1-4 on repeated calls).

Every op follows the structure of its ATen implementation (``native/BinaryOps.cpp``,
``native/UnaryOps.cpp``, ``native/TensorCompare.cpp``, ``native/Fill.cpp``):

1. ATen's argument checks (``sub_check``, ``alpha_check``, rounding modes, bool negation);
2. a TensorIterator plan (``torch_mydev_rules.iterator.build``, through its plan cache) with the
   config of ATen's builder (``binary_op_config``, ``binary_float_op_config``,
   ``comparison_op_config``, ``unary_op_config``): broadcast shape, common dtype
   (``torch.result_type``'s rule, Python numbers ranking lowest), safe casting into ``out=``,
   output strides;
3. outputs: a new tensor with the plan's strides, or the ``out=`` tensor resized the way
   structured kernels resize it (a warning when it had elements, then the plan's strides),
   or ``self`` for in-place forms;
4. the CPU cast temporaries the plan names: inputs of another dtype become
   ``input.to(common_dtype)`` copies (our ``copy_``), an output of another dtype is computed
   into a temporary and copied in;
5. one kernel of ``torch_mydev.kernels.elementwise.kernel`` over the plan's coalesced iteration.

Python numbers (``x + 1.5``, the ``.Scalar`` overloads) arrive as Python objects: they are
wrapped numbers, with the promotion rank of one. CPU zero-dim tensors may join mydev tensors,
as torch allows CPU scalars beside any device.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from torch_mydev import _C
from torch_mydev.kernels.elementwise import kernel as kernels
from torch_mydev.ops import replay
from torch_mydev.ops.buffers import writable
from torch_mydev.ops.copy.aten import copy_, copy_entry
from torch_mydev.ops.elementwise import general
from torch_mydev.ops.elementwise.checks import (
    Arg,
    check_supported,
    checked_scalar,
    shares_storage,
)
from torch_mydev.ops.elementwise.entries import fast_binary, fast_unary, fast_where
from torch_mydev.ops.elementwise.plan import (
    finish,
    first_device,
    input_tensors,
    kernel_operand,
    make_plan,
    output_tensors,
    resize_output,
)
from torch_mydev.ops.factories import allocate, like_strides
from torch_mydev.ops.replay import TABLES as _TABLES
from torch_mydev.ops.replay import replay as _replay
from torch_mydev_rules.iterator.cache import LRUCache, cached_build
from torch_mydev_rules.iterator.families import iterator_config
from torch_mydev_rules.iterator.numbers import NUMBER_DTYPES, Number, number_dtype
from torch_mydev_rules.iterator.operands import OperandSpec
from torch_mydev_rules.iterator.promotion import (
    OperandDtype,
    can_cast,
    dtype_name,
    result_type,
    to_real,
)

# ---- the registered kernels ------------------------------------------------------------------


def _with_alpha(name: str) -> tuple[Callable, Callable]:
    """The functional/out and in-place kernels of ``add`` or ``sub`` (their calls differ only
    in the op): the stub's replay and the cached entry first, then ``_arithmetic``."""
    table = _TABLES[name]

    def functional(self: Arg, other: Arg, alpha: Number = 1, *, out: torch.Tensor | None = None):
        if out is None:  # the per-call paths first, without _arithmetic's frame
            if type(alpha) is int and alpha == 1:
                result = _replay(table, self, other)
                if result is not None:
                    return result
            result = fast_binary(name, None, self, other, alpha, False)
            if result is not None:
                return result
            return general.general_arithmetic(name, self, other, alpha=alpha)  # asked once
        return _arithmetic(name, self, other, alpha=alpha, out=out)

    def inplace(self: torch.Tensor, other: Arg, alpha: Number = 1) -> torch.Tensor:
        return _arithmetic(name, self, other, alpha=alpha, out=self, inplace=True)

    functional.__name__ = functional.__qualname__ = name
    inplace.__name__ = inplace.__qualname__ = name + "_"
    return functional, inplace


add, add_ = _with_alpha("add")
add.__doc__ = "aten::add.Tensor / add.Scalar / add.out / add.Scalar_out: ``self + alpha * other``."
add_.__doc__ = "aten::add_.Tensor / add_.Scalar."
sub, sub_ = _with_alpha("sub")
sub.__doc__ = "aten::sub.Tensor / sub.Scalar / sub.out / sub.Scalar_out: ``self - alpha * other``."
sub_.__doc__ = "aten::sub_.Tensor / sub_.Scalar."


def mul(self: Arg, other: Arg, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """aten::mul.Tensor / mul.Scalar / mul.out / mul.Scalar_out."""
    if out is None:
        result = _replay(_TABLES["mul"], self, other)
        if result is not None:
            return result
        result = fast_binary("mul", None, self, other, 1, False)
        if result is not None:
            return result
        return general.general_arithmetic("mul", self, other)  # the entry was asked once
    return _arithmetic("mul", self, other, out=out)


def mul_(self: torch.Tensor, other: Arg) -> torch.Tensor:
    """aten::mul_.Tensor / mul_.Scalar."""
    return _arithmetic("mul", self, other, out=self, inplace=True)


def div(
    self: Arg,
    other: Arg,
    *,
    rounding_mode: str | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """aten::div (Tensor, Scalar, Tensor_mode, Scalar_mode and their out= forms)."""
    return _arithmetic("div", self, other, rounding_mode=rounding_mode, out=out)


def div_(self: torch.Tensor, other: Arg, *, rounding_mode: str | None = None) -> torch.Tensor:
    """aten::div_ (Tensor, Scalar, Tensor_mode, Scalar_mode)."""
    return _arithmetic("div", self, other, rounding_mode=rounding_mode, out=self, inplace=True)


def floor_divide(self: Arg, other: Arg, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """aten::floor_divide (Tensor, Scalar and their out= forms): ``div(rounding_mode="floor")``."""
    return _arithmetic("div", self, other, rounding_mode="floor", out=out)


def floor_divide_(self: torch.Tensor, other: Arg) -> torch.Tensor:
    """aten::floor_divide_.Tensor / floor_divide_.Scalar."""
    return _arithmetic("div", self, other, rounding_mode="floor", out=self, inplace=True)


def _comparison(name: str):
    table = _TABLES[name]

    def functional(self: Arg, other: Arg, *, out: torch.Tensor | None = None) -> torch.Tensor:
        if out is None:
            result = _replay(table, self, other)
            if result is not None:
                return result
        return _compare(name, self, other, out=out)

    def inplace(self: torch.Tensor, other: Arg) -> torch.Tensor:
        return _compare(name, self, other, out=self, inplace=True)

    functional.__name__ = functional.__qualname__ = name
    functional.__doc__ = f"aten::{name}.Tensor / .Scalar / .Tensor_out / .Scalar_out."
    inplace.__name__ = inplace.__qualname__ = name + "_"
    inplace.__doc__ = f"aten::{name}_.Tensor / {name}_.Scalar (the result cast into self)."
    return functional, inplace


eq, eq_ = _comparison("eq")
ne, ne_ = _comparison("ne")
lt, lt_ = _comparison("lt")
le, le_ = _comparison("le")
gt, gt_ = _comparison("gt")
ge, ge_ = _comparison("ge")


def neg(self: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """aten::neg / neg.out (bool refused, as torch's meta function does)."""
    if out is None:
        result = _replay(_TABLES["neg"], self)
        if result is not None:
            return result
    return _unary("neg", self, out=out)


def neg_(self: torch.Tensor) -> torch.Tensor:
    """aten::neg_."""
    return _unary("neg", self, out=self, inplace=True)


def absolute(self: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """aten::abs / abs.out; a complex input gives its real dtype unless ``out`` is complex."""
    if out is None:  # (complex tensors are never recorded)
        result = _replay(_TABLES["abs"], self)
        if result is not None:
            return result
    if self.is_complex() and (out is None or not out.is_complex()):
        return _abs_complex_to_real(self, out)
    return _unary("abs", self, out=out)


def absolute_(self: torch.Tensor) -> torch.Tensor:
    """aten::abs_ (refused for complex tensors, as torch does)."""
    if self.is_complex():
        raise RuntimeError("In-place abs is not supported for complex tensors.")
    return _unary("abs", self, out=self, inplace=True)


def fill_(self: torch.Tensor, value: Arg) -> torch.Tensor:
    """aten::fill_.Scalar / fill_.Tensor (``native/Fill.cpp``).

    A Python number converts with ``Scalar::to``'s overflow check. A zero-dim tensor on
    ``self``'s device is copied in (``copy_``, from a clone when it aliases ``self``); one on
    another device is read as a number first. Overlapping ``self`` (expanded) is allowed.
    """
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            raise RuntimeError(
                "fill_ only supports 0-dimension value tensor but got tensor with "
                f"{value.dim()} dimensions."
            )
        # bool -> bool would move a byte other than 0/1; CPU's fill writes the value read
        bool_bytes = self.dtype == value.dtype == torch.bool
        if self.device == value.device and not bool_bytes:
            source = value.clone() if shares_storage(self, value) else value
            return copy_(self, source)
        value = value.item()
    if self.device.type == "cpu":  # fill_.Tensor(cpu_self, mydev_value) reaches us
        return self.fill_(value)
    check_supported("fill_", self.dtype)
    raw = checked_scalar(value, self.dtype)
    if (
        self.is_contiguous()
        and not (self.is_conj() or self.is_neg())
        and self.numel() < kernels.PARALLEL_MIN_NUMEL
    ):  # a small fill: mydev's copy from one element, whose per-call path is cheaper
        source = _fill_source(raw, self.dtype, tuple(self.shape))
        copy_(self, source)
        _record_fill(self, value, source)
        return self
    sizes, strides = tuple(self.shape), self.stride()
    config = iterator_config("fill_")
    # fill_out's iterator has only the output; planning self as output and input gives the
    # same permuted, coalesced walk over self's own layout.
    output = OperandSpec(sizes, strides, self.dtype, is_output=True)
    plan = cached_build([output, OperandSpec(sizes, strides, self.dtype)], config)
    writable(self)
    kernels.fill(kernel_operand(self, plan, 0), raw, plan.coalesced_shape)
    return self


_fill_sources: LRUCache[tuple, torch.Tensor] = LRUCache(256)


def _fill_source(raw, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    """One CPU element holding ``raw`` (the converted value's bytes), expanded to ``shape``:
    a contiguous ``self`` is filled by mydev's own copy from it (its per-call path replays a
    recorded layout pair), bytes equal to the fill loop's, without planning the fill each
    call. Kept per (dtype, bytes, shape): an optimizer's ``zero_`` of the same buffers."""
    key = (dtype, raw.tobytes(), shape)
    source = _fill_sources.peek(key)
    if source is None:
        element = torch.frombuffer(bytearray(raw.tobytes()), dtype=torch.uint8).view(dtype)
        source = element.reshape(()).expand(shape)
        _fill_sources.put(key, source)
    return source


# (self's signature key, the value's type) of fills seen once: the second is recorded.
_fills_seen: LRUCache[tuple, bool] = LRUCache(256)


def _record_fill(self: torch.Tensor, value: Number, source: torch.Tensor) -> None:
    """On a signature's second small fill, record it for the stub (``replay.record_fill``),
    which then fills without Python: the copy from one element that ``fill_`` just ran."""
    kind = type(value)  # (the dtype passed check_supported: the stub converts into it)
    if kind not in NUMBER_DTYPES:
        return
    signature = _C._signature(self)
    if signature is None or signature[1]:
        return
    seen = (signature[0], kind)
    if _fills_seen.peek(seen) is None:
        _fills_seen.put(seen, True)
        return
    replay.record_fill(signature[0], kind, copy_entry(self, source).prepared, self.dtype)


def zero_(self: torch.Tensor) -> torch.Tensor:
    """aten::zero_: ``fill_(0)``."""
    return fill_(self, 0)


def where(
    condition: Arg, self: Arg, other: Arg, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """aten::where.self / where.self_out (``where_self_out`` in ``native/TensorCompare.cpp``).

    The result dtype is ``result_type(self, other)``; an ``out=`` of another dtype is an
    error. ``self``/``other`` of another dtype are converted first; CPU zero-dim operands move
    to the device; a uint8 condition warns once and becomes bool. The iterator then runs with
    ``check_all_same_dtype(false)`` and no promotion: output strides as for any ternary op.
    """
    if out is None:
        result = fast_where(condition, self, other)
        if result is not None:
            return result
    return general_where(condition, self, other, out)


def general_where(condition: Arg, self: Arg, other: Arg, out: torch.Tensor | None) -> torch.Tensor:
    """``where``'s whole path: result dtype, conversions, the plan, ``kernels.where``."""
    dtype = result_type(
        [_dtype_info(self), _dtype_info(other)], default_dtype=torch.get_default_dtype()
    )
    if out is not None and out.dtype != dtype:
        raise RuntimeError(
            f"Expected out type to be {dtype_name(dtype)} but got {dtype_name(out.dtype)}"
        )
    device = out.device if out is not None else first_device(condition, self, other)
    values = [_where_input(v, dtype, device) for v in (self, other)]
    cond = _where_input(condition, None, device)
    if cond.dtype == torch.uint8:
        _warn_uint8_condition()
        cond = _where_input(cond, torch.bool, device)
    if cond.dtype != torch.bool:
        raise RuntimeError(
            "where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{dtype_name(cond.dtype)}"
        )
    check_supported("where", dtype)
    inputs = [cond, *values]
    plan, target = make_plan(out, inputs, iterator_config("where"), dtype=dtype)
    result, written = output_tensors(plan, target, device)
    ops = input_tensors(plan, inputs, device)
    kernels.where(
        kernel_operand(written, plan, 0),
        *(kernel_operand(x, plan, i + 1) for i, x in enumerate(ops)),
        plan.coalesced_shape,
    )
    return finish(result, written)


# ---- families ----------------------------------------------------------------------------------


def _arithmetic(name: str, self: Arg, other: Arg, **options: Any) -> torch.Tensor:
    """add, sub, mul and div: the cached entry of the call signature (functional and in-place
    forms), else ``general.general_arithmetic``, whose keyword arguments ``options`` are
    (``alpha``, ``rounding_mode``, ``out``, ``inplace``)."""
    inplace = options.get("inplace", False)
    if inplace or options.get("out") is None:
        rounding_mode, alpha = options.get("rounding_mode"), options.get("alpha", 1)
        result = fast_binary(name, rounding_mode, self, other, alpha, inplace)
        if result is not None:
            return result
    return general.general_arithmetic(name, self, other, **options)


def _compare(
    name: str, self: Arg, other: Arg, *, out: torch.Tensor | None = None, inplace: bool = False
) -> torch.Tensor:
    """The comparisons: the cached entry of the call signature (functional form), else
    ``general.general_compare``."""
    if out is None:
        result = fast_binary(name, None, self, other, 1, False)
        if result is not None:
            return result
    return general.general_compare(name, self, other, out=out, inplace=inplace)


def _unary(
    name: str, self: torch.Tensor, *, out: torch.Tensor | None = None, inplace: bool = False
) -> torch.Tensor:
    """neg and abs: the cached entry of the call signature (functional and in-place forms),
    else ``general.general_unary``."""
    if out is None or inplace:
        result = fast_unary(name, self, inplace)
        if result is not None:
            return result
    return general.general_unary(name, self, out=out, inplace=inplace)


def _abs_complex_to_real(self: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """abs of a complex tensor into a real one (``unary_op_impl_with_complex_to_float``).

    The functional form allocates ``empty_like(self, real dtype)`` (preserve_format); ``out=``
    must hold the real dtype. Either way abs runs complex -> complex on a tensor laid out by
    the iterator, whose real part is then copied into the result.
    """
    real = to_real(self.dtype)
    if out is None:
        sizes = tuple(self.shape)
        out = allocate(sizes, like_strides(sizes, self.stride(), None), real, self.device)
    elif not can_cast(real, out.dtype):
        raise RuntimeError(
            f"result type {dtype_name(real)} can't be cast to the desired output type "
            f"{dtype_name(out.dtype)}"
        )
    complex_result = _unary("abs", self)
    resize_output(out, tuple(complex_result.shape))
    return copy_(out, torch.view_as_real(complex_result)[..., 0])


# ---- small helpers -----------------------------------------------------------------------------


def _dtype_info(x: Arg) -> OperandDtype:
    if isinstance(x, torch.Tensor):
        return OperandDtype(x.dtype, x.dim())
    return OperandDtype(number_dtype(x), 0, is_wrapped_number=True)


def _where_input(x: Arg, dtype: torch.dtype | None, device: torch.device) -> torch.Tensor:
    """``x.to(dtype)``, and a CPU zero-dim tensor (or a number) moved to ``device``.

    ``where_self_out`` converts ``self``/``other`` to the result dtype and moves CPU scalars to
    the output's device; both happen here in one ``copy_`` into a new mydev tensor laid out
    like ``x`` (preserve_format). Other CPU tensors stay where they are (the device check
    refuses them).
    """
    if not isinstance(x, torch.Tensor):
        x = torch.scalar_tensor(x, dtype=number_dtype(x))
    dtype = dtype or x.dtype
    moves = device.type != "cpu" and x.device != device and x.dim() == 0
    if not moves and x.dtype == dtype:
        return x
    if x.device.type == "cpu" and not moves:
        return x.to(dtype)
    sizes = tuple(x.shape)
    target = device if moves else x.device
    return copy_(allocate(sizes, like_strides(sizes, x.stride(), None), dtype, target), x)


_uint8_condition_warned = False


def _warn_uint8_condition() -> None:
    """``TORCH_WARN_ONCE`` of ``where_self_out``."""
    global _uint8_condition_warned
    if not _uint8_condition_warned:
        _uint8_condition_warned = True
        warnings.warn(
            "where received a uint8 condition tensor. This behavior is deprecated and will be "
            "removed in a future version of PyTorch. Use a boolean condition instead.",
            UserWarning,
            stacklevel=4,
        )
