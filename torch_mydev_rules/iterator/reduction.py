"""Decides the layout of a reduction: reduced dims, result shape and dtype, the walk.

Mirrors ATen's reduction set-up over plain tuples:

- ``dim_mask`` is ``make_dim_mask`` / ``dim_list_to_bitset`` (``ReduceOpsUtils.h``,
  ``WrapDimUtilsMulti.h``): ``dim=None`` and ``dim=[]`` reduce every dim, negative dims wrap,
  a dim out of range raises ``IndexError``, a repeated one ``RuntimeError``;
- ``reduction_shape`` is ``shape_from_dim_mask`` (``keepdim`` leaves size 1, else the dim goes);
- ``sum_dtype`` / ``mean_dtype`` are ``infer_dtype_from_optional`` and the checks of the
  ``sum.dim_IntList`` / ``mean.dim`` / ``amax`` meta functions (``ReduceOps.cpp``);
- ``viewed_strides`` is ``review_reduce_result``: the result seen over the input's shape,
  stride 0 along every reduced dim;
- ``build_reduction`` is ``TensorIterator::reduce_op`` -> ``build`` with ``is_reduction``: byte
  strides (``compute_strides``), ``reorder_dimensions`` whose ``should_swap`` first moves the
  dims where the output's stride is 0 (the reduced ones) to the front, then
  ``coalesce_dimensions``. No fast set-up (``compute_fast_setup_type`` returns NONE for
  reductions) and no output allocation: the result exists before the iterator is built.

A new result is contiguous (the meta functions call ``set_output_raw_strided`` without
strides): a channels_last input reduced with ``keepdim=True`` gives a contiguous result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from torch_mydev_rules import layout
from torch_mydev_rules.iterator.promotion import dtype_name
from torch_mydev_rules.iterator.steps.coalesce import coalesce_dimensions
from torch_mydev_rules.iterator.steps.strides import broadcast_stride_bytes, permute

__all__ = [
    "ReductionPlan",
    "amax_checks",
    "build_reduction",
    "check_mean_result",
    "dim_mask",
    "mean_dtype",
    "reduced_count",
    "reduction_shape",
    "scalar_type_name",
    "sum_dtype",
    "uses_acc_buffer",
    "viewed_strides",
    "wrap_dim",
]


def wrap_dim(dim: int, ndim: int) -> int:
    """``maybe_wrap_dim``: a dim in ``[-ndim, ndim)`` made non-negative (a 0-dim tensor
    counts as 1-dim); ``IndexError`` otherwise, with ATen's message."""
    rank = max(ndim, 1)
    if not -rank <= dim < rank:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], "
            f"but got {dim})"
        )
    return dim + rank if dim < 0 else dim


def _dims(dims: int | Sequence[int] | None) -> tuple[int, ...] | None:
    if dims is None:
        return None
    if isinstance(dims, int):
        return (dims,)
    return tuple(int(d) for d in dims)


def dim_mask(dims: int | Sequence[int] | None, ndim: int) -> tuple[bool, ...]:
    """Which of the ``ndim`` dims are reduced (``make_dim_mask`` + ``dim_list_to_bitset``).

    ``None`` or an empty list: all of them. Every dim is wrapped first (``maybe_wrap_dims`` in
    ``resize_reduction``), so an out-of-range dim raises ``IndexError`` before a repeated one
    raises ``RuntimeError`` ("dim N appears multiple times in the list of dims").
    """
    given = _dims(dims)
    if not given:
        return (True,) * ndim
    wrapped = [wrap_dim(d, ndim) for d in given]
    seen: set[int] = set()
    for d in wrapped:
        if d in seen:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        seen.add(d)
    return tuple(d in seen for d in range(ndim))


def reduction_shape(sizes: Sequence[int], mask: Sequence[bool], keepdim: bool) -> tuple[int, ...]:
    """``shape_from_dim_mask``: reduced dims become 1 (``keepdim``) or disappear."""
    if keepdim:
        return tuple(1 if m else s for s, m in zip(sizes, mask, strict=True))
    return tuple(s for s, m in zip(sizes, mask, strict=True) if not m)


def reduced_count(sizes: Sequence[int], mask: Sequence[bool]) -> int:
    """How many input elements each result element reduces (``mean``'s ``dim_prod``)."""
    n = 1
    for s, m in zip(sizes, mask, strict=True):
        if m:
            n *= s
    return n


def sum_dtype(
    self_dtype: torch.dtype, dtype: torch.dtype | None, out_dtype: torch.dtype | None
) -> torch.dtype:
    """``infer_dtype_from_optional`` (``sum.dim_IntList``'s meta): ``dtype=`` first, then the
    ``out=`` tensor's dtype, then the input's, bool and integers promoted to int64."""
    if dtype is not None:
        return dtype
    if out_dtype is not None:
        return out_dtype
    if self_dtype == torch.bool or not (self_dtype.is_floating_point or self_dtype.is_complex):
        return torch.int64
    return self_dtype


def mean_dtype(
    self_dtype: torch.dtype, dtype: torch.dtype | None, out_dtype: torch.dtype | None
) -> torch.dtype:
    """``mean.dim``'s meta: ``get_dtype_from_self(self, dtype, promote_integers=True)`` must be
    floating or complex (``RuntimeError`` otherwise, as CPU raises), then ``sum_dtype``."""
    in_dtype = sum_dtype(self_dtype, dtype, None)
    if not (in_dtype.is_floating_point or in_dtype.is_complex):
        what, name = ("Optional", dtype) if dtype is not None else ("Input", self_dtype)
        raise RuntimeError(
            "mean(): could not infer output dtype. "
            f"{what} dtype must be either a floating point or complex dtype. "
            f"Got: {scalar_type_name(name)}"
        )
    return sum_dtype(self_dtype, dtype, out_dtype)


def check_mean_result(dtype: torch.dtype) -> None:
    """A mean's ``out=`` must hold a float: CPU sums into an integral one, then its
    ``div_`` (true division) raises this ``RuntimeError`` (after the dims were checked)."""
    if not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(
            f"result type Float can't be cast to the desired output type {scalar_type_name(dtype)}"
        )


def scalar_type_name(dtype: torch.dtype) -> str:
    """The name ATen's messages give a dtype (``toString(ScalarType)``: ``Float``, ``Long``,
    ``ComplexFloat``, ``UInt16``): ``promotion.dtype_name``, c10's whole table."""
    return dtype_name(dtype)


def amax_checks(name: str, sizes: Sequence[int], dims: int | Sequence[int] | None) -> None:
    """``zero_numel_check_dims`` of ``amax`` / ``amin`` on an empty input: the dims must be
    named (``RuntimeError``) and each must have a non-zero size (``IndexError``)."""
    if layout.numel(sizes) != 0:
        return
    given = _dims(dims)
    if not given:
        raise RuntimeError(
            f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
            "Specify the reduction dim with the 'dim' argument."
        )
    ndim = len(sizes)
    for d in given:
        if ndim == 0:
            if d not in (0, -1):
                raise IndexError(f"{name}(): Expected reduction dim -1 or 0 for scalar but got {d}")
        elif sizes[wrap_dim(d, ndim)] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def viewed_strides(
    out_strides: Sequence[int], mask: Sequence[bool], keepdim: bool
) -> tuple[int, ...]:
    """``review_reduce_result``: the result's strides over the input's rank, a 0 inserted at
    every reduced dim unless ``keepdim`` kept it (its size-1 stride is broadcast away later)."""
    if keepdim:
        return tuple(out_strides)
    it = iter(out_strides)
    return tuple(0 if m else next(it) for m in mask)


@dataclass(frozen=True)
class ReductionPlan:
    """One reduction's walk, fastest dim first.

    ``perm``: ``reorder_dimensions``' order (reduced dims first); ``shape`` and
    ``stride_bytes`` (output first, then input): after ``coalesce_dimensions``. A dim of the
    walk is reduced where the output's byte stride is 0 and its size is above 1.
    """

    perm: tuple[int, ...]
    shape: tuple[int, ...]
    stride_bytes: tuple[tuple[int, ...], tuple[int, ...]]

    @property
    def reduced(self) -> tuple[bool, ...]:
        """Per dim of the walk: is it reduced (``is_dim_reduced``)."""
        out = self.stride_bytes[0]
        return tuple(s == 0 and n > 1 for n, s in zip(self.shape, out, strict=True))


def _reorder(shape: Sequence[int], strides: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """``reorder_dimensions`` with ``is_reduction``: operand 0 is the output."""
    ndim = len(shape)
    if ndim == 0:
        return ()
    if ndim == 1:
        return (0,)

    def should_swap(dim0: int, dim1: int) -> int:
        for arg, s in enumerate(strides):
            stride0, stride1 = s[dim0], s[dim1]
            if arg == 0 and (stride0 == 0) != (stride1 == 0):
                return 1 if stride1 == 0 else -1
            if stride0 == 0 or stride1 == 0:
                continue
            if stride0 < stride1:
                return -1
            if stride0 > stride1:
                return 1
            if shape[dim0] > shape[dim1]:
                return 1
        return 0

    return layout.sort_dims(range(ndim - 1, -1, -1), should_swap)


def build_reduction(
    in_sizes: Sequence[int],
    in_strides: Sequence[int],
    in_itemsize: int,
    viewed_out_sizes: Sequence[int],
    viewed_out_strides: Sequence[int],
    out_itemsize: int,
) -> ReductionPlan:
    """``TensorIterator::reduce_op(viewed_result, self)``: the coalesced walk of a reduction.

    ``viewed_out_*`` is the result as ``review_reduce_result`` leaves it: the input's rank,
    size 1 on reduced dims. The iteration shape is the input's.
    """
    shape = tuple(in_sizes)
    strides = (
        broadcast_stride_bytes(viewed_out_sizes, viewed_out_strides, out_itemsize, shape),
        broadcast_stride_bytes(in_sizes, in_strides, in_itemsize, shape),
    )
    perm = _reorder(shape, strides)
    walked = permute(shape, perm)
    coalesced_shape, coalesced_strides = coalesce_dimensions(
        walked, tuple(permute(s, perm) for s in strides)
    )
    return ReductionPlan(perm, coalesced_shape, (coalesced_strides[0], coalesced_strides[1]))


def uses_acc_buffer(plan: ReductionPlan, dtype: torch.dtype) -> bool:
    """``should_use_acc_buffer`` (``ReduceOps.cpp``): a float16/bfloat16 CPU sum whose walk
    reduces both of its first two dims (the 2-D loop would round every partial sum to the
    result's dtype) sums ``self.to(float32)`` into a float32 buffer and copies it back."""
    if dtype not in (torch.float16, torch.bfloat16) or len(plan.shape) < 2:
        return False
    return plan.stride_bytes[0][0] == 0 and plan.stride_bytes[0][1] == 0
