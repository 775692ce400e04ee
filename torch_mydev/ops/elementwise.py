"""Native elementwise ops on mydev: ATen's checks, our iterator plan, a numba kernel.

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
5. one kernel of ``torch_mydev.kernels.elementwise`` over the plan's coalesced iteration.

Python numbers (``x + 1.5``, the ``.Scalar`` overloads) arrive as Python objects: they are
wrapped numbers, with the promotion rank of one. CPU zero-dim tensors may join mydev tensors,
as torch allows CPU scalars beside any device.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import torch

from torch_mydev import _C
from torch_mydev.kernels import elementwise as kernels
from torch_mydev.ops.buffers import byte_offset, storage_bytes
from torch_mydev.ops.copy import copy_
from torch_mydev.ops.factories import allocate, like_strides
from torch_mydev_rules import layout
from torch_mydev_rules.iterator.cache import LRUCache, cached_build
from torch_mydev_rules.iterator.numbers import Number, number_dtype
from torch_mydev_rules.iterator.operands import (
    IteratorConfig,
    OperandSpec,
    binary_float_op_config,
    binary_op_config,
    comparison_op_config,
    unary_op_config,
)
from torch_mydev_rules.iterator.plan import Plan
from torch_mydev_rules.iterator.promotion import (
    OperandDtype,
    can_cast,
    dtype_name,
    is_complex,
    result_type,
    to_real,
)

Arg = torch.Tensor | Number

_REDUCED = (torch.float16, torch.bfloat16)
_FAST_DTYPES = frozenset(kernels.SUPPORTED_DTYPES)

_PARTIAL_OVERLAP = (
    "unsupported operation: some elements of the input tensor and the written-to tensor refer "
    "to a single memory location. Please clone() the tensor before performing the operation."
)
_RESIZED = (
    "An output with one or more elements was resized since it had shape {old}, which does not "
    "match the required output shape {new}. This behavior is deprecated, and in a future "
    "PyTorch release outputs will not be resized unless they have zero elements. You can "
    "explicitly reuse an out tensor t by resizing it, inplace, to zero elements with "
    "t.resize_(0)."
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


# ---- the registered kernels ------------------------------------------------------------------


def add(self: Arg, other: Arg, alpha: Number = 1, *, out: torch.Tensor | None = None):
    """aten::add.Tensor / add.Scalar / add.out / add.Scalar_out: ``self + alpha * other``."""
    return _arithmetic("add", self, other, alpha=alpha, out=out)


def add_(self: torch.Tensor, other: Arg, alpha: Number = 1) -> torch.Tensor:
    """aten::add_.Tensor / add_.Scalar."""
    return _arithmetic("add", self, other, alpha=alpha, out=self, inplace=True)


def sub(self: Arg, other: Arg, alpha: Number = 1, *, out: torch.Tensor | None = None):
    """aten::sub.Tensor / sub.Scalar / sub.out / sub.Scalar_out: ``self - alpha * other``."""
    return _arithmetic("sub", self, other, alpha=alpha, out=out)


def sub_(self: torch.Tensor, other: Arg, alpha: Number = 1) -> torch.Tensor:
    """aten::sub_.Tensor / sub_.Scalar."""
    return _arithmetic("sub", self, other, alpha=alpha, out=self, inplace=True)


def mul(self: Arg, other: Arg, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """aten::mul.Tensor / mul.Scalar / mul.out / mul.Scalar_out."""
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
    def functional(self: Arg, other: Arg, *, out: torch.Tensor | None = None) -> torch.Tensor:
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
    return _unary("neg", self, out=out)


def neg_(self: torch.Tensor) -> torch.Tensor:
    """aten::neg_."""
    return _unary("neg", self, out=self, inplace=True)


def absolute(self: torch.Tensor, *, out: torch.Tensor | None = None) -> torch.Tensor:
    """aten::abs / abs.out; a complex input gives its real dtype unless ``out`` is complex."""
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
        if self.device == value.device:
            source = value.clone() if _shares_storage(self, value) else value
            return copy_(self, source)
        value = value.item()
    if self.device.type == "cpu":  # fill_.Tensor(cpu_self, mydev_value) reaches us
        return self.fill_(value)
    _check_supported("fill_", self.dtype)
    raw = _checked_scalar(value, self.dtype)
    sizes, strides = tuple(self.shape), self.stride()
    config = IteratorConfig(
        check_mem_overlap=False,
        resize_outputs=False,
        check_all_same_dtype=False,
        check_all_same_device=False,
    )
    # fill_out's iterator has only the output; planning self as output and input gives the
    # same permuted, coalesced walk over self's own layout.
    output = OperandSpec(sizes, strides, self.dtype, is_output=True)
    plan = cached_build([output, OperandSpec(sizes, strides, self.dtype)], config)
    kernels.fill(_operand(self, plan, 0), raw, plan.coalesced_shape)
    return self


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
    dtype = result_type(
        [_dtype_info(self), _dtype_info(other)], default_dtype=torch.get_default_dtype()
    )
    if out is not None and out.dtype != dtype:
        raise RuntimeError(
            f"Expected out type to be {dtype_name(dtype)} but got {dtype_name(out.dtype)}"
        )
    device = out.device if out is not None else _first_device(condition, self, other)
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
    _check_supported("where", dtype)
    inputs = [cond, *values]
    plan, target = _plan(out, inputs, IteratorConfig(check_all_same_dtype=False), dtype=dtype)
    result, written = _outputs(plan, target, device)
    ops = _inputs(plan, inputs, device)
    kernels.where(
        _operand(written, plan, 0),
        *(_operand(x, plan, i + 1) for i, x in enumerate(ops)),
        plan.coalesced_shape,
    )
    return _finish(result, written)


# ---- the per-call path: one cached entry per layout ---------------------------------------------


class BinaryEntry:
    """What ``_general_arithmetic`` (or ``_general_compare``, ``_general_unary``) decides from
    layouts and numbers alone, for one call signature.

    Kept per (op, rounding mode, the tensors' ``_C._signature``, the Python number operand,
    alpha, in-place or not, default dtype) for calls the general path would finish with no
    cast temporary and no resize: all tensors on mydev, ``other`` a mydev tensor or a Python
    number. ``prepared`` is the kernel set-up (``kernels.prepare_binary``); ``constant``
    holds a Python number's converted bytes (the kernel reads its address), ``sizes`` /
    ``strides`` / ``dtype`` the functional form's new output.
    """

    __slots__ = (
        "args",
        "constant",
        "constant_address",
        "dtype",
        "extents",
        "kernel",
        "sizes",
        "strides",
    )

    def __init__(
        self,
        prepared: kernels.Prepared,
        constant: np.ndarray | None,
        sizes: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: torch.dtype,
    ) -> None:
        self.kernel = prepared.kernel
        self.args = prepared.args
        self.extents = prepared.extents
        self.constant = constant
        self.constant_address = 0 if constant is None else constant.ctypes.data
        self.sizes = sizes
        self.strides = strides
        self.dtype = dtype


# (op, rounding mode, signature, number key, alpha key, in-place, default dtype) -> entry, or
# _GENERAL for a call signature the general path must take every time.
BINARY_CACHE_SIZE = 4096
_binary_entries: LRUCache[tuple, BinaryEntry | str] = LRUCache(BINARY_CACHE_SIZE)
_GENERAL = "general"
_signature = _C._signature
_empty_strided = _C._empty_strided


def _fast_binary(
    name: str,
    mode: str | None,
    self: Arg,
    other: Arg,
    alpha: Number,
    inplace: bool,
) -> torch.Tensor | None:
    """add/sub/mul/div (functional or in-place) and the functional comparisons through a
    cached ``BinaryEntry``.

    Returns None where the general path (``_general_arithmetic``) must run: arguments it alone
    handles, a first call (which it answers, then the entry is made), a call signature
    without an entry, or per-call facts an entry cannot check (an input sharing ``self``'s
    storage in place, a storage too small for the layout).
    """
    if not isinstance(self, torch.Tensor):
        return None
    number = None
    if isinstance(other, torch.Tensor):
        facts = _signature(self, other)
    else:
        number = _number_key(other)
        if number is None:
            return None
        facts = _signature(self)
    alpha_key = _number_key(alpha)
    if facts is None or facts[1] or alpha_key is None:
        return None
    default = torch.get_default_dtype() if number is not None or name == "div" else None
    key = (name, mode, facts[0], number, alpha_key, inplace, default)
    entry = _binary_entries.peek(key)
    if entry is None:
        return _first_binary(key, name, mode, self, other, alpha, inplace)
    if entry is _GENERAL:
        return None
    extents = entry.extents
    a_start = facts[2]
    if facts[3] + facts[4] - a_start < extents[1]:
        return None  # a storage smaller than the layout: the general path raises
    if number is None:
        b_start = facts[5]
        if facts[6] + facts[7] - b_start < extents[2] or (inplace and facts[6] == facts[3]):
            return None
    else:
        b_start = entry.constant_address
    if inplace:
        out, out_start = self, a_start
    else:
        out = _empty_strided(entry.sizes, entry.strides, entry.dtype, 0)
        out_start = out.data_ptr()
    if entry.kernel(out_start, a_start, b_start, *entry.args):
        raise RuntimeError("ZeroDivisionError")
    return out


def _first_binary(
    key: tuple,
    name: str,
    mode: str | None,
    self: torch.Tensor,
    other: Arg,
    alpha: Number,
    inplace: bool,
) -> torch.Tensor:
    """Answer a call signature's first call with the general path, then make its entry."""
    target = self if inplace else None
    if name in kernels.COMPARISONS:
        result = _general_compare(name, self, other, out=target, inplace=inplace)
    else:
        result = _general_arithmetic(
            name, self, other, alpha=alpha, rounding_mode=mode, out=target, inplace=inplace
        )
    _binary_entries.put(key, _binary_entry(name, mode, self, other, alpha, inplace))
    return result


def _binary_entry(
    name: str,
    mode: str | None,
    self: torch.Tensor,
    other: Arg,
    alpha: Number,
    inplace: bool,
) -> BinaryEntry | str:
    """The entry of a call the general path has just answered, or ``_GENERAL``."""
    tensors = [self, other] if isinstance(other, torch.Tensor) else [self]
    if any(t.device.type == "cpu" for t in tensors):
        return _GENERAL  # a CPU scalar beside mydev tensors: moved per call
    default = torch.get_default_dtype()
    compare = name in kernels.COMPARISONS
    if compare:
        if inplace:
            return _GENERAL  # the bool result is cast into self through a temporary
        config = comparison_op_config(None, default_dtype=default)
    elif name == "div" and mode is None:
        config = binary_float_op_config(default_dtype=default)
    else:
        config = binary_op_config(default_dtype=default)
    plan, _ = _plan(self if inplace else None, [self, other], config, inplace=inplace)
    common = plan.common_dtype
    # A number is converted into the entry once; a tensor of another dtype needs a
    # temporary per call, and so does an output of another dtype.
    casts = (
        plan.temporaries[0]
        or plan.temporaries[1]
        or (plan.temporaries[2] and isinstance(other, torch.Tensor))
    )
    if casts or common not in _FAST_DTYPES:
        return _GENERAL
    if compare:
        constant = None
        if not isinstance(other, torch.Tensor):
            constant = kernels.scalar_bytes(other, common)
        prepared = kernels.prepare_compare(
            name, common, plan.coalesced_shape, plan.coalesced_stride_bytes
        )
        return BinaryEntry(prepared, constant, plan.shape, plan.output_strides[0], torch.bool)
    op = {"add": "add", "sub": "add", "mul": "mul"}.get(name) or (
        "div" if mode is None else f"div_{mode}"
    )
    scalar_other = _opmath_scalar(op, plan, other)
    if scalar_other is not None and isinstance(other, torch.Tensor):
        return _GENERAL  # torch reads the tensor's value per call
    constant = None
    if scalar_other is not None:
        constant = np.array([scalar_other], dtype=np.float32)
    elif not isinstance(other, torch.Tensor):
        constant = kernels.scalar_bytes(other, common)
    prepared = kernels.prepare_binary(
        op,
        common,
        plan.coalesced_shape,
        plan.coalesced_stride_bytes,
        alpha=-alpha if name == "sub" else alpha,
        scalar_other=scalar_other is not None,
    )
    return BinaryEntry(
        prepared, constant, plan.shape, plan.output_strides[0], plan.output_dtypes[0]
    )


def _fast_unary(name: str, self: torch.Tensor, inplace: bool) -> torch.Tensor | None:
    """neg and abs (functional or in-place) through a cached ``BinaryEntry`` (no ``b``).

    None where the general path (``_general_unary``) must run, as for ``_fast_binary``; complex
    ``abs`` (a real result) always takes it.
    """
    facts = _signature(self)
    if facts is None or facts[1]:
        return None
    key = (name, facts[0], inplace)
    entry = _binary_entries.peek(key)
    if entry is None:
        if self.is_complex() and name == "abs":
            return None
        result = _general_unary(name, self, out=self if inplace else None, inplace=inplace)
        _binary_entries.put(key, _unary_entry(name, self, inplace))
        return result
    if entry is _GENERAL:
        return None
    a_start = facts[2]
    if facts[3] + facts[4] - a_start < entry.extents[1]:
        return None
    if inplace:
        out, out_start = self, a_start
    else:
        out = _empty_strided(entry.sizes, entry.strides, entry.dtype, 0)
        out_start = out.data_ptr()
    entry.kernel(out_start, a_start, *entry.args)
    return out


def _unary_entry(name: str, self: torch.Tensor, inplace: bool) -> BinaryEntry | str:
    """The entry of a unary call the general path has just answered, or ``_GENERAL``."""
    if self.device.type == "cpu" or self.dtype not in _FAST_DTYPES:
        return _GENERAL
    plan, _ = _plan(self if inplace else None, [self], unary_op_config(), inplace=inplace)
    if any(plan.temporaries):
        return _GENERAL
    prepared = kernels.prepare_unary(
        name, self.dtype, plan.coalesced_shape, plan.coalesced_stride_bytes
    )
    return BinaryEntry(prepared, None, plan.shape, plan.output_strides[0], self.dtype)


def _number_key(x: object) -> tuple | None:
    """A cache key for a Python number that equals another's only for the same value bits.

    None where ``==`` is no test of identity (a float zero, whose sign it ignores; NaN, which
    equals nothing) and for anything but a Python number: such calls take the general path.
    """
    kind = type(x)
    if kind is int or kind is bool:
        return (kind, x)
    if kind is float:
        return (kind, x) if x == x and x != 0 else None
    if kind is complex:
        ok = x == x and x.real != 0 and x.imag != 0
        return (kind, x) if ok else None
    return None


# ---- families ----------------------------------------------------------------------------------


def _arithmetic(
    name: str,
    self: Arg,
    other: Arg,
    *,
    alpha: Number = 1,
    rounding_mode: str | None = None,
    out: torch.Tensor | None = None,
    inplace: bool = False,
) -> torch.Tensor:
    """add, sub, mul and div: the cached entry of the call signature (functional and in-place
    forms), else ``_general_arithmetic``."""
    if out is None or inplace:
        result = _fast_binary(name, rounding_mode, self, other, alpha, inplace)
        if result is not None:
            return result
    return _general_arithmetic(
        name, self, other, alpha=alpha, rounding_mode=rounding_mode, out=out, inplace=inplace
    )


def _compare(
    name: str, self: Arg, other: Arg, *, out: torch.Tensor | None = None, inplace: bool = False
) -> torch.Tensor:
    """The comparisons: the cached entry of the call signature (functional form), else
    ``_general_compare``."""
    if out is None:
        result = _fast_binary(name, None, self, other, 1, False)
        if result is not None:
            return result
    return _general_compare(name, self, other, out=out, inplace=inplace)


def _unary(
    name: str, self: torch.Tensor, *, out: torch.Tensor | None = None, inplace: bool = False
) -> torch.Tensor:
    """neg and abs: the cached entry of the call signature (functional and in-place forms),
    else ``_general_unary``."""
    if out is None or inplace:
        result = _fast_unary(name, self, inplace)
        if result is not None:
            return result
    return _general_unary(name, self, out=out, inplace=inplace)


def _general_arithmetic(
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
    default = torch.get_default_dtype()
    if name == "div" and rounding_mode is None:
        config = binary_float_op_config(default_dtype=default)
    elif name == "div" and rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
            f"'{rounding_mode}'"
        )
    else:
        config = binary_op_config(default_dtype=default)
    if name == "sub":
        _sub_check(self, other)
    inputs = [self, other]
    plan, target = _plan(out, inputs, config, inplace=inplace)
    common = plan.common_dtype
    if name in ("add", "sub"):
        _alpha_check(common, alpha)
    if name == "div":
        op = "div" if rounding_mode is None else f"div_{rounding_mode}"
        if rounding_mode is not None and (common == torch.bool or is_complex(common)):
            raise NotImplementedError(
                f"\"div_{rounding_mode}_cpu\" not implemented for '{dtype_name(common)}'"
            )
    else:
        op = "mul" if name == "mul" else "add"  # sub is add with -alpha (ATen's sub_stub)
    _check_supported(name, common)
    if name == "sub":
        alpha = -alpha
    if op == "add":
        _check_range(alpha, common)  # ``alpha.to<scalar_t>()`` in the kernel is checked
    device = _device(target, inputs)
    result, written = _outputs(plan, target, device)
    ops = _inputs(plan, inputs, device)
    scalar_other = _opmath_scalar(op, plan, other)
    try:
        kernels.binary(
            op,
            _operand(written, plan, 0),
            _operand(ops[0], plan, 1),
            _operand(ops[1], plan, 2),
            plan.coalesced_shape,
            alpha=alpha,
            scalar_other=scalar_other,
        )
    except ZeroDivisionError:
        raise RuntimeError("ZeroDivisionError") from None
    return _finish(result, written)


def _general_compare(
    name: str, self: Arg, other: Arg, *, out: torch.Tensor | None = None, inplace: bool = False
) -> torch.Tensor:
    """eq, ne, lt, le, gt, ge: ``build_borrowing_comparison_op``, then ``kernels.compare``.

    The functional form's output is bool; an ``out=`` (or in-place ``self``) keeps its dtype
    and receives 1/0. The kernel always writes bool: a non-bool output gets a bool temporary
    laid out like the tensor torch's kernel would write, copied in afterwards.
    """
    target_dtype = None if out is None else out.dtype
    config = comparison_op_config(target_dtype, default_dtype=torch.get_default_dtype())
    inputs = [self, other]
    plan, target = _plan(out, inputs, config, inplace=inplace)
    common = plan.common_dtype
    if name not in ("eq", "ne") and is_complex(common):
        raise NotImplementedError(f"\"{name}_cpu\" not implemented for '{dtype_name(common)}'")
    _check_supported(name, common)
    device = _device(target, inputs)
    result, written = _outputs(plan, target, device)
    ops = _inputs(plan, inputs, device)
    if written.dtype == torch.bool:
        flags, strides = written, plan.coalesced_stride_bytes[0]
    else:
        flags = allocate(plan.shape, plan.operand_strides[0], torch.bool, device)
        strides = tuple(s // plan.dtypes[0].itemsize for s in plan.coalesced_stride_bytes[0])
    kernels.compare(
        name,
        kernels.Operand(storage_bytes(flags), byte_offset(flags), torch.bool, strides),
        _operand(ops[0], plan, 1),
        _operand(ops[1], plan, 2),
        plan.coalesced_shape,
    )
    return _finish(result, flags)


def _general_unary(
    name: str, self: torch.Tensor, *, out: torch.Tensor | None = None, inplace: bool = False
) -> torch.Tensor:
    """neg and abs: ``build_borrowing_unary_op`` (one dtype throughout), ``kernels.unary``."""
    if name == "neg" and self.dtype == torch.bool:
        raise RuntimeError(_BOOL_NEG)
    plan, target = _plan(out, [self], unary_op_config(), inplace=inplace)
    if name == "abs" and self.dtype == torch.bool:
        raise NotImplementedError("\"abs_cpu\" not implemented for 'Bool'")
    _check_supported(name, self.dtype)
    device = _device(target, [self])
    result, written = _outputs(plan, target, device)
    ops = _inputs(plan, [self], device)
    kernels.unary(name, _operand(written, plan, 0), _operand(ops[0], plan, 1), plan.coalesced_shape)
    return _finish(result, written)


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
    _resize_output(out, tuple(complex_result.shape))
    return copy_(out, torch.view_as_real(complex_result)[..., 0])


# ---- planning, operands, outputs ---------------------------------------------------------------


def _plan(
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
    _check_devices(out, inputs)
    if out is None:
        output = OperandSpec.output(dtype)
    else:
        read_write = inplace or any(x is out for x in inputs)
        output = OperandSpec(
            tuple(out.shape), out.stride(), out.dtype, is_output=True, is_read_write=read_write
        )
    specs = [output, *(_spec(x) for x in inputs)]
    if out is not None:
        _check_partial_overlap(out, inputs)
    return cached_build(specs, config), out


def _spec(x: Arg) -> OperandSpec:
    if isinstance(x, torch.Tensor):
        return OperandSpec(tuple(x.shape), x.stride(), x.dtype)
    return OperandSpec((), (), number_dtype(x), is_scalar=True)


def _outputs(
    plan: Plan, target: torch.Tensor | None, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """The tensor the caller gets and the one the kernel writes (a temporary on a cast)."""
    if target is None:
        result = allocate(plan.shape, plan.output_strides[0], plan.output_dtypes[0], device)
        return result, result
    if plan.will_resize[0]:
        _resize_output(target, plan.shape, plan.output_strides[0])
    if plan.temporaries[0]:
        return target, allocate(plan.shape, plan.operand_strides[0], plan.dtypes[0], device)
    return target, target


def _inputs(plan: Plan, inputs: Sequence[Arg], device: torch.device) -> list[Arg]:
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


def _operand(x: Arg, plan: Plan, index: int) -> kernels.Operand:
    """Operand ``index`` of the plan as the kernel reads it (a number: its converted bytes)."""
    strides = plan.coalesced_stride_bytes[index]
    if isinstance(x, torch.Tensor):
        return kernels.Operand(storage_bytes(x), byte_offset(x), x.dtype, strides)
    dtype = plan.dtypes[index]
    return kernels.Operand(kernels.scalar_bytes(x, dtype), 0, dtype, strides)


def _finish(result: torch.Tensor, written: torch.Tensor) -> torch.Tensor:
    """Copy a temporary output into the caller's tensor (casting), and return the latter."""
    if written is not result:
        copy_(result, written)
    return result


def _resize_output(out: torch.Tensor, shape: tuple[int, ...], strides=None) -> None:
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


def _opmath_scalar(op: str, plan: Plan, other: Arg) -> float | None:
    """The float32 divisor/factor of torch's float16/bfloat16 ``opmath`` loop, if it runs.

    ``mul_kernel``, ``div_true_kernel``, ``div_trunc_kernel`` and ``div_floor_kernel`` take
    that loop when the common dtype is float16/bfloat16 and the second input is a scalar of
    the iteration (every stride 0): they compute in float32 with ``other``'s original value
    (before any cast to the common dtype) and round once.
    """
    if op == "add" or plan.common_dtype not in _REDUCED:
        return None
    strides = plan.coalesced_stride_bytes[plan.num_outputs + 1]
    if any(s != 0 and n != 1 for n, s in zip(plan.coalesced_shape, strides, strict=True)):
        return None
    if isinstance(other, torch.Tensor):
        source = kernels.Operand(storage_bytes(other), byte_offset(other), other.dtype, ())
        raw = kernels.read_scalar(source, torch.float32)
    else:
        raw = kernels.scalar_bytes(other, torch.float32)
    return float(raw.view(np.float32)[0])


# ---- checks ------------------------------------------------------------------------------------


def _check_devices(out: torch.Tensor | None, inputs: Sequence[Arg]) -> None:
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


def _device(target: torch.Tensor | None, inputs: Sequence[Arg]) -> torch.device:
    if target is not None:
        return target.device
    return _first_device(*inputs)


def _first_device(*args: Arg) -> torch.device:
    """The first non-CPU device among the tensors (torch's ``out_device``), else CPU."""
    for x in args:
        if isinstance(x, torch.Tensor) and x.device.type != "cpu":
            return x.device
    return torch.device("cpu")


def _check_partial_overlap(out: torch.Tensor, inputs: Sequence[Arg]) -> None:
    """``assert_no_partial_overlap(output, input)`` for every input that is not ``out``."""
    for x in inputs:
        if not isinstance(x, torch.Tensor) or x is out or not _shares_storage(out, x):
            continue
        status = layout.get_overlap_status(_mem_range(out), _mem_range(x))
        if status is layout.MemOverlapStatus.PARTIAL:
            raise RuntimeError(_PARTIAL_OVERLAP)


def _check_supported(name: str, dtype: torch.dtype | None) -> None:
    """Refuse dtypes the kernels lack (complex32, uint16/32/64, float8...) as torch's dispatch
    macros refuse theirs: ``NotImplementedError`` (a ``RuntimeError``)."""
    if dtype not in kernels.SUPPORTED_DTYPES:
        raise NotImplementedError(
            f"mydev {name}: dtype {dtype} is not supported by the native kernels"
        )


def _sub_check(self: Arg, other: Arg) -> None:
    """``sub_check`` (BinaryOps.h): no bool operands."""
    self_bool = _arg_dtype(self) == torch.bool
    other_bool = _arg_dtype(other) == torch.bool
    if self_bool and other_bool:
        raise RuntimeError(_BOOL_SUB_BOTH)
    if self_bool or other_bool:
        raise RuntimeError(_BOOL_SUB)


def _alpha_check(dtype: torch.dtype, alpha: Number) -> None:
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


def _checked_scalar(value: Number, dtype: torch.dtype) -> np.ndarray:
    """``Scalar::to<T>()``: ``c10::checked_convert``'s overflow check, then the conversion."""
    _check_range(value, dtype)
    return kernels.scalar_bytes(value, dtype)


def _check_range(value: Number, dtype: torch.dtype) -> None:
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


# ---- small helpers -----------------------------------------------------------------------------


def _arg_dtype(x: Arg) -> torch.dtype:
    return x.dtype if isinstance(x, torch.Tensor) else number_dtype(x)


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


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device:
        return False
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _mem_range(t: torch.Tensor) -> layout.MemRange:
    return layout.MemRange.from_layout(
        t.untyped_storage().data_ptr(), t.shape, t.stride(), t.element_size(), t.storage_offset()
    )
