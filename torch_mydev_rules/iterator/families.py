"""Decides which TensorIterator config each elementwise op family builds: the one table.

ATen builds every elementwise op with one of a few configs (``BINARY_OP_CONFIG``,
``BINARY_FLOAT_OP_CONFIG``, ``set_up_comparison_op_config``, ``UNARY_OP_CONFIG``,
``UNARY_FLOAT_OP_CONFIG``, and the hand-made ones of ``where`` and ``fill_``). ``FAMILIES``
names, per family, the torch function names it covers and the config it builds; the device's
ops (``torch_mydev.ops``) and ``explain`` both ask ``iterator_config`` here, so what
``explain`` shows is what the device plans. The device side (which overloads are registered,
which kernel runs) is ``torch_mydev.ops.elementwise.families``, which reads this table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from torch_mydev_rules.iterator.operands import (
    IteratorConfig,
    binary_float_op_config,
    binary_op_config,
    comparison_op_config,
    unary_float_op_config,
    unary_op_config,
)

__all__ = ["FAMILIES", "Family", "family_of", "iterator_config"]


class ConfigArgs(NamedTuple):
    """What a family's config may depend on: ``div``'s rounding mode, an ``out=`` dtype."""

    rounding_mode: str | None
    out_dtype: torch.dtype | None
    default_dtype: torch.dtype


class Family(NamedTuple):
    """One op family: its ATen builder, the torch names it covers, its config rule."""

    name: str
    builder: str  # the ATen builder, as docs/ops.md names it
    names: tuple[str, ...]  # torch function names (and aliases) of the family
    config: Callable[[ConfigArgs], IteratorConfig]


def _binary(args: ConfigArgs) -> IteratorConfig:
    return binary_op_config(default_dtype=args.default_dtype)


def _division(args: ConfigArgs) -> IteratorConfig:
    # true division promotes integers to float; a rounding mode keeps them integral
    if args.rounding_mode is None:
        return binary_float_op_config(default_dtype=args.default_dtype)
    return binary_op_config(default_dtype=args.default_dtype)


def _comparison(args: ConfigArgs) -> IteratorConfig:
    return comparison_op_config(args.out_dtype, default_dtype=args.default_dtype)


def _unary(args: ConfigArgs) -> IteratorConfig:
    return unary_op_config()


def _unary_float(args: ConfigArgs) -> IteratorConfig:
    return unary_float_op_config(default_dtype=args.default_dtype)


def _threshold(args: ConfigArgs) -> IteratorConfig:
    # TORCH_META_FUNC(threshold) / (threshold_backward): promote, cast, safe casting; no
    # overlap check (threshold is idempotent)
    return IteratorConfig(
        check_mem_overlap=False,
        promote_inputs_to_common_dtype=True,
        cast_common_dtype_to_outputs=True,
        enforce_safe_casting_to_output=True,
        default_dtype=args.default_dtype,
    )


def _where(args: ConfigArgs) -> IteratorConfig:
    # where_self_out: no promotion (the inputs are converted first), any dtypes
    return IteratorConfig(check_all_same_dtype=False)


def _fill(args: ConfigArgs) -> IteratorConfig:
    # fill_out: overlapping self allowed, never resized, any dtype and device
    return IteratorConfig(
        check_mem_overlap=False,
        resize_outputs=False,
        check_all_same_dtype=False,
        check_all_same_device=False,
    )


_BINARY_NAMES = ("add", "sub", "subtract", "mul", "multiply")
_COMPARISON_NAMES = (
    "eq", "ne", "lt", "le", "gt", "ge",
    "not_equal", "less", "less_equal", "greater", "greater_equal",
)  # fmt: skip

FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family("binary", "binary_op_config", _BINARY_NAMES, _binary),
        Family(
            "division",
            "binary_float_op_config; with rounding_mode: binary_op_config",
            ("div", "divide", "true_divide"),
            _division,
        ),
        Family(
            "floor_divide",
            "binary_op_config (as div with rounding_mode='floor')",
            ("floor_divide",),
            _binary,
        ),
        Family(
            "comparison",
            "comparison_op_config",
            _COMPARISON_NAMES,
            _comparison,
        ),
        Family("unary", "unary_op_config", ("neg", "negative", "abs", "absolute"), _unary),
        Family(
            "unary_float",
            "unary_float_op_config",
            ("sqrt", "rsqrt", "exp", "log", "sin", "cos", "tanh", "sigmoid"),
            _unary_float,
        ),
        Family(
            "clamp_min",
            "unary_op_config (clamp_min's build_borrowing_unary_op; relu is clamp_min(self, 0))",
            ("relu", "clamp_min"),
            _unary,
        ),
        Family(
            "threshold",
            "promote, cast, safe casting, no overlap check (threshold's meta function)",
            ("threshold", "threshold_backward"),
            _threshold,
        ),
        Family("where", "check_all_same_dtype(false), no promotion", ("where",), _where),
        Family("fill", "the walk over self's own layout", ("fill_", "zero_"), _fill),
    )
}

_BY_NAME = {name: family for family in FAMILIES.values() for name in family.names}


def family_of(name: str) -> Family:
    """The family of the torch function ``name``; ``KeyError`` for a name no family has."""
    return _BY_NAME[name]


def iterator_config(
    name: str,
    *,
    rounding_mode: str | None = None,
    out_dtype: torch.dtype | None = None,
    default_dtype: torch.dtype = torch.float32,
) -> IteratorConfig:
    """The TensorIterator config ATen builds for the op ``name`` (a family's name or a torch
    function name), given ``div``'s rounding mode and the dtype of an ``out=`` tensor."""
    family = FAMILIES.get(name) or _BY_NAME[name]
    return family.config(ConfigArgs(rounding_mode, out_dtype, default_dtype))
