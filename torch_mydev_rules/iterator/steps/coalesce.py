"""Decides which adjacent iteration dimensions merge into one, and where to split for parallelism.

Mirrors ``TensorIteratorBase::coalesce_dimensions`` and ``get_dim_to_split``
(``ATen/TensorIterator.cpp``). Both work on the iteration (fastest-first) order.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["coalesce_dimensions", "get_dim_to_split"]


def coalesce_dimensions(
    shape: Sequence[int], stride_bytes: Sequence[Sequence[int]]
) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Merge neighbouring dimensions that every operand walks as one (``coalesce_dimensions``).

    Walking fastest-first, dimension ``d`` folds into the running dimension ``p`` when either
    has size 1, or when for every operand ``shape[p] * stride[p] == stride[d]``. Folding a
    size-1 ``p`` takes ``d``'s strides. Returns the new shape and per-operand byte strides;
    ndim 0 and 1 come back unchanged.
    """
    shape = list(shape)
    strides = [list(s) for s in stride_bytes]
    ndim = len(shape)
    if ndim <= 1:
        return tuple(shape), tuple(tuple(s) for s in strides)

    def can_coalesce(dim0: int, dim1: int) -> bool:
        if shape[dim0] == 1 or shape[dim1] == 1:
            return True
        return all(shape[dim0] * s[dim0] == s[dim1] for s in strides)

    def replace_stride(dim0: int, dim1: int) -> None:
        for s in strides:
            s[dim0] = s[dim1]

    prev_dim = 0
    for dim in range(1, ndim):
        if can_coalesce(prev_dim, dim):
            if shape[prev_dim] == 1:
                replace_stride(prev_dim, dim)
            shape[prev_dim] *= shape[dim]
        else:
            prev_dim += 1
            if prev_dim != dim:
                replace_stride(prev_dim, dim)
                shape[prev_dim] = shape[dim]
    new_ndim = prev_dim + 1
    return tuple(shape[:new_ndim]), tuple(tuple(s[:new_ndim]) for s in strides)


def get_dim_to_split(shape: Sequence[int], stride_bytes: Sequence[Sequence[int]]) -> int:
    """The dimension whose split halves the largest byte extent (``get_dim_to_split``).

    Scans from the slowest dimension down, skipping size-0 ones, and keeps the first
    dimension reaching the largest ``(size - 1) * |stride|`` over all operands.
    """
    if len(shape) < 1:
        raise ValueError("get_dim_to_split needs at least one dimension")
    max_extent = -1
    dim_to_split = -1
    for dim in range(len(shape) - 1, -1, -1):
        size = shape[dim]
        if size == 0:
            continue
        for strides in stride_bytes:
            extent = (size - 1) * abs(strides[dim])
            if extent > max_extent:
                max_extent = extent
                dim_to_split = dim
    if max_extent < 0:
        raise ValueError("every dimension has size 0")
    return dim_to_split
