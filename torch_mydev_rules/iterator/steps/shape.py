"""Decides the iteration shape: broadcasting, which operands take part, which outputs resize.

Mirrors ``TensorIteratorBase::compute_shape`` / ``mark_resize_outputs`` /
``compute_mem_overlaps`` (``ATen/TensorIterator.cpp``) and ``at::infer_size``
(``ATen/ExpandUtils.cpp``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch_mydev_rules import layout
from torch_mydev_rules.iterator.operands import IteratorConfig, OperandSpec

__all__ = [
    "ShapeInfo",
    "check_mem_overlaps",
    "compute_shape",
    "infer_size",
    "mark_resize_outputs",
]


def infer_size(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    """Broadcast two shapes (``at::infer_size``).

    Shapes align at their last dimension; a missing leading dimension counts as 1. Sizes must
    be equal or one of them 1, and a 1 takes the other size -- even 0. Otherwise raises
    ``RuntimeError`` with torch's message, naming the dimension in the result's numbering.
    """
    ndim = max(len(a), len(b))
    out = [0] * ndim
    for i in range(ndim - 1, -1, -1):
        offset = ndim - 1 - i
        dim_a = len(a) - 1 - offset
        dim_b = len(b) - 1 - offset
        size_a = a[dim_a] if dim_a >= 0 else 1
        size_b = b[dim_b] if dim_b >= 0 else 1
        if not (size_a == size_b or size_a == 1 or size_b == 1):
            raise RuntimeError(
                f"The size of tensor a ({size_a}) must match the size of tensor b ({size_b}) "
                f"at non-singleton dimension {i}"
            )
        out[i] = size_b if size_a == 1 else size_a
    return tuple(out)


@dataclass(frozen=True)
class ShapeInfo:
    """What ``compute_shape`` learns: the shape and two facts the later steps read.

    ``all_ops_same_shape`` gates the fast set-up; ``all_ops_are_scalars`` (only zero-dim
    operands took part) forces a common dtype to be computed.
    """

    shape: tuple[int, ...]
    all_ops_same_shape: bool
    all_ops_are_scalars: bool


def compute_shape(operands: Sequence[OperandSpec], config: IteratorConfig) -> ShapeInfo:
    """Broadcast the shapes of the operands that take part (``compute_shape``).

    Undefined outputs never take part; with ``resize_outputs`` no output does (``out=``
    tensors are resized to the result, an in-place output takes part as the input it also
    is). Any operand with a shape different from the running one, or a zero-dim operand
    beside a tensor, makes ``all_ops_same_shape`` false.
    """
    shape: tuple[int, ...] | None = None
    same = True
    has_scalars = False
    has_tensors = False
    for op in operands:
        if not op.defined:
            continue
        if config.resize_outputs and op.is_output:
            continue
        sizes = op.sizes
        if len(sizes) == 0:
            has_scalars = True
        else:
            has_tensors = True
        if has_scalars and has_tensors:
            same = False
        # shape_.empty() in ATen: a zero-dim operand seen first is replaced by the next one.
        if not shape:
            shape = sizes
        elif sizes != shape:
            same = False
            shape = infer_size(shape, sizes)
    return ShapeInfo(shape or (), same, not has_tensors)


def mark_resize_outputs(
    operands: Sequence[OperandSpec], shape: Sequence[int], config: IteratorConfig
) -> tuple[bool, ...]:
    """Which operands are outputs that will be resized (``mark_resize_outputs``).

    A defined output whose sizes differ from the broadcast shape is resized when the config
    resizes outputs and the output is not also an input; otherwise it is an error (outputs are
    never broadcast). Returns one flag per operand.
    """
    flags = []
    for op in operands:
        resize = False
        if op.is_output and op.defined and op.sizes != tuple(shape):
            if not config.resize_outputs or op.is_read_write:
                raise RuntimeError(
                    f"output with shape {list(op.sizes)} doesn't match the broadcast shape "
                    f"{list(shape)}"
                )
            resize = True
        flags.append(resize)
    return tuple(flags)


def check_mem_overlaps(operands: Sequence[OperandSpec], config: IteratorConfig) -> None:
    """Refuse outputs that write one memory location twice (``compute_mem_overlaps``).

    Only the internal-overlap half of ATen's check can be decided from sizes and strides
    (``assert_no_internal_overlap``); partial overlap between an output and an input needs the
    storages and offsets, which the caller checks.
    """
    if not config.check_mem_overlap:
        return
    for op in operands:
        if not (op.is_output and op.defined):
            continue
        if layout.has_internal_overlap(op.sizes, op.strides) is layout.MemOverlap.YES:
            raise RuntimeError(
                "unsupported operation: more than one element of the written-to tensor refers "
                "to a single memory location. Please clone() the tensor before performing the "
                "operation."
            )
