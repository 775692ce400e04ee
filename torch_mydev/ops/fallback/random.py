"""Random ops in the CPU fallback: each mydev generator's stream is its own.

mydev's generators are CPU's mt19937 (``csrc_stub/runtime/hooks.cpp``), so a mydev generator's
state can be lent to a CPU generator: the CPU op receives, as its ``generator`` argument, a
fresh CPU generator holding the mydev generator's state (the mydev default generator of
the target device when the caller passed none), and the state goes back to the mydev
generator afterwards. CPU's default generator is never touched, so what it draws, and what
each mydev generator draws, depends only on its own seed and calls, whatever other threads
do. One lock covers a whole lend (state out, op, state back) so concurrent random ops on one
generator draw consecutive, never repeated, numbers: ``RNG_LOCK``, the stub's lend lock,
which its own ``native_dropout`` (csrc_stub/ops/random.cpp) takes too.

Overloads without a ``generator`` argument (``rand``, ``randn``, ``randint``, ``randperm``,
``*_like`` …) run as their sibling overload that has one (``rand.generator``);
``native_dropout`` (no sibling) runs as CPU's kernel does (``native_dropout_cpu``: a bool
``bernoulli_`` mask laid out as the input, then ``input * mask * scale`` with the scale in
the input's dtype) with the lent generator; its plain calls run those same steps in the
stub (csrc_stub/ops/random.cpp), the others here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torch_mydev import _C
from torch_mydev._names import DEVICE
from torch_mydev.ops.fallback import schema as fs

__all__ = ["RNG_LOCK", "lend", "with_generator"]


class _LendLock:
    """The stub's lend lock (a recursive mutex), as a context manager; waiting for it
    releases the GIL, so a thread of the stub's own random ops holding it never waits on
    a Python thread."""

    __slots__ = ()

    def __enter__(self) -> None:
        _C._rng_lend_acquire()

    def __exit__(self, *exc: object) -> None:
        _C._rng_lend_release()


RNG_LOCK = _LendLock()

_siblings: dict[torch._ops.OpOverload, torch._ops.OpOverload | None] = {}


def _sibling(op: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """The overload of the same packet with ``op``'s arguments plus ``generator``."""
    if op in _siblings:
        return _siblings[op]
    names = [a.name for a in op._schema.arguments]
    packet = getattr(getattr(torch.ops, op.namespace), op._schema.name.split("::")[1])
    found = None
    for overload in packet.overloads():
        candidate = getattr(packet, overload)
        other = [a.name for a in candidate._schema.arguments]
        if "generator" in other and sorted(other) == sorted([*names, "generator"]):
            found = candidate
            break
    _siblings[op] = found
    return found


def with_generator(op_info: fs.OpInfo, values: list[Any]) -> tuple[fs.OpInfo, list[Any]]:
    """The call moved to an overload with a ``generator`` argument, when ``op`` has none."""
    if op_info.generator_index is not None:
        return op_info, values
    sibling = _sibling(op_info.op)
    if sibling is None:
        return op_info, values
    by_name = dict(zip(op_info.names, values, strict=True))
    new_info = fs.info(sibling)
    new_values = [
        by_name.get(a.name, None if a.name == "generator" else fs.MISSING)
        for a in new_info.schema.arguments
    ]
    return new_info, new_values


def _native_dropout(
    input: torch.Tensor, p: float, train: bool | None, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """aten/src/ATen/native/Dropout.cpp ``native_dropout_cpu`` with an explicit generator."""
    if input.numel() == 0:
        return input, torch.empty_like(input)
    if train is None or train:
        p1m = 1.0 - p
        scale = 0.0 if p1m == 0 else 1.0 / p1m
        mask = torch.empty_like(input, dtype=torch.bool)  # the input's layout (preserve)
        mask.bernoulli_(p1m, generator=generator)
        # CPU's kernel multiplies by the scale in the input's dtype (a float16 input's scale
        # rounds to float16 first), not by the Python number
        return input.mul(mask).mul_(torch.scalar_tensor(scale, dtype=input.dtype)), mask
    return input.clone(), torch.ones_like(input, dtype=torch.bool)


SPECIAL: dict[str, Callable] = {"aten::native_dropout": _native_dropout}


def lend(
    op_info: fs.OpInfo, cpu_values: list[Any], device: torch.device, run: Callable[[], Any]
) -> Any:
    """Run ``run()`` with the mydev generator's state lent to a CPU generator argument.

    ``cpu_values[op_info.generator_index]`` (or the extra last value for ``SPECIAL`` ops) is
    replaced in place by the lent CPU generator.
    """
    index = op_info.generator_index
    given = cpu_values[index] if index is not None else None
    if given is fs.MISSING:
        given = None
    if given is not None and given.device.type != DEVICE:
        raise RuntimeError(
            f"Expected a '{DEVICE}' device type for generator but found '{given.device.type}'"
        )
    if given is None:
        given = _C._default_generator(
            -1 if device.type != DEVICE or device.index is None else device.index
        )
    with RNG_LOCK:
        cpu_generator = torch.Generator()
        cpu_generator.set_state(given.get_state())
        if index is not None:
            cpu_values[index] = cpu_generator
        else:
            cpu_values.append(cpu_generator)
        result = run()  # on error the mydev generator keeps its state (a retry redraws)
        given.set_state(cpu_generator.get_state())
        return result
