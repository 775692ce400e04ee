"""Decides which aten overloads each native elementwise op registers, and the kernel each runs.

The device side of the op-family table: ``torch_mydev_rules.iterator.families.FAMILIES``
names each family's TensorIterator config (read by the ops and by ``explain``); ``NATIVE_OPS``
here names, per op, its family, its registered functions and the overloads they serve.
``registry.KERNELS`` is made from it, so an overload is listed once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from torch_mydev.ops.elementwise import aten as ew
from torch_mydev.ops.elementwise import relu
from torch_mydev_rules.iterator.families import FAMILIES, Family

__all__ = ["NATIVE_OPS", "NativeOp", "overload_kernels"]


class NativeOp(NamedTuple):
    """One aten op with mydev kernels: ``name`` + each suffix of ``overloads`` runs
    ``functional``; ``name`` + ``_`` + each suffix of ``inplace_overloads`` runs ``inplace``."""

    name: str
    family: str  # a key of FAMILIES
    functional: Callable
    overloads: tuple[str, ...]
    inplace: Callable | None = None
    inplace_overloads: tuple[str, ...] = ()

    @property
    def iterator_family(self) -> Family:
        """The family entry of ``torch_mydev_rules`` (its config rule, its torch names)."""
        return FAMILIES[self.family]


# Overload suffixes shared by whole families (torch 2.13's native_functions.yaml).
_BINARY = (".Tensor", ".Scalar", ".out", ".Scalar_out")
_BINARY_INPLACE = (".Tensor", ".Scalar")
_DIV_MODES = (".Tensor_mode", ".Scalar_mode", ".out_mode", ".Scalar_mode_out")
_DIV_MODES_INPLACE = (".Tensor_mode", ".Scalar_mode")
_COMPARISON = (".Tensor", ".Scalar", ".Tensor_out", ".Scalar_out")
_UNARY = ("", ".out")


def _comparison(name: str) -> NativeOp:
    functional, inplace = getattr(ew, name), getattr(ew, name + "_")
    return NativeOp(name, "comparison", functional, _COMPARISON, inplace, _BINARY_INPLACE)


NATIVE_OPS: tuple[NativeOp, ...] = (
    NativeOp("add", "binary", ew.add, _BINARY, ew.add_, _BINARY_INPLACE),
    NativeOp("sub", "binary", ew.sub, _BINARY, ew.sub_, _BINARY_INPLACE),
    NativeOp("mul", "binary", ew.mul, _BINARY, ew.mul_, _BINARY_INPLACE),
    NativeOp(
        "div",
        "division",
        ew.div,
        _BINARY + _DIV_MODES,
        ew.div_,
        _BINARY_INPLACE + _DIV_MODES_INPLACE,
    ),
    NativeOp(
        "floor_divide",
        "floor_divide",
        ew.floor_divide,
        ("", ".Scalar", ".out", ".Scalar_out"),
        ew.floor_divide_,
        _BINARY_INPLACE,
    ),
    *(_comparison(name) for name in ("eq", "ne", "lt", "le", "gt", "ge")),
    NativeOp("neg", "unary", ew.neg, _UNARY, ew.neg_, ("",)),
    NativeOp("abs", "unary", ew.absolute, _UNARY, ew.absolute_, ("",)),
    NativeOp("relu", "clamp_min", relu.relu, ("",), relu.relu_, ("",)),
    NativeOp("clamp_min", "clamp_min", relu.clamp_min, ("", ".out"), relu.clamp_min_, ("",)),
    NativeOp("threshold", "threshold", relu.threshold, ("", ".out"), relu.threshold_, ("",)),
    NativeOp("threshold_backward", "threshold", relu.threshold_backward, ("", ".grad_input")),
    NativeOp("fill_", "fill", ew.fill_, (".Scalar", ".Tensor")),
    NativeOp("zero_", "fill", ew.zero_, ("",)),
    NativeOp("where", "where", ew.where, (".self", ".self_out")),
)


def overload_kernels() -> dict[str, Callable]:
    """Every overload name of ``NATIVE_OPS`` (``"add.Tensor"``, ``"add_.Scalar"``, ...) and
    the function registered for it."""
    table: dict[str, Callable] = {}
    for op in NATIVE_OPS:
        for suffix in op.overloads:
            table[op.name + suffix] = op.functional
        for suffix in op.inplace_overloads:
            table[op.name + "_" + suffix] = op.inplace
    return table
