"""Device checks for mydev ops, as CUDA makes them.

A CUDA op refuses tensors of two devices ("Expected all tensors to be on the same device,
but found at least two devices, cuda:0 and cpu!"), except 0-dim CPU tensors used as
inputs (TensorIterator's CPU scalars, ``TensorIteratorBase::compute_types``) and CPU index
tensors of the indexing ops (``index``, ``index_put_``: ATen moves them). The fallback checks
before anything runs, so nothing is written when it raises. ``check_same_device`` is the
shared helper; native kernels can call it too.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from torch_mydev._names import DEVICE

__all__ = ["CPU_ALLOWED", "check_call", "check_same_device", "mixed_device_error"]

# Arguments that CUDA accepts on CPU (ATen copies them to the device itself); copy_'s
# source may be on any device (mydev's own copy_ takes a CPU one; this is for the calls CPU's
# kernel serves: a cast whose loop is still compiling, docs/first-use.md).
CPU_ALLOWED: dict[str, frozenset[str]] = {
    "aten::copy_": frozenset({"src"}),
    "aten::index.Tensor": frozenset({"indices"}),
    "aten::index.Tensor_out": frozenset({"indices"}),
    "aten::index_put_": frozenset({"indices"}),
    "aten::index_put": frozenset({"indices"}),
    "aten::index_put.out": frozenset({"indices"}),
    "aten::_index_put_impl_": frozenset({"indices"}),
    "aten::_index_put_impl": frozenset({"indices"}),
    "aten::_index_put_impl.out": frozenset({"indices"}),
}


def mixed_device_error(first: torch.device, second: torch.device) -> RuntimeError:
    """CUDA's error for two devices in one op (c10's ``check_and_update_common_device``)."""
    return RuntimeError(
        "Expected all tensors to be on the same device, but found at least two devices, "
        f"{first} and {second}!"
    )


def _flat(value: Any) -> Iterable[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, torch.Tensor):
                yield item


def check_same_device(
    inputs: Iterable[torch.Tensor], outputs: Iterable[torch.Tensor] = ()
) -> torch.device | None:
    """Raise ``RuntimeError`` unless all tensors are on one device, as CUDA requires.

    0-dim CPU tensors may join mydev ``inputs``; ``outputs`` (written tensors) may not.
    Returns the mydev device found, if any.
    """
    common: torch.device | None = None
    cpu_seen: torch.device | None = None
    cpu_first = False
    for written, group in ((False, inputs), (True, outputs)):
        for t in group:
            device = t.device
            if device.type == DEVICE:
                if common is None:
                    common = device
                elif device != common:
                    raise mixed_device_error(common, device)
            elif (written or t.dim() != 0) and cpu_seen is None:
                cpu_seen = device
                cpu_first = common is None
    if common is not None and cpu_seen is not None:
        if cpu_first:  # named in argument order, as CUDA's check does
            raise mixed_device_error(cpu_seen, common)
        raise mixed_device_error(common, cpu_seen)
    return common


def check_call(
    name: str, names: Iterable[str], values: Iterable[Any], written: Iterable[bool]
) -> None:
    """``check_same_device`` over one fallback call's bound arguments."""
    allowed = CPU_ALLOWED.get(name, frozenset())
    inputs: list[torch.Tensor] = []
    outputs: list[torch.Tensor] = []
    for arg_name, value, is_written in zip(names, values, written, strict=True):
        if arg_name in allowed:
            inputs.extend(t for t in _flat(value) if t.device.type == DEVICE)
        elif is_written:
            outputs.extend(_flat(value))
        else:
            inputs.extend(_flat(value))
    check_same_device(inputs, outputs)
