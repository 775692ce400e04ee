"""Decides nothing: turns each build step's result into the one-line text ``explain`` prints.

Conventions: shapes and byte strides print as lists ``[2, 3]``, element strides as tuples
``(3, 1)`` (as ``Tensor.stride()`` prints them); outputs are ``out0, out1, ...`` and inputs
``in0, in1, ...`` in the order they were given.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from torch_mydev_rules.iterator.operands import OperandSpec
from torch_mydev_rules.iterator.steps.compute_types import TypeInfo
from torch_mydev_rules.iterator.steps.fast_setup import FastSetup, FastSetupType
from torch_mydev_rules.iterator.steps.shape import ShapeInfo
from torch_mydev_rules.iterator.steps.strides import Allocation

__all__ = [
    "allocation",
    "coalesced",
    "dtype",
    "fast",
    "labels",
    "operands",
    "reorder",
    "resize",
    "setup_type",
    "shape",
    "stride_bytes",
    "strides",
    "types",
]


def dtype(value: torch.dtype | None) -> str:
    """``float32`` for ``torch.float32``; ``?`` while still unknown."""
    return "?" if value is None else str(value).removeprefix("torch.")


def sizes(values: Sequence[int]) -> str:
    """A shape or byte-stride list: ``[2, 3]``."""
    return "[" + ", ".join(str(v) for v in values) + "]"


def strides(values: Sequence[int]) -> str:
    """Element strides as torch prints them: ``(3, 1)``, ``(1,)``, ``()``."""
    values = tuple(values)
    return "(" + str(values[0]) + ",)" if len(values) == 1 else str(values)


def labels(ops: Sequence[OperandSpec]) -> list[str]:
    """``out0, out1, ..., in0, in1, ...`` in operand order."""
    out, inp, names = 0, 0, []
    for op in ops:
        if op.is_output:
            names.append(f"out{out}")
            out += 1
        else:
            names.append(f"in{inp}")
            inp += 1
    return names


def operands(ops: Sequence[OperandSpec]) -> str:
    """Each operand's sizes, strides and dtype, or that it is to be allocated."""
    parts = []
    for name, op in zip(labels(ops), ops, strict=True):
        if not op.defined:
            kind = "to allocate" if op.dtype is None else f"to allocate {dtype(op.dtype)}"
            parts.append(f"{name} {kind}")
        else:
            extra = " (number)" if op.is_scalar else ""
            extra += " (also an input)" if op.is_read_write else ""
            parts.append(f"{name} {sizes(op.sizes)} {strides(op.strides)} {dtype(op.dtype)}{extra}")
    return "; ".join(parts)


def shape(info: ShapeInfo) -> str:
    """The broadcast shape and whether every operand that took part had it."""
    if info.all_ops_are_scalars:
        note = "only zero-dim operands"
    elif info.all_ops_same_shape:
        note = "all operands have it"
    else:
        note = "operands differ"
    return f"{sizes(info.shape)} ({note})"


def resize(ops: Sequence[OperandSpec], will_resize: Sequence[bool]) -> str:
    """Which defined outputs will be resized to the broadcast shape."""
    names = [n for n, r in zip(labels(ops), will_resize, strict=True) if r]
    return ", ".join(names) + " resized" if names else "none resized"


def types(info: TypeInfo) -> str:
    """The common dtype, each output's dtype, and any CPU cast temporaries."""
    names = labels(info.operands)
    parts = [f"common {dtype(info.common_dtype)}"]
    parts += [
        f"{n} {dtype(op.dtype)}" for n, op in zip(names, info.operands, strict=True) if op.is_output
    ]
    for name, op, temp in zip(names, info.operands, info.temporaries, strict=True):
        if temp:
            parts.append(f"{name} -> {dtype(op.dtype)} copy {strides(op.strides)}")
    return "; ".join(parts)


def setup_type(setup: FastSetupType, info: ShapeInfo) -> str:
    """The fast set-up chosen, and the reason when there is none."""
    if setup is not FastSetupType.NONE:
        return setup.value
    if not info.all_ops_same_shape:
        return "NONE: shapes differ"
    return "NONE: no shared dense layout"


def fast(ops: Sequence[OperandSpec], result: FastSetup) -> str:
    """Strides given to outputs, then the flat iteration."""
    names = labels(ops)
    parts = [f"{names[i]} strides {strides(s)}" for i, s in enumerate(result.output_strides)]
    parts.append(f"shape {sizes(result.shape)}")
    parts += [f"{n} {sizes(s)}" for n, s in zip(names, result.stride_bytes, strict=True)]
    return "; ".join(parts)


def stride_bytes(ops: Sequence[OperandSpec], values: Sequence[Sequence[int] | None]) -> str:
    """Byte strides per operand over the broadcast shape; ``-`` for outputs not laid out yet."""
    return "; ".join(
        f"{n} {'-' if s is None else sizes(s)}" for n, s in zip(labels(ops), values, strict=True)
    )


def reorder(perm: Sequence[int], shape: Sequence[int]) -> str:
    """The permutation and the shape in iteration order."""
    return f"perm {sizes(perm)}; shape {sizes(shape)}"


def allocation(ops: Sequence[OperandSpec], will_resize: Sequence[bool], alloc: Allocation) -> str:
    """Each output's strides (allocated or kept)."""
    names = labels(ops)
    parts = []
    for i, out_strides in enumerate(alloc.output_strides):
        new = will_resize[i] or not ops[i].defined
        parts.append(f"{names[i]} {'strides' if new else 'keeps'} {strides(out_strides)}")
    return "; ".join(parts)


def coalesced(
    ops: Sequence[OperandSpec], shape: Sequence[int], values: Sequence[Sequence[int]]
) -> str:
    """The coalesced shape and byte strides, fastest first."""
    parts = [f"shape {sizes(shape)}"]
    parts += [f"{n} {sizes(s)}" for n, s in zip(labels(ops), values, strict=True)]
    return "; ".join(parts)
