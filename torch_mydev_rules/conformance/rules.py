"""Decides what our rules predict for a mission op, and at which step a result departs.

A ``Prediction`` holds the properties the rules decide (sizes, strides, dtype, and for the
layout ops whether ``self`` comes back) and, for each, the step that decided it, named as
``explain()`` names its rows (``compute_shape``, ``compute_types``, ``fast_set_up``,
``allocate_or_resize_outputs``, ``empty_like``, ...) or as the reduction rules name theirs.

``departs_at(prediction, result)`` walks those steps in ``explain()``'s order and names the
first whose decision the result contradicts. On TensorIterator's slow path, strides that
do not even order the dims as ``reorder_dimensions``' permutation does (fastest first)
depart there; strides in that order but of other values depart at
``allocate_or_resize_outputs``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from torch_mydev_rules import layout
from torch_mydev_rules.iterator import Report, explain, reduction

__all__ = [
    "Prediction",
    "departs_at",
    "from_explain",
    "predict_empty_strided",
    "predict_flags",
    "predict_reduction",
    "predict_to",
]


@dataclass(frozen=True)
class Prediction:
    """The rules' answer for one call: ``fields`` (property -> value, as ``compare.snapshot``
    writes them), ``decided`` (property -> the step that decided it), ``steps`` (every step,
    in order, with what it decided) and ``perm`` (TensorIterator's fastest-first order on
    the slow path, else None)."""

    fields: dict[str, Any]
    decided: dict[str, str]
    steps: tuple[tuple[str, str], ...]
    perm: tuple[int, ...] | None = None
    notes: dict[str, Any] = field(default_factory=dict)


def _dtype(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")


def _strides_step(report: Report, given_output: bool) -> str:
    """The step of ``report`` that decided its output's strides."""
    names = [name for name, _ in report.steps]
    if "empty_like" in names:
        return "empty_like"
    if report.plan is None:
        return names[0]  # contiguous returning self, copy_'s same-tensor exit
    plan = report.plan
    if given_output and not plan.will_resize[0]:
        return "mark_resize_outputs"  # a given output keeps its layout
    if plan.fast_setup != "NONE":
        return "fast_set_up"
    return "allocate_or_resize_outputs"


def from_explain(op: Callable[..., Any] | str, *args: Any, **kwargs: Any) -> Prediction:
    """What ``explain(op, *args, **kwargs)`` (the TensorIterator build, the memory-format
    rules of ``empty_like`` / ``clone`` / ``contiguous``) predicts for the first output."""
    report = explain(op, *args, **kwargs)
    given_output = "out" in kwargs or report.op.endswith("_")  # out=, in-place, copy_
    names = [name for name, _ in report.steps]
    first = names[0]
    plan = report.plan
    decided = {
        "sizes": "compute_shape" if plan is not None and "empty_like" not in names else first,
        "strides": _strides_step(report, given_output),
        "dtype": "compute_types" if plan is not None and "empty_like" not in names else first,
    }
    fields: dict[str, Any] = {
        "sizes": tuple(report.shape),
        "strides": tuple(report.output_strides),
        "dtype": _dtype(report.dtype),
    }
    if op in ("contiguous", "clone", "empty_like"):
        fields["aliases"] = "arg 0" if report.plan is None and op == "contiguous" else None
        decided["aliases"] = first
    perm = plan.perm if plan is not None and plan.fast_setup == "NONE" else None
    return Prediction(fields, decided, tuple(report.steps), perm)


def predict_to(t: torch.Tensor, dtype: torch.dtype | None, fmt: torch.memory_format) -> Prediction:
    """``Tensor.to(dtype, memory_format=fmt)`` on its own device (``to_impl`` /
    ``_to_copy``): ``self`` back when nothing changes (``to_will_alias``: the same dtype,
    and ``preserve_format`` or ``suggest_memory_format() == fmt``, so a transposed tensor
    asked for ``contiguous_format`` comes back as it is), else ``empty_like(self, fmt)``'s
    strides filled by ``copy_``."""
    sizes, strides = tuple(t.shape), tuple(t.stride())
    new_dtype = t.dtype if dtype is None else dtype
    mem = layout.MemoryFormat.from_torch(fmt)
    same = new_dtype == t.dtype and (
        mem is layout.MemoryFormat.PRESERVE or layout.suggest_memory_format(sizes, strides) is mem
    )
    if same:
        step = ("to_will_alias", "same dtype, and preserve_format or the format it suggests")
        fields = {"sizes": sizes, "strides": strides, "dtype": _dtype(t.dtype), "aliases": "arg 0"}
        return Prediction(fields, dict.fromkeys(fields, step[0]), (step,))
    if mem is layout.MemoryFormat.PRESERVE:
        new = tuple(layout.preserve_format_strides(sizes, strides))
    else:
        new = tuple(layout.strides_for_memory_format(sizes, mem))
    steps = (
        ("to_will_alias", "a new tensor"),
        ("empty_like", f"{mem.value} -> {new}"),
        ("copy_", f"cast to {_dtype(new_dtype)}"),
    )
    fields = {"sizes": sizes, "strides": new, "dtype": _dtype(new_dtype), "aliases": None}
    decided = {"aliases": "to_will_alias", "sizes": "empty_like", "strides": "empty_like"}
    decided["dtype"] = "copy_"
    return Prediction(fields, decided, steps)


_FLAG_STEPS = (
    ("is_contiguous", "compute_contiguous", layout.MemoryFormat.CONTIGUOUS),
    (
        "is_contiguous(channels_last)",
        "compute_channels_last_contiguous_2d",
        layout.MemoryFormat.CHANNELS_LAST,
    ),
    (
        "is_contiguous(channels_last_3d)",
        "compute_channels_last_contiguous_3d",
        layout.MemoryFormat.CHANNELS_LAST_3D,
    ),
)


def predict_flags(t: torch.Tensor) -> Prediction:
    """The contiguity flags c10 keeps for ``t``'s sizes and strides
    (``TensorImpl::refresh_contiguous``): ``layout.is_contiguous_for`` for each memory
    format (``compute_contiguous``, ``compute_channels_last_contiguous_2d`` / ``_3d``) and
    ``layout.is_non_overlapping_and_dense`` (``compute_non_overlapping_and_dense``)."""
    sizes, strides = tuple(t.shape), tuple(t.stride())
    fields: dict[str, Any] = {}
    decided: dict[str, str] = {}
    steps = []
    for name, step, fmt in _FLAG_STEPS:
        fields[name] = layout.is_contiguous_for(sizes, strides, fmt)
        decided[name] = step
        steps.append((step, str(fields[name])))
    dense = layout.is_non_overlapping_and_dense(sizes, strides)
    fields["is_non_overlapping_and_dense"] = dense
    decided["is_non_overlapping_and_dense"] = "compute_non_overlapping_and_dense"
    steps.append(("compute_non_overlapping_and_dense", str(dense)))
    return Prediction(fields, decided, tuple(steps))


def predict_empty_strided(
    sizes: Sequence[int], strides: Sequence[int], dtype: torch.dtype
) -> Prediction:
    """``empty_strided`` (``empty_strided_generic``): exactly the sizes and strides asked
    for, offset 0, over ``computeStorageNbytes`` bytes (checked by ``layout``)."""
    layout.compute_storage_nbytes(sizes, strides, dtype.itemsize)
    step = ("empty_strided", "the sizes and strides asked for, storage offset 0")
    fields = {
        "sizes": tuple(sizes),
        "strides": tuple(strides),
        "dtype": _dtype(dtype),
        "storage_offset": 0,
    }
    return Prediction(fields, dict.fromkeys(fields, step[0]), (step,))


def predict_reduction(
    name: str,
    t: torch.Tensor,
    dims: int | Sequence[int] | None,
    keepdim: bool,
    dtype: torch.dtype | None,
) -> Prediction:
    """``sum`` / ``mean`` / ``amax`` / ``amin`` of ``t`` (``torch_mydev_rules.iterator.
    reduction``): the reduced dims (``make_dim_mask``), the result's shape
    (``shape_from_dim_mask``), its dtype (the meta functions' ``infer_dtype_from_optional``),
    and contiguous strides (``resize_reduction`` allocates a new result without strides)."""
    if name == "sum":
        result_dtype, dtype_step = reduction.sum_dtype(t.dtype, dtype, None), "sum_dtype"
    elif name == "mean":
        result_dtype, dtype_step = reduction.mean_dtype(t.dtype, dtype, None), "mean_dtype"
    else:
        reduction.amax_checks(name, tuple(t.shape), dims)
        result_dtype, dtype_step = t.dtype, "amax_checks"
    mask = reduction.dim_mask(dims, t.dim())
    sizes = reduction.reduction_shape(tuple(t.shape), mask, keepdim)
    strides = layout.contiguous_strides(sizes)
    steps = (
        ("dim_mask", f"reduce dims {[d for d, m in enumerate(mask) if m]}"),
        ("reduction_shape", f"{list(sizes)} (keepdim={keepdim})"),
        (dtype_step, _dtype(result_dtype)),
        ("resize_reduction", f"a new contiguous result {strides}"),
    )
    fields = {"sizes": sizes, "strides": strides, "dtype": _dtype(result_dtype)}
    decided = {"sizes": "reduction_shape", "dtype": dtype_step, "strides": "resize_reduction"}
    return Prediction(fields, decided, steps)


def _orders_like(strides: Sequence[int], sizes: Sequence[int], perm: Sequence[int]) -> bool:
    """Whether ``strides`` do not decrease along ``perm`` (fastest first), over the dims of
    size above 1: the order ``reorder_dimensions`` chose."""
    walked = [strides[d] for d in perm if sizes[d] > 1]
    return all(a <= b for a, b in itertools.pairwise(walked))


def departs_at(prediction: Prediction, result: dict[str, Any]) -> str | None:
    """The first step, in the rules' order, whose decision ``result`` (a
    ``compare.snapshot``) contradicts; None when it agrees with every decided property."""
    wrong = {
        name
        for name, value in prediction.fields.items()
        if name in result and result[name] != value
    }
    if not wrong:
        return None
    for step, _ in prediction.steps:
        if any(prediction.decided.get(name) == step for name in wrong):
            if (
                step == "allocate_or_resize_outputs"
                and prediction.perm is not None
                and not _orders_like(result["strides"], result["sizes"], prediction.perm)
            ):
                return "reorder_dimensions"
            return step
    return next(iter(sorted(wrong)))
