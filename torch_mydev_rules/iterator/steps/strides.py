"""Decides the iteration order and the strides of outputs the iterator allocates.

Mirrors the slow path of ``TensorIteratorBase::build`` (``ATen/TensorIterator.cpp``):
``compute_strides`` (byte strides after broadcasting, 0 on broadcast dimensions),
``reorder_dimensions`` (the permutation ``perm_``, fastest dimension first, recovered by an
insertion sort over the operands' strides -- see ATen's NOTE: [Computing output strides]),
``permute_dimensions`` / ``invert_perm``, and ``allocate_or_resize_outputs`` (new outputs are
dense in ``perm_`` order).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from torch_mydev_rules import layout
from torch_mydev_rules.iterator.operands import OperandSpec

__all__ = [
    "Allocation",
    "allocate_or_resize_outputs",
    "broadcast_stride_bytes",
    "compatible_stride",
    "compute_strides",
    "invert_perm",
    "permute",
    "reorder_dimensions",
]


def broadcast_stride_bytes(
    sizes: Sequence[int], strides: Sequence[int], itemsize: int, shape: Sequence[int]
) -> tuple[int, ...]:
    """Byte strides of one operand seen through the broadcast ``shape`` (``compute_strides``).

    Dimensions align at the end; missing leading dimensions, and size-1 dimensions stretched
    to a larger size, get stride 0; every other stride is ``stride * itemsize``. A size-1
    dimension that stays size 1 keeps its stride (it takes part in ordering).
    """
    ndim = len(shape)
    offset = ndim - len(sizes)
    out = [0] * ndim
    for i, (size, stride) in enumerate(zip(sizes, strides, strict=True)):
        if size == 1 and shape[offset + i] != 1:
            out[offset + i] = 0
        else:
            out[offset + i] = stride * itemsize
    return tuple(out)


def compute_strides(
    operands: Sequence[OperandSpec], will_resize: Sequence[bool], shape: Sequence[int]
) -> tuple[tuple[int, ...] | None, ...]:
    """Byte strides of every operand over ``shape`` (``compute_strides``).

    None for operands without a usable layout: undefined outputs and outputs to be resized
    (ATen leaves their ``stride_bytes`` empty until allocation).
    """
    return tuple(
        broadcast_stride_bytes(op.sizes, op.strides, op.dtype.itemsize, shape)
        if op.defined and not resize
        else None
        for op, resize in zip(operands, will_resize, strict=True)
    )


def reorder_dimensions(
    shape: Sequence[int],
    stride_bytes: Sequence[Sequence[int] | None],
    *,
    enforce_linear_iteration: bool = False,
) -> tuple[int, ...]:
    """The iteration order ``perm_``: ``perm[0]`` is the fastest-moving original dimension.

    Starts from ``n-1, ..., 1, 0`` (C order reversed) and insertion-sorts with a three-way
    ``should_swap(d0, d1)`` that asks the operands in order (outputs first; operands with
    ``None`` strides are skipped): if either stride is 0 (broadcast) ask the next operand;
    a smaller stride for ``d0`` keeps the order, a larger one swaps; equal strides swap only
    when ``shape[d0] > shape[d1]``, else ask the next operand. If no operand decides, the
    pair is ambiguous and the sort moves on past it without stopping. ndim 0 -> ``()``,
    ndim 1 -> ``(0,)``; ``enforce_linear_iteration`` keeps C order.
    """
    ndim = len(shape)
    if ndim == 0:
        return ()
    if ndim == 1:
        return (0,)
    perm = list(range(ndim - 1, -1, -1))
    if enforce_linear_iteration:
        return tuple(perm)
    usable = [s for s in stride_bytes if s is not None]

    def should_swap(dim0: int, dim1: int) -> int:
        for strides in usable:
            stride0, stride1 = strides[dim0], strides[dim1]
            if stride0 == 0 or stride1 == 0:
                continue
            if stride0 < stride1:
                return -1
            if stride0 > stride1:
                return 1
            if shape[dim0] > shape[dim1]:
                return 1
        return 0

    return layout.sort_dims(perm, should_swap)


def permute(values: Sequence[int], perm: Sequence[int]) -> tuple[int, ...]:
    """``values`` in iteration order: ``out[i] = values[perm[i]]`` (``permute_dimensions``)."""
    return tuple(values[p] for p in perm)


def invert_perm(values: Sequence[int], perm: Sequence[int]) -> tuple[int, ...]:
    """Back from iteration order to original order: ``out[perm[i]] = values[i]``."""
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = values[i]
    return tuple(out)


def compatible_stride(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """Dense byte strides for ``shape`` taken fastest-first (``compatible_stride``).

    No clamping of zero sizes: every stride after a size-0 dimension is 0.
    """
    out = []
    next_stride = itemsize
    for size in shape:
        out.append(next_stride)
        next_stride *= size
    return tuple(out)


@dataclass(frozen=True)
class Allocation:
    """What ``allocate_or_resize_outputs`` decides.

    ``output_strides``: element strides (original dimension order) of each output in operand
    order. ``stride_bytes``: every operand's byte strides in iteration order, outputs
    included, ready for coalescing.
    """

    output_strides: tuple[tuple[int, ...], ...]
    stride_bytes: tuple[tuple[int, ...], ...]


def allocate_or_resize_outputs(
    operands: Sequence[OperandSpec],
    will_resize: Sequence[bool],
    shape: Sequence[int],
    perm: Sequence[int],
    stride_bytes: Sequence[Sequence[int] | None],
) -> Allocation:
    """Give new outputs the layout the iteration order implies (``allocate_or_resize_outputs``).

    ``shape`` and ``stride_bytes`` are in iteration order (after ``permute``). An undefined or
    to-be-resized output iterates with ``compatible_stride`` (dense, fastest dimension first).
    Its tensor is plain contiguous when ``perm`` is just ``n-1, ..., 0`` (ATen then calls
    ``empty`` without strides, so sizes of 0 are clamped to 1 as contiguity requires);
    otherwise its strides are the compatible strides put back in original order, in elements.
    Existing outputs keep their strides.
    """
    ndim = len(shape)
    inverted = all(p == ndim - 1 - j for j, p in enumerate(perm))
    original_shape = invert_perm(shape, perm)
    output_strides = []
    new_stride_bytes = []
    for op, resize, strides in zip(operands, will_resize, stride_bytes, strict=True):
        if op.is_output and (resize or not op.defined):
            itemsize = op.dtype.itemsize
            strides = compatible_stride(shape, itemsize)
            if inverted:
                tensor_strides = tuple(layout.contiguous_strides(original_shape))
            else:
                tensor_strides = tuple(s // itemsize for s in invert_perm(strides, perm))
            output_strides.append(tensor_strides)
        elif op.is_output:
            output_strides.append(op.strides)
        new_stride_bytes.append(tuple(strides))
    return Allocation(tuple(output_strides), tuple(new_stride_bytes))
