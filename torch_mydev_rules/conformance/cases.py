"""Decides how one case is written down, and made real on a device: ``Op``, ``Call``, ``T``.

An ``Op`` is one entry of the catalogue (``ops_mission``, ``ops_curated``): its name, its
group, the dtypes it takes, and ``draw(rng, dtypes) -> Call``, which picks layouts and
arguments for one case. A ``Call`` is a torch function and its arguments, where each tensor
argument is a ``T`` (a ``Layout``, a dtype, the kind of values it holds) and ``DEVICE``
stands for the device under test; ``make_args`` turns them into tensors on a device, the
same values on every device. ``Call.rules`` (mission ops only) gives the rules' prediction
from CPU's arguments.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .layouts import Layout, describe, materialise

__all__ = ["DEVICE", "Call", "Dtypes", "Op", "T", "make_args", "render"]

Dtypes = tuple[torch.dtype, ...]


class _Device:
    """Stands for the device under test in a call's arguments (a factory's ``device=``)."""

    def __repr__(self) -> str:
        return "DEVICE"


DEVICE = _Device()


@dataclass(frozen=True)
class T:
    """A tensor argument: exactly ``layout``, of ``dtype``, holding values of ``kind``
    (``layouts.values``); ``grad`` makes it require grad (floating dtypes only)."""

    layout: Layout
    dtype: torch.dtype
    kind: str = "any"
    grad: bool = False

    def __str__(self) -> str:
        return describe(self.layout, self.dtype)


@dataclass(frozen=True)
class Call:
    """One call of ``fn(*args)``: ``text`` shows it, ``values`` says how its values compare
    (``"exact"``, ``"close"``, or None when undefined), ``rules(*cpu_args)`` returns the
    rules' ``Prediction`` (or raises what they say torch raises)."""

    text: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    values: str | None = "exact"
    rules: Callable[..., Any] | None = None
    refusals: tuple[str, ...] = field(default=())  # CPU messages the rules do not model


@dataclass(frozen=True)
class Op:
    """A catalogue entry: ``draw(rng, dtypes)`` makes one ``Call`` of the op, its dtypes
    picked from ``dtypes`` (the op's own, less those the run or the device leaves out).

    ``group`` is ``"layout"``, ``"elementwise"`` or ``"reduction"`` (the mission's ops,
    which carry rules) or ``"curated"`` (layout-sensitive ops, compared with CPU only);
    ``dtypes`` the dtypes it is tried with; ``mirrors`` the PyTorch function(s) whose layout
    decision it exercises.
    """

    name: str
    group: str
    dtypes: tuple[torch.dtype, ...]
    draw: Callable[[random.Random, Dtypes], Call]
    mirrors: str = ""


def _make(arg: Any, device: torch.device, seed: int) -> Any:
    if isinstance(arg, T):
        t = materialise(arg.layout, arg.dtype, device, kind=arg.kind, seed=seed)
        return t.requires_grad_() if arg.grad else t
    if arg is DEVICE:
        return device
    if isinstance(arg, (list, tuple)) and any(isinstance(a, T) for a in arg):
        return type(arg)(_make(a, device, seed + 101 * i) for i, a in enumerate(arg))
    return arg


def make_args(args: Sequence[Any], device: torch.device | str, seed: int) -> list[Any]:
    """The arguments of a call on ``device``: each ``T`` a tensor of that layout (its values
    seeded by ``seed`` and its position, so every device gets the same ones), ``DEVICE``
    the device, lists of ``T`` lists of tensors, anything else as it is."""
    device = torch.device(device)
    return [_make(a, device, seed * 1000 + i) for i, a in enumerate(args)]


def _render(value: Any) -> str:
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.memory_format):
        return f"torch.{value}".replace("torch.torch.", "torch.")
    if isinstance(value, (list, tuple)) and any(isinstance(a, T) for a in value):
        inner = ", ".join(_render(a) for a in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, T):
        return f"<{value}>"
    return repr(value)


def render(name: str, *args: Any, **kwargs: Any) -> str:
    """``name(<[2, 3] (1, 2) float32>, 2, dim=1)``: a call with each tensor as its layout."""
    parts = [_render(a) for a in args] + [f"{k}={_render(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"
