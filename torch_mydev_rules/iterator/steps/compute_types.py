"""Decides each operand's dtype, the common dtype, and which operands CPU replaces by temporaries.

Mirrors ``TensorIteratorBase::compute_types`` (``ATen/TensorIterator.cpp``). On CPU that step
does more than name dtypes: an input whose dtype differs from the common dtype is replaced by
``input.to(common_dtype)`` -- a new tensor whose strides follow ``preserve_format`` -- and an
``out=`` tensor of another dtype by a contiguous temporary. The later layout steps see the
temporaries, so this module reports the operands as the iterator sees them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from torch_mydev_rules import layout
from torch_mydev_rules.iterator.operands import IteratorConfig, OperandSpec
from torch_mydev_rules.iterator.promotion import (
    OperandDtype,
    can_cast,
    dtype_name,
    is_integral,
    result_type,
)

__all__ = ["TypeInfo", "compute_common_dtype", "compute_types"]


@dataclass(frozen=True)
class TypeInfo:
    """What ``compute_types`` decides.

    ``operands`` are the operands as the iterator continues with them: undefined outputs now
    carry their dtype, and on CPU promoted inputs / cast outputs are the temporaries (new dtype,
    new strides). ``temporaries`` flags which operands were replaced. ``common_dtype`` is None
    when the config asks for none and the inputs disagree.
    """

    operands: tuple[OperandSpec, ...]
    common_dtype: torch.dtype | None
    temporaries: tuple[bool, ...]


def compute_common_dtype(
    operands: Sequence[OperandSpec], *, default_dtype: torch.dtype = torch.float32
) -> torch.dtype | None:
    """Promote the inputs' dtypes (``compute_common_dtype``): ``result_type`` over the inputs."""
    return result_type(
        (OperandDtype(op.dtype, op.ndim, op.is_scalar) for op in operands if not op.is_output),
        default_dtype=default_dtype,
    )


def compute_types(
    operands: Sequence[OperandSpec],
    config: IteratorConfig,
    *,
    all_ops_are_scalars: bool = False,
    cpu: bool = True,
) -> TypeInfo:
    """Decide dtypes the way ``compute_types`` does.

    1. The common dtype starts as the first input's dtype; differing input dtypes, or a
       defined output of another dtype, fail ``check_all_same_dtype`` when it is set.
    2. With nothing to promote, cast or allocate, the common dtype stays the first input's
       (None when inputs differ) and nothing else happens.
    3. With ``promote_inputs_to_common_dtype`` and differing inputs (or only zero-dim ones) the
       common dtype is ``result_type`` of the inputs; ``promote_integer_inputs_to_float`` then
       turns an integral (or bool) common dtype into the default float dtype.
    4. Undefined outputs take the static dtype if declared, else the common dtype;
       ``enforce_safe_casting_to_output`` requires ``can_cast(common, output dtype)``.
    5. On CPU only (``cpu=True``): a defined output of another dtype becomes a contiguous
       temporary of the common dtype (``cast_common_dtype_to_outputs``), and an input of
       another dtype becomes ``input.to(common)`` with ``preserve_format`` strides
       (``promote_inputs_to_common_dtype``). Other devices read and write the originals.
    """
    ops = list(operands)
    seen = _survey(ops, config)
    _check_dtypes(ops, config, seen)
    no_flags = not (
        seen.undefined_outputs
        or config.check_all_same_device
        or config.promote_inputs_to_common_dtype
        or config.cast_common_dtype_to_outputs
        or config.enforce_safe_casting_to_output
    )
    if no_flags:
        common = None if seen.different_inputs else seen.common
        return TypeInfo(tuple(ops), common, tuple(False for _ in ops))
    common = _promoted(ops, config, seen, all_ops_are_scalars)
    settled = [_settle(op, config, common, cpu) for op in ops]
    return TypeInfo(
        tuple(op for op, _ in settled), common, tuple(replaced for _, replaced in settled)
    )


@dataclass(frozen=True)
class _Survey:
    """Step 1's scan of the defined operands: the first input's dtype (``common``), the
    first output's, whether either side disagrees, whether an output has no dtype yet."""

    common: torch.dtype | None
    output_dtype: torch.dtype | None
    different_inputs: bool
    different_outputs: bool
    undefined_outputs: bool


def _survey(ops: Sequence[OperandSpec], config: IteratorConfig) -> _Survey:
    common: torch.dtype | None = None
    output_dtype: torch.dtype | None = None
    different_inputs = different_outputs = undefined_outputs = False
    for op in ops:
        if op.dtype is None:
            if config.static_dtype is None:
                undefined_outputs = True
            continue
        if not op.defined:
            continue
        if not op.is_output:
            if op.dtype != common:
                if common is None:
                    common = op.dtype
                else:
                    different_inputs = True
        elif op.dtype != output_dtype:
            if output_dtype is None:
                output_dtype = op.dtype
            else:
                different_outputs = True
    return _Survey(common, output_dtype, different_inputs, different_outputs, undefined_outputs)


def _check_dtypes(ops: Sequence[OperandSpec], config: IteratorConfig, seen: _Survey) -> None:
    """Step 1's errors: inputs that differ with nothing to promote them while an output needs
    a dtype, and ``check_all_same_dtype`` (the first operand of another dtype names it)."""
    if (
        seen.different_inputs
        and not config.promote_inputs_to_common_dtype
        and (
            seen.undefined_outputs
            or config.enforce_safe_casting_to_output
            or config.cast_common_dtype_to_outputs
        )
    ):
        raise RuntimeError("inputs of different dtypes need promote_inputs_to_common_dtype")
    if config.check_all_same_dtype and (
        seen.different_inputs
        or seen.different_outputs
        or (seen.output_dtype is not None and seen.common != seen.output_dtype)
    ):
        for op in ops:
            if op.defined and op.dtype != seen.common:
                raise RuntimeError(
                    f"Found dtype {dtype_name(op.dtype)} but expected {dtype_name(seen.common)}"
                )


def _promoted(
    ops: Sequence[OperandSpec], config: IteratorConfig, seen: _Survey, all_ops_are_scalars: bool
) -> torch.dtype | None:
    """Step 3: the common dtype after promotion (and integer-to-float promotion)."""
    common = seen.common
    if (seen.different_inputs or all_ops_are_scalars) and config.promote_inputs_to_common_dtype:
        common = compute_common_dtype(ops, default_dtype=config.default_dtype)
    if config.promote_integer_inputs_to_float and is_integral(common, include_bool=True):
        common = config.default_dtype
    return common


def _settle(
    op: OperandSpec, config: IteratorConfig, common: torch.dtype | None, cpu: bool
) -> tuple[OperandSpec, bool]:
    """Steps 4 and 5 for one operand: its dtype, the safe-casting check, and on CPU the
    temporary that replaces it (the operand as the iterator goes on with it, and whether it
    was replaced)."""
    if op.dtype is None:
        op = replace(op, dtype=config.static_dtype or common)
    if not op.defined:
        return op, False
    if (
        config.enforce_safe_casting_to_output
        and op.is_output
        and op.dtype != common
        and not can_cast(common, op.dtype)
    ):
        raise RuntimeError(
            f"result type {dtype_name(common)} can't be cast to the desired output "
            f"type {dtype_name(op.dtype)}"
        )
    if cpu and op.dtype != common:
        if config.cast_common_dtype_to_outputs and op.is_output:
            # empty_like(out, common dtype, LEGACY_CONTIGUOUS_MEMORY_FORMAT)
            strides = layout.contiguous_strides(op.sizes)
            return replace(op, strides=tuple(strides), dtype=common), True
        if config.promote_inputs_to_common_dtype and not op.is_output:
            # input.to(common): _to_copy with preserve_format
            strides = layout.preserve_format_strides(op.sizes, op.strides)
            return replace(op, strides=tuple(strides), dtype=common), True
    return op, False
