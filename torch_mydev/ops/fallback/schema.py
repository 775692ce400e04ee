"""What the CPU fallback needs to know about an op's schema, computed once per overload.

Also the overload fix: in torch 2.13 the ``op`` a Python boxed fallback receives is not
always the overload that was called. ``torch.copysign(x, -1.0, out=o)`` arrives as
``aten::copysign.out`` with a Python float where that schema has ``Tensor other``: the call
was ``copysign.Scalar_out``, whose argument names are the same. ``resolve`` finds the
overload of the same packet whose argument kinds (Tensor or not) fit the values, so the CPU
op that runs is exactly the one the caller asked for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from torch_mydev.ops.fallback.rnn import KERNELS as CPU_KERNELS

__all__ = [
    "MISSING",
    "OpInfo",
    "bind",
    "info",
    "kernels_for",
    "op_name",
    "resolve",
    "returns_view",
    "unbind",
]

MISSING = object()

# Ops whose CPU kernels write arguments their schemas do not mark as written.
_UNDECLARED_WRITES: dict[str, frozenset[str]] = {
    "aten::native_batch_norm": frozenset({"running_mean", "running_var"}),
    "aten::native_batch_norm.out": frozenset({"running_mean", "running_var"}),
}


def kernels_for(key: str) -> frozenset[str]:
    """The overloads with a kernel for dispatch key ``key`` now, by qualified name
    (``"aten::add.Tensor"``; ``"aten::addmm"`` for a default overload): the names for which
    ``torch._C._dispatch_has_kernel_for_dispatch_key(name, key)`` is true, from one call
    (``Dispatcher::getRegistrationsForDispatchKey``). Asked op by op, the scans of the
    dispatcher at mydev's import made 16,000 calls, 70 ms of every ``import torch``."""
    return frozenset(torch._C._dispatch_get_registrations_for_dispatch_key(key))


def op_name(op: torch._ops.OpOverload) -> str:
    """The qualified overload name: ``aten::add.Tensor``, or ``aten::copy_`` for the default."""
    schema = op._schema
    return f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name


def op_kernel(op: torch._ops.OpOverload, run: Callable[..., Any], prefix: str) -> Callable:
    """A torch.library kernel of ``op`` that calls ``run(op, args, kwargs)``, named
    ``{prefix}_{op_name(op)}`` (the name a dispatcher trace shows)."""

    def kernel(*args: Any, **kwargs: Any) -> Any:
        return run(op, args, kwargs)

    kernel.__name__ = kernel.__qualname__ = f"{prefix}_{op_name(op)}"
    return kernel


def returns_view(schema: torch._C.FunctionSchema) -> bool:
    """Whether an op returns an alias of an input that it does not write (a view op)."""
    return any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def _tensor_kind(jit_type: Any) -> str:
    """``T`` tensor, ``L`` list of tensors, ``S`` anything else (numbers, ints, …)."""
    text = str(jit_type)
    if text.startswith("Tensor") and not text.startswith("Tensor[") and "[]" not in text:
        return "T"
    if text.startswith("Tensor"):
        return "L"
    return "S"


@dataclass(frozen=True)
class OpInfo:
    """Per-overload facts: argument names, which are written, what each return aliases."""

    op: torch._ops.OpOverload
    name: str
    schema: torch._C.FunctionSchema
    names: tuple[str, ...]  # argument names (``schema.arguments`` builds new objects)
    kinds: tuple[str, ...]  # per argument: T / L / S
    kwarg_only: tuple[bool, ...]
    written: tuple[bool, ...]  # per argument
    return_alias: tuple[int | None, ...]  # per return: index of the argument it is
    is_view: bool
    random: bool
    generator_index: int | None  # the ``generator`` argument
    ambiguous: bool  # another overload has the same argument names: ``resolve`` must look
    written_positions: tuple[int, ...]  # indices of written arguments
    written_names: frozenset[str]
    # What runs on CPU: the overload itself, or the CPU version of an op that has only
    # CUDA kernels (``rnn.KERNELS``), chosen once here rather than on every call.
    cpu_kernel: Any

    def fits(self, args: tuple, kwargs: dict) -> bool:
        """Whether the values' kinds (tensor or not) fit this schema."""
        names = self.names
        if len(args) > len(names):
            return False
        for kind, value in zip(self.kinds, args, strict=False):
            if not _fits(kind, value):
                return False
        for key, value in kwargs.items():
            if key not in names or not _fits(self.kinds[names.index(key)], value):
                return False
        return True


def _fits(kind: str, value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, torch.Tensor):
        return kind == "T"
    if isinstance(value, (int, float, complex, bool)):
        return kind == "S"
    return True


_cache: dict[torch._ops.OpOverload, OpInfo] = {}
_resolved: dict[tuple, torch._ops.OpOverload] = {}
_lock = threading.Lock()


def info(op: torch._ops.OpOverload) -> OpInfo:
    """The cached ``OpInfo`` of ``op``."""
    found = _cache.get(op)
    if found is None:
        found = _make_info(op)
        with _lock:
            _cache[op] = found
    return found


def _make_info(op: torch._ops.OpOverload) -> OpInfo:
    schema = op._schema
    name = op_name(op)
    arguments = schema.arguments
    written = tuple(
        (a.alias_info is not None and a.alias_info.is_write)
        or a.name in _UNDECLARED_WRITES.get(name, ())
        for a in arguments
    )
    return_alias: list[int | None] = []
    for ret in schema.returns:
        index = None
        if ret.alias_info is not None:
            for i, a in enumerate(arguments):
                if a.alias_info is not None and a.alias_info.before_set & ret.alias_info.before_set:
                    index = i
                    break
        return_alias.append(index)
    generator = [i for i, a in enumerate(arguments) if a.name == "generator"]
    names = [a.name for a in arguments]
    packet = getattr(getattr(torch.ops, op.namespace), schema.name.split("::")[1])
    ambiguous = any(
        overload != (schema.overload_name or "default")
        and [a.name for a in getattr(packet, overload)._schema.arguments] == names
        for overload in packet.overloads()
    )
    return OpInfo(
        op=op,
        name=name,
        schema=schema,
        names=tuple(names),
        kinds=tuple(_tensor_kind(a.type) for a in arguments),
        kwarg_only=tuple(a.kwarg_only for a in arguments),
        written=written,
        return_alias=tuple(return_alias),
        is_view=returns_view(schema) or torch.Tag.inplace_view in op.tags,
        random=torch.Tag.nondeterministic_seeded in op.tags,
        generator_index=generator[0] if generator else None,
        ambiguous=ambiguous,
        written_positions=tuple(i for i, w in enumerate(written) if w),
        written_names=frozenset(a.name for a, w in zip(arguments, written, strict=True) if w),
        cpu_kernel=CPU_KERNELS.get(name, op),
    )


def _signature(args: tuple, kwargs: dict) -> tuple:
    def kind(v: Any) -> str:
        return "T" if isinstance(v, torch.Tensor) else type(v).__name__

    return tuple(kind(a) for a in args) + tuple((k, kind(v)) for k, v in kwargs.items())


def resolve(op: torch._ops.OpOverload, args: tuple, kwargs: dict) -> OpInfo:
    """The ``OpInfo`` of the overload actually called (see the module docstring)."""
    first = info(op)
    if not first.ambiguous:
        return first
    key = (op, _signature(args, kwargs))
    chosen = _resolved.get(key)
    if chosen is None:
        chosen = op
        if not first.fits(args, kwargs):
            packet = getattr(getattr(torch.ops, op.namespace), op._schema.name.split("::")[1])
            for overload in packet.overloads():
                candidate = info(getattr(packet, overload))
                if candidate.fits(args, kwargs) and len(candidate.kinds) == len(first.kinds):
                    chosen = candidate.op
                    break
        with _lock:
            _resolved[key] = chosen
    return info(chosen)


def bind(op_info: OpInfo, args: tuple, kwargs: dict) -> list[Any]:
    """One value per schema argument (``MISSING`` where the caller left a default)."""
    values = []
    for i, name in enumerate(op_info.names):
        if not op_info.kwarg_only[i] and i < len(args):
            values.append(args[i])
        else:
            values.append(kwargs.get(name, MISSING))
    return values


def unbind(op_info: OpInfo, values: list[Any]) -> tuple[list, dict]:
    """Back to a call: positional while no argument is missing, by name after that."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    positional = True
    for name, kwarg_only, value in zip(op_info.names, op_info.kwarg_only, values, strict=True):
        if value is MISSING:
            positional = False
        elif positional and not kwarg_only:
            args.append(value)
        else:
            positional = False
            kwargs[name] = value
    return args, kwargs
