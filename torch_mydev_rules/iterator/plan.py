"""Decides everything about one elementwise iteration: ``build`` runs TensorIterator's steps.

``build(operands, config)`` is ``TensorIteratorBase::build`` (``ATen/TensorIterator.cpp``)
over plain tuples: it reads top to bottom as the list of named steps, each a call into the
module that owns that decision, and records what each step decided so ``explain`` can print
it. The result is a frozen ``Plan``: the output layouts to allocate and the coalesced,
fastest-first shape and byte strides a kernel walks.

What a step decided is recorded as the ``describe`` call that prints it, made only when
``Plan.steps`` is read (by ``explain``): a kernel's plan pays nothing for its text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property, partial

import torch

from torch_mydev_rules.iterator import describe
from torch_mydev_rules.iterator.operands import IteratorConfig, OperandSpec
from torch_mydev_rules.iterator.steps.coalesce import coalesce_dimensions
from torch_mydev_rules.iterator.steps.compute_types import compute_types
from torch_mydev_rules.iterator.steps.fast_setup import (
    FastSetupType,
    compute_fast_setup_type,
    fast_set_up,
)
from torch_mydev_rules.iterator.steps.shape import (
    check_mem_overlaps,
    compute_shape,
    mark_resize_outputs,
)
from torch_mydev_rules.iterator.steps.strides import (
    allocate_or_resize_outputs,
    broadcast_stride_bytes,
    compute_strides,
    invert_perm,
    permute,
    reorder_dimensions,
)

__all__ = ["Plan", "build"]


@dataclass(frozen=True)
class Plan:
    """The decisions of one TensorIterator build, per operand in operand order.

    What the caller gets, original dimension order: ``shape`` (the broadcast shape),
    ``output_strides`` / ``output_dtypes`` (each output as the caller sees it afterwards:
    allocated, resized, or kept as given).
    What the kernel iterates: ``dtypes`` and ``operand_strides`` (element strides, original
    order) of every operand as the iterator uses it -- outputs as allocated, and on CPU the
    cast temporaries flagged in ``temporaries`` (a kernel must read a converted copy of such
    an input, or write a temporary and copy it into such an output); ``stride_bytes`` (byte
    strides over ``shape``, 0 on broadcast dimensions).
    Iteration order (fastest first): ``perm`` (TensorIterator's ``perm_``; empty when the
    fast set-up made it unnecessary), ``reordered_shape`` / ``reordered_stride_bytes`` (after
    ``reorder_dimensions`` and output allocation), ``coalesced_shape`` /
    ``coalesced_stride_bytes`` (after ``coalesce_dimensions``: what a kernel walks). On the
    fast path both iteration views are the flat ``(numel,)`` with one element size each.
    ``steps`` gives ``(step name, what it decided)`` in build order, its texts made from
    ``recorded_steps`` when first read; plans compare equal by their decisions alone.
    """

    shape: tuple[int, ...]
    num_outputs: int
    output_strides: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[torch.dtype, ...]
    common_dtype: torch.dtype | None
    dtypes: tuple[torch.dtype, ...]
    operand_strides: tuple[tuple[int, ...], ...]
    will_resize: tuple[bool, ...]
    temporaries: tuple[bool, ...]
    fast_setup: str
    perm: tuple[int, ...]
    stride_bytes: tuple[tuple[int, ...], ...]
    reordered_shape: tuple[int, ...]
    reordered_stride_bytes: tuple[tuple[int, ...], ...]
    coalesced_shape: tuple[int, ...]
    coalesced_stride_bytes: tuple[tuple[int, ...], ...]
    recorded_steps: tuple[tuple[str, str | Callable[[], str]], ...] = field(
        repr=False, compare=False
    )

    @cached_property
    def steps(self) -> tuple[tuple[str, str], ...]:
        """``(step name, what it decided)`` for every build step, in order."""
        return tuple(
            (name, text if isinstance(text, str) else text()) for name, text in self.recorded_steps
        )

    @property
    def numel(self) -> int:
        """Number of elements iterated."""
        n = 1
        for size in self.shape:
            n *= size
        return n


def _check_operands(operands: Sequence[OperandSpec]) -> int:
    """Outputs come first (``add_output`` before ``add_input``); returns how many there are."""
    num_outputs = 0
    for i, op in enumerate(operands):
        if op.is_output:
            if num_outputs != i:
                raise ValueError("outputs have to be added before any input")
            num_outputs += 1
    if len(operands) == num_outputs:
        raise ValueError("the iterator needs at least one input")
    return num_outputs


def build(operands: Sequence[OperandSpec], config: IteratorConfig, *, cpu: bool = True) -> Plan:
    """Run TensorIterator's build steps over ``operands`` (outputs first) under ``config``.

    ``cpu=True`` models CPU's ``compute_types``, which replaces inputs of another dtype by
    ``.to(common_dtype)`` temporaries before any layout decision; ``cpu=False`` models
    devices that read the original inputs (CUDA, and DIPU-style backends).
    """
    given = tuple(operands)
    steps: list[tuple[str, str | Callable[[], str]]] = []
    num_outputs = _check_operands(given)  # populate_operands / mark_outputs: outputs first
    steps.append(("operands", partial(describe.operands, given)))
    check_mem_overlaps(given, config)  # outputs may not write one location twice
    info = compute_shape(given, config)  # broadcast shape of the operands that take part
    steps.append(("compute_shape", partial(describe.shape, info)))
    will_resize = mark_resize_outputs(given, info.shape, config)  # which outputs get a new shape
    steps.append(("mark_resize_outputs", partial(describe.resize, given, will_resize)))
    types = compute_types(given, config, all_ops_are_scalars=info.all_ops_are_scalars, cpu=cpu)
    steps.append(("compute_types", partial(describe.types, types)))  # common dtype, temporaries
    ops = types.operands
    setup = compute_fast_setup_type(ops, will_resize, info.all_ops_same_shape, config)
    steps.append(("compute_fast_setup_type", partial(describe.setup_type, setup, info)))

    if setup is not FastSetupType.NONE:
        fast = fast_set_up(ops, will_resize, info.shape, setup)  # allocate, flatten to 1-D
        steps.append(("fast_set_up", partial(describe.fast, ops, fast)))
        steps += [(name, f"skipped: fast set-up {setup.value}") for name in _SLOW_STEPS]
        final = _laid_out(ops, fast.output_strides, info.shape)
        perm: tuple[int, ...] = ()
        stride_bytes = tuple(
            broadcast_stride_bytes(op.sizes, op.strides, op.dtype.itemsize, info.shape)
            for op in final
        )
        reordered = coalesced = (fast.shape, fast.stride_bytes)
    else:
        steps.append(("fast_set_up", "skipped: no fast set-up"))
        strides = compute_strides(ops, will_resize, info.shape)  # bytes, 0 where broadcast
        steps.append(("compute_strides", partial(describe.stride_bytes, ops, strides)))
        perm = reorder_dimensions(  # fastest-first order recovered from the strides
            info.shape, strides, enforce_linear_iteration=config.enforce_linear_iteration
        )
        shape = permute(info.shape, perm)  # permute_dimensions
        strides = tuple(None if s is None else permute(s, perm) for s in strides)
        steps.append(("reorder_dimensions", partial(describe.reorder, perm, shape)))
        alloc = allocate_or_resize_outputs(ops, will_resize, shape, perm, strides)
        steps.append(
            ("allocate_or_resize_outputs", partial(describe.allocation, ops, will_resize, alloc))
        )
        coalesced = coalesce_dimensions(shape, alloc.stride_bytes)  # merge walkable neighbours
        steps.append(("coalesce_dimensions", partial(describe.coalesced, ops, *coalesced)))
        final = _laid_out(ops, alloc.output_strides, info.shape)
        stride_bytes = tuple(invert_perm(s, perm) for s in alloc.stride_bytes)
        reordered = (shape, alloc.stride_bytes)

    # What the caller sees: a given output keeps its dtype, and its strides unless resized,
    # even where CPU iterated a cast temporary in its place.
    kept = [op.defined and not resize for op, resize in zip(given, will_resize, strict=True)]
    return Plan(
        shape=info.shape,
        num_outputs=num_outputs,
        output_strides=tuple(
            given[i].strides if kept[i] else final[i].strides for i in range(num_outputs)
        ),
        output_dtypes=tuple(
            given[i].dtype if given[i].defined else final[i].dtype for i in range(num_outputs)
        ),
        common_dtype=types.common_dtype,
        dtypes=tuple(op.dtype for op in final),
        operand_strides=tuple(op.strides for op in final),
        will_resize=will_resize,
        temporaries=types.temporaries,
        fast_setup=setup.value,
        perm=perm,
        stride_bytes=stride_bytes,
        reordered_shape=reordered[0],
        reordered_stride_bytes=reordered[1],
        coalesced_shape=coalesced[0],
        coalesced_stride_bytes=coalesced[1],
        recorded_steps=tuple(steps),
    )


_SLOW_STEPS = (
    "compute_strides",
    "reorder_dimensions",
    "allocate_or_resize_outputs",
    "coalesce_dimensions",
)


def _laid_out(
    operands: Sequence[OperandSpec],
    output_strides: Sequence[tuple[int, ...]],
    shape: tuple[int, ...],
) -> tuple[OperandSpec, ...]:
    """The operands as they stand after allocation: every output has ``shape`` and a layout."""
    out = list(operands)
    for i, strides in enumerate(output_strides):
        out[i] = replace(out[i], sizes=shape, strides=strides)
    return tuple(out)
