"""Decides whether the iterator can skip permuting and coalescing, and how it then allocates.

Mirrors ``TensorIteratorBase::compute_fast_setup_type`` and ``fast_set_up``
(``ATen/TensorIterator.cpp``). When every operand that has a layout already shares one
dense layout, TensorIterator iterates the whole thing as one flat dimension and gives new
outputs that same layout: contiguous, channels_last, or -- for any other dense layout --
exactly the inputs' strides.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from torch_mydev_rules import layout
from torch_mydev_rules.iterator.operands import IteratorConfig, OperandSpec

__all__ = ["FastSetup", "FastSetupType", "compute_fast_setup_type", "fast_set_up"]


class FastSetupType(enum.Enum):
    """ATen's ``FastSetupType``: which shared layout allows the flat fast path."""

    NONE = "NONE"
    CONTIGUOUS = "CONTIGUOUS"
    CHANNELS_LAST = "CHANNELS_LAST"
    NON_OVERLAPPING_DENSE = "NON_OVERLAPPING_DENSE"


def _has_layout(op: OperandSpec, will_resize: bool) -> bool:
    """Operands the fast path looks at: defined, and not an output about to be resized."""
    return op.defined and not will_resize


def compute_fast_setup_type(
    operands: Sequence[OperandSpec],
    will_resize: Sequence[bool],
    all_ops_same_shape: bool,
    config: IteratorConfig,
) -> FastSetupType:
    """Pick the fast set-up (``compute_fast_setup_type``).

    None unless every taking-part operand has the broadcast shape. Among the operands with a
    layout (undefined and to-be-resized outputs are skipped): all contiguous -> CONTIGUOUS
    (checked first, so an ambiguous N,C,1,1 tensor counts as contiguous); all channels_last
    contiguous -> CHANNELS_LAST; all non-overlapping-and-dense with identical strides ->
    NON_OVERLAPPING_DENSE. With ``enforce_linear_iteration`` only CONTIGUOUS is allowed.
    """
    if not all_ops_same_shape:
        return FastSetupType.NONE
    laid_out = [op for op, r in zip(operands, will_resize, strict=True) if _has_layout(op, r)]
    if config.enforce_linear_iteration:
        if all(layout.is_contiguous(op.sizes, op.strides) for op in laid_out):
            return FastSetupType.CONTIGUOUS
        return FastSetupType.NONE
    if all(layout.is_contiguous(op.sizes, op.strides) for op in laid_out):
        return FastSetupType.CONTIGUOUS
    if all(layout.is_channels_last_contiguous(op.sizes, op.strides) for op in laid_out):
        return FastSetupType.CHANNELS_LAST
    # Dense layouts must also be one layout: ATen compares strides from the last operand
    # backwards, and any mismatch vetoes the fast path.
    if all(layout.is_non_overlapping_and_dense(op.sizes, op.strides) for op in laid_out) and all(
        op.strides == laid_out[-1].strides for op in laid_out
    ):
        return FastSetupType.NON_OVERLAPPING_DENSE
    return FastSetupType.NONE


@dataclass(frozen=True)
class FastSetup:
    """What ``fast_set_up`` produces.

    ``output_strides``: element strides of each output, in operand order (allocated ones and
    kept ones alike). ``shape`` / ``stride_bytes``: the flat iteration, ``(numel,)`` and one
    element size per operand (both empty for a zero-dim iteration).
    """

    output_strides: tuple[tuple[int, ...], ...]
    shape: tuple[int, ...]
    stride_bytes: tuple[tuple[int, ...], ...]


def fast_set_up(
    operands: Sequence[OperandSpec],
    will_resize: Sequence[bool],
    shape: Sequence[int],
    setup: FastSetupType,
) -> FastSetup:
    """Allocate outputs in the shared layout and flatten the iteration (``fast_set_up``).

    New (undefined or resized) outputs get contiguous strides, channels_last strides, or --
    for NON_OVERLAPPING_DENSE -- the strides of the last defined operand (an input), copied
    as they are; outputs that exist keep their strides. The iteration becomes one dimension
    of ``numel`` elements whose byte stride is each operand's element size.
    """
    if setup is FastSetupType.NONE:
        raise ValueError("fast_set_up needs a fast set-up type other than NONE")
    shape = tuple(shape)
    if setup is FastSetupType.CONTIGUOUS:
        new_strides = tuple(layout.contiguous_strides(shape))
    elif setup is FastSetupType.CHANNELS_LAST:
        new_strides = tuple(
            layout.strides_for_memory_format(shape, layout.MemoryFormat.CHANNELS_LAST)
        )
    else:
        last_defined = [op for op in operands if op.defined][-1]
        new_strides = last_defined.strides
    output_strides = []
    for op, resize in zip(operands, will_resize, strict=True):
        if op.is_output:
            output_strides.append(new_strides if (resize or not op.defined) else op.strides)
    if shape:
        flat_shape: tuple[int, ...] = (layout.numel(shape),)
        stride_bytes = tuple((op.dtype.itemsize,) for op in operands)
    else:
        flat_shape = ()
        stride_bytes = tuple(() for _ in operands)
    return FastSetup(tuple(output_strides), flat_shape, stride_bytes)
