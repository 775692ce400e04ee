"""Decides nothing new: shows, step by step, how a torch call's output layout is decided.

``explain(op, *args, **kwargs)`` reads sizes, strides and dtypes off the arguments (any
tensors, any device; Python numbers allowed where torch takes them), runs the same rules the
device uses -- the TensorIterator ``build`` of ``plan.py`` and, for ``contiguous`` / ``clone``
/ ``empty_like``, the memory-format rules of ``torch_mydev_rules.layout`` first -- and returns a
``Report`` whose ``str()`` is a table of every step in order.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from torch_mydev_rules import layout
from torch_mydev_rules.iterator import describe
from torch_mydev_rules.iterator.casts import conversion
from torch_mydev_rules.iterator.families import FAMILIES, iterator_config
from torch_mydev_rules.iterator.numbers import number_dtype
from torch_mydev_rules.iterator.operands import OperandSpec, copy_config
from torch_mydev_rules.iterator.plan import Plan, build
from torch_mydev_rules.iterator.promotion import can_cast, dtype_name, to_real
from torch_mydev_rules.iterator.reference.opinferrer import dipu_output_strides

__all__ = ["Report", "explain"]


@dataclass(frozen=True)
class Report:
    """What ``explain`` found for one call.

    ``shape`` / ``output_strides`` / ``dtype`` describe the (first) output. ``fast_setup``,
    ``perm``, ``stride_bytes`` (per operand, original order), ``coalesced_shape`` and
    ``coalesced_stride_bytes`` (fastest first) come from the TensorIterator plan and are None
    when the call builds none (``empty_like``, or ``contiguous`` returning its input).
    ``steps`` lists ``(step, decision)`` in the order the decisions are made.
    ``dipu_strides`` is what DIPU's OpInferrer (``reference.opinferrer``) gives the new output
    of a functional elementwise call (None for other calls); with ``show_dipu`` (``explain(...,
    dipu=True)``) ``str()`` adds a row for it where it differs from torch's ``output_strides``.
    """

    op: str
    shape: tuple[int, ...]
    output_strides: tuple[int, ...]
    dtype: torch.dtype
    fast_setup: str | None
    perm: tuple[int, ...] | None
    stride_bytes: tuple[tuple[int, ...], ...] | None
    coalesced_shape: tuple[int, ...] | None
    coalesced_stride_bytes: tuple[tuple[int, ...], ...] | None
    steps: tuple[tuple[str, str], ...]
    plan: Plan | None = None
    dipu_strides: tuple[int, ...] | None = None
    show_dipu: bool = False

    def __str__(self) -> str:
        """A header naming the output layout, then one row per step."""
        head = (
            f"{self.op}: output {describe.sizes(self.shape)} "
            f"strides {describe.strides(self.output_strides)} {describe.dtype(self.dtype)}"
        )
        width = max(len("step"), *(len(name) for name, _ in self.steps))
        rows = [head, f"{'step'.ljust(width)} | decision", f"{'-' * width}-+-{'-' * 8}"]
        steps = self.steps
        dipu = self.dipu_strides
        if self.show_dipu and dipu is not None and dipu != self.output_strides:
            steps += (("DIPU OpInferrer", _dipu_note(dipu, self.output_strides)),)
        for name, text in steps:
            lines = _pack(text.split("; "), _LINE_WIDTH - width - 3)
            rows.append(f"{name.ljust(width)} | {lines[0]}")
            rows += [f"{' ' * width} | {line}" for line in lines[1:]]
        return "\n".join(rows)


_LINE_WIDTH = 100


def _dipu_note(dipu: tuple[int, ...], torch_strides: tuple[int, ...]) -> str:
    """The row that sets DIPU's output strides beside torch's."""
    return (
        f"would allocate strides {describe.strides(dipu)}; torch (followed here) gives "
        f"{describe.strides(torch_strides)}"
    )


def _pack(parts: list[str], width: int) -> list[str]:
    """Join ``parts`` with "; " into lines of at most ``width`` characters where possible."""
    lines = [parts[0]]
    for part in parts[1:]:
        if len(lines[-1]) + 2 + len(part) <= width:
            lines[-1] += "; " + part
        else:
            lines[-1] += ";"
            lines.append(part)
    return lines


def _spec(value: Any, *, is_output: bool = False, is_read_write: bool = False) -> OperandSpec:
    """An operand from a tensor (any device) or a Python number (a wrapped number)."""
    if isinstance(value, torch.Tensor):
        return OperandSpec(
            tuple(value.shape),
            tuple(value.stride()),
            value.dtype,
            is_output=is_output,
            is_read_write=is_read_write,
        )
    try:
        return OperandSpec((), (), number_dtype(value), is_scalar=True)
    except TypeError as error:
        raise TypeError(f"explain: {error}") from None


def _memory_format(value: torch.memory_format | None, default: layout.MemoryFormat):
    """A ``torch.memory_format`` keyword as ``layout.MemoryFormat``."""
    return default if value is None else layout.MemoryFormat.from_torch(value)


def _format_name(fmt: layout.MemoryFormat) -> str:
    """The name torch gives a memory format: ``channels_last``, ``contiguous_format``..."""
    return fmt.value


# The families whose ops explain plans as one TensorIterator build (``families.FAMILIES``:
# the same table the device's ops read, so explain and the device cannot disagree).
_ELEMENTWISE = ("binary", "division", "floor_divide", "comparison", "unary", "unary_float")
# relu is clamp_min(self, 0): one tensor operand, unary_op_config. clamp_min itself stays
# out: its bound is a Scalar argument, not an operand of the iterator.
_KNOWN = (*(name for family in _ELEMENTWISE for name in FAMILIES[family].names), "relu")
_OPERATOR = {
    operator.add: "add",
    operator.sub: "sub",
    operator.mul: "mul",
    operator.truediv: "div",
    operator.eq: "eq",
    operator.ne: "ne",
    operator.lt: "lt",
    operator.le: "le",
    operator.gt: "gt",
    operator.ge: "ge",
    operator.floordiv: "floor_divide",
    operator.neg: "neg",
    operator.abs: "abs",
}


def _op_name(op: Callable[..., Any]) -> tuple[str, bool]:
    """The torch op name of ``op`` and whether it is the in-place form."""
    if op in _OPERATOR:
        return _OPERATOR[op], False
    name = getattr(op, "__name__", None)
    for candidate in _KNOWN:
        for owner in (torch, torch.Tensor):
            if getattr(owner, candidate, None) is op:
                return candidate, False
        inplace = getattr(torch.Tensor, candidate + "_", None)
        if inplace is not None and inplace is op:
            return candidate, True
    raise NotImplementedError(f"explain does not know the op {name or op!r}")


def _explain_elementwise(op: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Report:
    """Binary, comparison and unary ops: one TensorIterator build."""
    name, inplace = _op_name(op)
    allowed = {"out", "alpha", "rounding_mode"}
    unknown = set(kwargs) - allowed
    if unknown:
        raise TypeError(f"explain({name}) got unexpected keyword arguments {sorted(unknown)}")
    out = args[0] if inplace else kwargs.get("out")
    if name == "abs" and args and isinstance(args[0], torch.Tensor) and args[0].is_complex():
        if inplace:
            raise RuntimeError("In-place abs is not supported for complex tensors.")
        if out is None or not out.is_complex():
            return _explain_abs_complex_to_real(args[0], out)
    config = iterator_config(
        name,
        rounding_mode=kwargs.get("rounding_mode"),
        out_dtype=None if out is None else out.dtype,
        default_dtype=torch.get_default_dtype(),
    )
    inputs = [_spec(a) for a in args]
    if inplace:
        output = _spec(args[0], is_output=True, is_read_write=True)
    elif out is not None:
        output = _spec(out, is_output=True, is_read_write=any(out is a for a in args))
    else:
        output = OperandSpec.output()
    # CUDA reads inputs of another dtype as they are; CPU and mydev make cast temporaries.
    on_cuda = any(isinstance(a, torch.Tensor) and a.is_cuda for a in (*args, out))
    plan = build([output, *inputs], config, cpu=not on_cuda)
    label = name + ("_" if inplace else "")
    report = _report(label, plan)
    if out is None and not inplace:  # DIPU's inferrer only allocates new outputs
        layouts = [(spec.sizes, spec.strides) for spec in inputs]
        report = replace(report, dipu_strides=dipu_output_strides(layouts))
    return report


def _explain_abs_complex_to_real(self: torch.Tensor, out: torch.Tensor | None) -> Report:
    """``abs`` of a complex tensor into a real result (``unary_op_impl_with_complex_to_float``
    and its ``_out``, ``UnaryOps.cpp``): the functional form allocates ``empty_like(self,
    real dtype)`` (preserve_format); an ``out=`` must hold the real dtype (``canCast``). Either
    way abs runs complex -> complex on a new tensor laid out by ``unary_op_config``'s build,
    the result is ``resize_output`` to its sizes (a real result of another shape becomes
    contiguous) and gets its real part (``copy_``)."""
    real = to_real(self.dtype)
    first = (
        "complex_to_float",
        f"abs of {describe.dtype(self.dtype)} is {describe.dtype(real)} "
        "(unary_op_impl_with_complex_to_float)",
    )
    if out is None:
        strides, why = _empty_like_strides(self, layout.MemoryFormat.PRESERVE)
        before = (first, ("empty_like", f"dtype {describe.dtype(real)}, {why}"))
        dtype, after = real, "result keeps its sizes and strides"
    else:
        if not can_cast(real, out.dtype):
            raise RuntimeError(
                f"result type {dtype_name(real)} can't be cast to the desired output type "
                f"{dtype_name(out.dtype)}"
            )
        before = (first,)
        dtype, strides = out.dtype, tuple(out.stride())
        after = "out keeps its sizes and strides"
        if tuple(out.shape) != tuple(self.shape):
            strides = tuple(layout.contiguous_strides(tuple(self.shape)))
            after = f"out resized: contiguous {describe.strides(strides)}"
    plan = build([OperandSpec.output(), _spec(self)], iterator_config("abs"))
    steps = (
        ("resize_output", after),
        ("copy_", f"the complex result's real part into the {describe.dtype(dtype)} result"),
    )
    report = _report("abs", plan, before, steps)
    return replace(report, output_strides=strides, dtype=dtype)


def _report(
    label: str,
    plan: Plan,
    before: tuple[tuple[str, str], ...] = (),
    after: tuple[tuple[str, str], ...] = (),
) -> Report:
    """A report of ``plan``'s first output, with ``before`` steps ahead of the build's and
    ``after`` steps behind them."""
    return Report(
        op=label,
        shape=plan.shape,
        output_strides=plan.output_strides[0],
        dtype=plan.output_dtypes[0],
        fast_setup=plan.fast_setup,
        perm=plan.perm,
        stride_bytes=plan.stride_bytes,
        coalesced_shape=plan.coalesced_shape,
        coalesced_stride_bytes=plan.coalesced_stride_bytes,
        steps=before + plan.steps + after,
        plan=plan,
    )


def _no_plan(label: str, t: torch.Tensor, out_strides: tuple[int, ...], steps) -> Report:
    """A report for a call that builds no iterator."""
    return Report(
        op=label,
        shape=tuple(t.shape),
        output_strides=tuple(out_strides),
        dtype=t.dtype,
        fast_setup=None,
        perm=None,
        stride_bytes=None,
        coalesced_shape=None,
        coalesced_stride_bytes=None,
        steps=tuple(steps),
    )


def _empty_like_strides(t: torch.Tensor, fmt: layout.MemoryFormat) -> tuple[tuple[int, ...], str]:
    """Strides ``empty_like(t, memory_format=fmt)`` gives, and why."""
    sizes, strides = tuple(t.shape), tuple(t.stride())
    if fmt is layout.MemoryFormat.PRESERVE:
        new = tuple(layout.preserve_format_strides(sizes, strides))
        if layout.is_non_overlapping_and_dense(sizes, strides):
            why = "preserve_format, input non-overlapping and dense: keep its strides"
        else:
            why = "preserve_format, input not dense: infer_dense_strides"
        return new, f"{why} -> {describe.strides(new)}"
    new = tuple(layout.strides_for_memory_format(sizes, fmt))
    return new, f"{_format_name(fmt)} -> {describe.strides(new)}"


def _explain_copy(dst: torch.Tensor, src: torch.Tensor) -> Report:
    """``dst.copy_(src)``: the early exit for the same tensor, else the copy iterator."""
    if dst is src:
        steps = [("copy_", "self is src: returns self, nothing copied")]
        return _no_plan("copy_", dst, tuple(dst.stride()), steps)
    plan = build([_spec(dst, is_output=True), _spec(src)], copy_config())
    return _report("copy_", plan, after=_convert_step(src.dtype, dst.dtype))


def _convert_step(src: torch.dtype, dst: torch.dtype) -> tuple[tuple[str, str], ...]:
    """The kernel's element conversion (``casts.conversion``), the copy's last step."""
    return (("copy_kernel", conversion(src, dst)),)


def _explain_copy_into_new(
    label: str, t: torch.Tensor, strides: tuple[int, ...], before: tuple[tuple[str, str], ...]
) -> Report:
    """``empty_like`` gave a new tensor with ``strides``; ``copy_`` fills it from ``t``."""
    dst = OperandSpec(tuple(t.shape), strides, t.dtype, is_output=True)
    plan = build([dst, _spec(t)], copy_config())
    return _report(label, plan, before, _convert_step(t.dtype, t.dtype))


def _explain_layout_op(name: str, args: tuple, kwargs: dict[str, Any]) -> Report:
    """``contiguous``, ``clone`` and ``empty_like``: a memory-format rule, then maybe a copy."""
    if len(args) != 1 or not isinstance(args[0], torch.Tensor):
        raise TypeError(f"explain({name!r}, tensor, memory_format=...) takes one tensor")
    unknown = set(kwargs) - {"memory_format"}
    if unknown:
        raise TypeError(f"explain({name!r}) got unexpected keyword arguments {sorted(unknown)}")
    (t,) = args
    sizes, strides = tuple(t.shape), tuple(t.stride())
    if name == "contiguous":
        fmt = _memory_format(kwargs.get("memory_format"), layout.MemoryFormat.CONTIGUOUS)
        if layout.is_contiguous_for(sizes, strides, fmt):
            decision = f"is_contiguous({_format_name(fmt)}) holds: returns self"
            return _no_plan(name, t, strides, [("contiguous", decision)])
        if fmt is layout.MemoryFormat.PRESERVE:
            raise RuntimeError("preserve memory format is unsupported by the contiguous operator")
        first = ("contiguous", f"not {_format_name(fmt)}-contiguous: clone into a new tensor")
        new, why = _empty_like_strides(t, fmt)
        return _explain_copy_into_new(name, t, new, (first, ("empty_like", why)))
    if name == "clone":
        fmt = _memory_format(kwargs.get("memory_format"), layout.MemoryFormat.PRESERVE)
        new, why = _empty_like_strides(t, fmt)
        return _explain_copy_into_new(name, t, new, (("empty_like", why),))
    fmt = _memory_format(kwargs.get("memory_format"), layout.MemoryFormat.PRESERVE)
    new, why = _empty_like_strides(t, fmt)
    return _no_plan(name, t, new, [("empty_like", why)])


def explain(op: Callable[..., Any] | str, *args: Any, **kwargs: Any) -> Report:
    """Explain how the output layout of ``op(*args, **kwargs)`` is decided, step by step.

    ``op`` is a torch function (``torch.add``, ``torch.sub``, ``torch.mul``, ``torch.div``,
    comparisons such as ``torch.eq``, unary ops such as ``torch.neg`` / ``torch.sqrt``; their
    ``Tensor`` methods, in-place ``Tensor.add_`` forms and ``operator`` equivalents too) or
    one of ``"copy_"`` (``explain("copy_", dst, src)``), ``"contiguous"``, ``"clone"``,
    ``"empty_like"`` (each taking ``memory_format=``). Nothing is computed or allocated:
    only sizes, strides and dtypes are read. ``dipu=True`` adds a last row with the strides
    DIPU's OpInferrer would give a functional elementwise op's output, where they differ from
    torch's (``Report.dipu_strides`` holds them either way).
    """
    show_dipu = bool(kwargs.pop("dipu", False))
    report = _explain(op, args, kwargs)
    return replace(report, show_dipu=True) if show_dipu else report


def _explain(op: Callable[..., Any] | str, args: tuple, kwargs: dict[str, Any]) -> Report:
    """``explain`` without its own keyword."""
    if isinstance(op, str):
        if op == "copy_":
            if len(args) != 2 or kwargs:
                raise TypeError("explain('copy_', dst, src) takes two tensors")
            dst, src = args
            if not isinstance(dst, torch.Tensor) or not isinstance(src, torch.Tensor):
                raise TypeError("explain('copy_', dst, src) takes two tensors")
            return _explain_copy(dst, src)
        if op in ("contiguous", "clone", "empty_like"):
            return _explain_layout_op(op, args, kwargs)
        raise NotImplementedError(f"explain does not know the op {op!r}")
    return _explain_elementwise(op, args, kwargs)
