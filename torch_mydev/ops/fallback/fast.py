"""The fallback's common path in one pass: zero-copy, no random draw, no device exemption.

Same rules as the general path in ``fallback.py`` (device check as CUDA, CPU aliases that
share a CPU storage per mydev storage, write-back of resized outputs, results copied once
to mydev), with the per-call Python work cut to one walk over the arguments: the fallback's
own cost is most of what a small op costs.

A new CPU result is not copied when it can be adopted (``_C._adopt``): mydev memory is host
memory, so the block CPU's allocator made for it becomes the mydev tensor's storage, with
CPU's sizes, strides and storage offset. The stub takes only a plain dense tensor over a
plain block of CPU's allocator held by that result alone; here, only results of aten's C++
kernels are offered (``may_adopt``), a CPU tensor the call was passed is never taken (the
op may return it as it is), and a result returned twice is one mydev tensor.
"""

from __future__ import annotations

from typing import Any

import torch

from torch_mydev import _C
from torch_mydev._names import DEVICE
from torch_mydev.ops.fallback import copy as fc
from torch_mydev.ops.fallback import devices as fd
from torch_mydev.ops.fallback import schema as fs

__all__ = ["run_fast"]

_CPU = torch.device("cpu")
_adopt = _C._adopt
_cpu_alias = _C._cpu_alias
_storage_span = _C._storage_span
_Tensor = torch.Tensor


class _Call:
    """The CPU side of one call: aliases made so far and what the arguments hold."""

    __slots__ = (
        "adopt",
        "device",
        "first",
        "moved",
        "originals",
        "other",
        "other_first",
        "passed",
        "seen",
    )

    def __init__(self) -> None:
        self.device: torch.device | None = None  # the first mydev device (or device=)
        self.other: torch.device | None = None  # a second device that may not join
        self.other_first = False  # ``other`` came before the first mydev tensor
        self.first: dict[tuple[int, int], torch.Tensor] = {}
        self.originals: dict[int, torch.Tensor] = {}
        self.seen: dict[int, torch.Tensor] = {}  # id(mydev tensor) -> its alias
        self.passed: set[int] = set()  # ids of the CPU tensors passed as they are
        self.adopt = False  # whether new results may be adopted (``may_adopt``)
        self.moved: dict[int, torch.Tensor] = {}  # id(CPU result) -> its mydev tensor

    def convert(self, value: Any) -> Any:
        if isinstance(value, _Tensor):
            device = value.device
            if device.type != DEVICE:
                self.passed.add(id(value))
                if value.dim() != 0 and self.other is None:
                    self.other = device
                    self.other_first = self.device is None
                return value
            alias = self.seen.get(id(value))
            if alias is not None:  # one tensor passed twice is one CPU tensor
                return alias
            if self.device is None:
                self.device = device
            elif device != self.device and self.other is None:
                self.other = device
            key = _storage_span(value)
            like = self.first.get(key)
            alias = _cpu_alias(value, like, True)  # what the op writes was materialised first
            if like is None:
                self.first[key] = alias
            self.originals[id(alias)] = value
            self.seen[id(value)] = alias
            return alias
        if isinstance(value, (list, tuple)):
            return type(value)(self.convert(item) for item in value)
        if isinstance(value, torch.device) and value.type == DEVICE:
            return _CPU
        return value


def _written(op_info: fs.OpInfo, args: tuple, kwargs: dict) -> list[tuple[Any, int | str]]:
    found = []
    for i in op_info.written_positions:
        if i < len(args) and not op_info.kwarg_only[i]:
            found.append((args[i], i))
        else:
            name = op_info.names[i]
            if name in kwargs:
                found.append((kwargs[name], name))
    return found


def run_fast(op_info: fs.OpInfo, args: tuple, kwargs: dict) -> Any:
    """Run ``op_info.op`` on CPU aliases of the mydev arguments (see the module docstring)."""
    call = _Call()
    written = _written(op_info, args, kwargs)
    for value, _ in written:
        fc.materialize(value)
    cpu_args = [call.convert(a) for a in args]
    cpu_kwargs = {k: call.convert(v) for k, v in kwargs.items()}
    for value, where in written:
        for t in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(t, _Tensor) and t.device.type != DEVICE and call.other is None:
                call.other = t.device
        if (
            isinstance(where, str)
            and isinstance(value, _Tensor)
            and value.numel() == 0
            and value.device.type == DEVICE
        ):
            # ``out=torch.empty(0)``: CPU resizes a fresh tensor (an alias cannot grow);
            # write_back grows the mydev tensor like it and copies the values once.
            fresh = torch.empty(0, dtype=value.dtype)
            fresh.set_(fresh.untyped_storage(), value.storage_offset(), value.shape, value.stride())
            cpu_kwargs[where] = fresh
    device = call.device
    if device is not None and call.other is not None:
        if call.other_first:
            raise fd.mixed_device_error(call.other, device)
        raise fd.mixed_device_error(device, call.other)
    for value in kwargs.values():
        if isinstance(value, torch.device):
            device = value
    kernel = op_info.cpu_kernel
    call.adopt = kernel is op_info.op and may_adopt(op_info.op)
    result = kernel(*cpu_args, **cpu_kwargs)
    for value, where in written:
        cpu = cpu_args[where] if isinstance(where, int) else cpu_kwargs[where]
        fc.write_back(value, cpu)
    returns = op_info.return_alias
    if not returns:
        return result
    if device is None:
        device = torch.device(DEVICE, _C._current_device())
    if len(returns) == 1:
        return _one(returns[0], result, args, kwargs, op_info, call, device)
    return tuple(
        _one(alias, out, args, kwargs, op_info, call, device)
        for alias, out in zip(returns, result, strict=True)
    )


def _one(
    alias: int | None,
    out: Any,
    args: tuple,
    kwargs: dict,
    op_info: fs.OpInfo,
    call: _Call,
    device: torch.device,
) -> Any:
    if alias is not None:
        if alias < len(args) and not op_info.kwarg_only[alias]:
            return args[alias]
        return kwargs[op_info.names[alias]]
    return _result(out, call, device)


# Python kernels registered for aten ops on CPU (or as their composites) may return a tensor
# Python code still holds (a cached table), which no C++ reference count shows: while any is
# registered, no result is adopted. Re-read when torch.library's record of them grows.
_PYTHON_CPU_KEYS = ("/CPU", "/CompositeExplicitAutograd", "/CompositeImplicitAutograd", "/")
_python_kernels_seen = (-1, True)


def may_adopt(op: torch._ops.OpOverload) -> bool:
    """Whether ``op``'s new results come from C++ kernels only: an aten op, and no Python
    kernel registered for any aten op's CPU or composite key (``torch.library._impls``)."""
    global _python_kernels_seen
    if op.namespace != "aten":
        return False
    registered = torch.library._impls
    count, found = _python_kernels_seen
    if count != len(registered):
        found = any(
            key.startswith("aten/") and key.endswith(_PYTHON_CPU_KEYS) for key in registered
        )
        _python_kernels_seen = (len(registered), found)
    return not found


def _result(value: Any, call: _Call, device: torch.device) -> Any:
    if isinstance(value, _Tensor):
        original = call.originals.get(id(value))
        if original is not None:
            return original
        if value.device.type != "cpu" or device.type == "cpu":
            return value
        moved = call.moved.get(id(value))  # one tensor returned twice is one mydev tensor
        if moved is None:
            if call.adopt and id(value) not in call.passed:  # a new result: its block may move
                index = device.index if device.index is not None else _C._current_device()
                moved = _adopt(value, index)
            if moved is None:
                moved = fc.to_mydev(value, device)
            call.moved[id(value)] = moved
        return moved
    if isinstance(value, (list, tuple)):
        return type(value)(_result(item, call, device) for item in value)
    return value
