"""Decides output strides the way DIPU's OpInferrer does, kept beside ours for comparison.

DIPU (``dipu/torch_dipu/csrc_dipu/aten/ops/DIPUOpInferrer.cpp``) allocates an elementwise
op's output without building a TensorIterator: ``compute_effective_strides`` (element strides
after broadcasting, 0 on broadcast dimensions), ``compute_perm`` (the same insertion sort as
``reorder_dimensions``, over inputs only) and ``compute_memory_format`` (dense strides in perm
order). The perm rule gives exactly what TensorIterator's ``allocate_or_resize_outputs``
gives, except that DIPU never clamps a size-0 dimension when the perm is plain C order.

The one deliberate departure: DIPU's fast path (``fast_compute_memory_format``) answers
inputs that are non-overlapping-and-dense with equal strides -- but neither contiguous nor
channels_last -- with ``suggest_memory_format`` of the first input, where torch's
NON_OVERLAPPING_DENSE fast set-up copies the input strides. For ``a = torch.randn(3, 4).t()``
torch gives ``(a + a).stride() == (1, 4)``; DIPU's rule gives ``(3, 1)``. torch is the truth
for this project, so ``torch_mydev_rules.iterator.build`` follows torch; ``dipu_output_strides``
keeps DIPU's answer available and the tests pin where the two differ.

Two smaller differences change strides of size-1 or size-0 dimensions only, never the
memory order: DIPU's ``compute_shape`` lets a zero-dim first input count as "same shape"
(so ``scalar + t`` may take the fast path, where TensorIterator permutes), and for the C-order
perm with a size-0 dimension ATen allocates clamped contiguous strides, DIPU does not clamp.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch_mydev_rules import layout
from torch_mydev_rules.iterator.steps.shape import infer_size
from torch_mydev_rules.iterator.steps.strides import reorder_dimensions

__all__ = [
    "compute_effective_strides",
    "compute_memory_format",
    "compute_perm",
    "dipu_output_strides",
    "fast_compute_memory_format",
]

Layout = tuple[Sequence[int], Sequence[int]]


def compute_effective_strides(
    shape: Sequence[int], inputs: Sequence[Layout]
) -> tuple[tuple[int, ...], ...]:
    """Element strides of each ``(sizes, strides)`` input over ``shape`` (DIPU's rule).

    Aligned at the end; leading dimensions and stretched size-1 dimensions get 0.
    """
    out = []
    for sizes, strides in inputs:
        offset = len(shape) - len(sizes)
        effective = [0] * len(shape)
        for j, (size, stride) in enumerate(zip(sizes, strides, strict=True)):
            if not (size == 1 and shape[offset + j] != 1):
                effective[offset + j] = stride
        out.append(tuple(effective))
    return tuple(out)


def compute_perm(
    shape: Sequence[int], effective_strides: Sequence[Sequence[int]]
) -> tuple[int, ...]:
    """Fastest-first dimension order from the inputs' strides (DIPU ``compute_perm``).

    The same three-way insertion sort as TensorIterator's ``reorder_dimensions``; the only
    difference is that DIPU sorts over the inputs alone, which for a functional op (whose
    output does not exist yet) is what TensorIterator does too.
    """
    return reorder_dimensions(shape, effective_strides)


def compute_memory_format(shape: Sequence[int], perm: Sequence[int]) -> tuple[int, ...]:
    """Output strides dense in ``perm`` order (DIPU ``compute_memory_format``, slow path).

    Walk the dimensions fastest-first, giving each the product of the sizes before it, then
    put them back in original order: ascending strides along ``perm``.
    """
    strides = [0] * len(shape)
    next_stride = 1
    for dim in perm:
        strides[dim] = next_stride
        next_stride *= shape[dim]
    return tuple(strides)


def fast_compute_memory_format(
    inputs: Sequence[Layout], all_same_shape: bool
) -> layout.MemoryFormat | None:
    """DIPU's shortcut: a memory format for same-shaped dense inputs, or None to take the perm.

    All contiguous -> CONTIGUOUS; all channels_last -> CHANNELS_LAST; all
    non-overlapping-and-dense with equal strides -> ``suggest_memory_format`` of the first
    input (this is where DIPU departs from torch, which keeps the strides themselves).
    """
    if not all_same_shape:
        return None
    if all(layout.is_contiguous(s, st) for s, st in inputs):
        return layout.MemoryFormat.CONTIGUOUS
    if all(layout.is_channels_last_contiguous(s, st) for s, st in inputs):
        return layout.MemoryFormat.CHANNELS_LAST
    dense = all(layout.is_non_overlapping_and_dense(s, st) for s, st in inputs)
    if dense and all(tuple(st) == tuple(inputs[0][1]) for _, st in inputs):
        return layout.suggest_memory_format(*inputs[0])
    return None


def dipu_output_strides(inputs: Sequence[Layout]) -> tuple[int, ...]:
    """The strides DIPU's ``BinaryOpInferrer`` / ``UnaryOpInferrer`` give a new output.

    ``compute_shape`` (broadcast, noting whether all inputs share one shape), then
    ``compute_memory_format``: the fast path's memory format if it answers, else dense
    strides in ``compute_perm`` order.
    """
    shape: tuple[int, ...] = ()
    all_same_shape = True
    for sizes, _ in inputs:
        sizes = tuple(sizes)
        if not shape:
            # DIPU's shape_.empty(): the first input, or one after zero-dim ones, sets it.
            shape = sizes
        elif sizes != shape:
            all_same_shape = False
            shape = infer_size(shape, sizes)
    fmt = fast_compute_memory_format(inputs, all_same_shape)
    if fmt is not None:
        return tuple(layout.strides_for_memory_format(shape, fmt))
    perm = compute_perm(shape, compute_effective_strides(shape, inputs))
    return compute_memory_format(shape, perm)
