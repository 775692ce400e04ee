"""The CPU fallback: an op with no mydev kernel runs on CPU copies of its arguments.

Registered as PrivateUse1's boxed fallback (``Library("_", "IMPL").fallback``), it receives
every op that ``registry.KERNELS`` and the stub's view table leave out, as
``(op, *args, **kwargs)``. What it decides, in order:

1. views are refused: an op whose schema returns an alias of an input that it does not
   write (``Tensor(a)``), or that changes a tensor's metadata in place (``inplace_view``),
   cannot be honoured by copies, so it raises ``RuntimeError``;
2. arguments: every mydev tensor (also inside lists and optionals) becomes a CPU tensor with
   the same sizes and strides; tensors that share one mydev storage, or overlap themselves,
   are rebuilt over one CPU copy of that storage, so they alias on CPU as on mydev; a
   ``device=mydev`` argument becomes ``cpu``;
3. the op runs on CPU through the dispatcher (the fallback sits below autograd, so nothing is
   recorded twice); a random op draws from mydev's generator, swapped in for CPU's;
4. write-back: arguments the schema marks as written (``Tensor(a!)``, also lists) are copied
   back into the original mydev tensors, resized and restrided first when the CPU op resized
   them (``out=``);
5. results: a return that aliases a written argument is the original mydev tensor; any other
   tensor is copied to mydev with its CPU sizes and strides.

``convolution_overrideable`` and ``convolution_backward_overrideable`` never reach a boxed
fallback (their CompositeExplicitAutograd defaults raise for other backends), so they are
registered here explicitly and run ``aten::convolution`` / ``aten::convolution_backward``
through the same machinery. This mirrors the CPU fallback of PyTorch's OpenReg backend
(``torch_openreg/csrc/aten/native/Extra.cpp``) and ``at::native::cpu_fallback``
(aten/src/ATen/native/CPUFallback.cpp).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from torch_mydev import _C
from torch_mydev.kernels.dtypes import SUPPORTED_DTYPES
from torch_mydev_rules import layout

__all__ = [
    "WARN_ENV",
    "FallbackWarning",
    "cpu_fallback",
    "fallback_stats",
    "op_name",
    "register",
    "reset_fallback_stats",
    "returns_view",
    "run_on_cpu",
]

WARN_ENV = "TORCH_MYDEV_FALLBACK_WARN"
_DEVICE_TYPE = "mydev"
_MISSING = object()

# Ops whose CPU kernels write arguments their schemas do not mark as written.
_UNDECLARED_WRITES: dict[str, frozenset[str]] = {
    "aten::native_batch_norm": frozenset({"running_mean", "running_var"}),
    "aten::native_batch_norm.out": frozenset({"running_mean", "running_var"}),
}

# Same-sized dtypes the copy kernels know, for moving the bits of dtypes they do not.
_BITS_DTYPE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class FallbackWarning(UserWarning):
    """Warned once per op (while ``TORCH_MYDEV_FALLBACK_WARN=1``) when it runs on CPU."""


# ---------------------------------------------------------------------------- statistics

_stats: Counter[str] = Counter()
_warned: set[str] = set()
_lock = threading.Lock()


def fallback_stats() -> dict[str, int]:
    """How many times each op ran on CPU since start or ``reset_fallback_stats``.

    Keys are qualified overload names as in ``op_name`` (``"aten::sin.out"``), sorted.
    """
    with _lock:
        return dict(sorted(_stats.items()))


def reset_fallback_stats() -> None:
    """Forget the counts, and which ops were warned about already."""
    with _lock:
        _stats.clear()
        _warned.clear()


def _record(name: str) -> None:
    with _lock:
        _stats[name] += 1
        warn = os.environ.get(WARN_ENV) == "1" and name not in _warned
        if warn:
            _warned.add(name)
    if warn:
        warnings.warn(
            f"mydev has no kernel for {name}; it runs on CPU copies of its arguments "
            f"(this warning is shown once per op; unset {WARN_ENV} to silence it)",
            FallbackWarning,
            stacklevel=4,
        )


# ------------------------------------------------------------------------------- schema


def op_name(op: torch._ops.OpOverload) -> str:
    """The qualified overload name: ``aten::add.Tensor``, or ``aten::copy_`` for the default."""
    schema = op._schema
    return f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name


def returns_view(schema: torch._C.FunctionSchema) -> bool:
    """Whether an op returns an alias of an input that it does not write (a view op)."""
    return any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def _is_written(argument: torch._C.Argument, name: str) -> bool:
    if argument.alias_info is not None and argument.alias_info.is_write:
        return True
    return argument.name in _UNDECLARED_WRITES.get(name, ())


def _bind(schema: torch._C.FunctionSchema, args: tuple, kwargs: dict) -> list[Any]:
    """One value per schema argument (``_MISSING`` where the caller left a default)."""
    values = []
    for i, argument in enumerate(schema.arguments):
        if not argument.kwarg_only and i < len(args):
            values.append(args[i])
        else:
            values.append(kwargs.get(argument.name, _MISSING))
    return values


def _unbind(schema: torch._C.FunctionSchema, values: list[Any]) -> tuple[list, dict]:
    """Back to a call: positional while no argument is missing, by name after that."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    positional = True
    for argument, value in zip(schema.arguments, values, strict=True):
        if value is _MISSING:
            positional = False
        elif positional and not argument.kwarg_only:
            args.append(value)
        else:
            positional = False
            kwargs[argument.name] = value
    return args, kwargs


# -------------------------------------------------------------------- moving the tensors


def _is_mydev(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == _DEVICE_TYPE


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself, or a same-sized integer view of a dtype the copy kernels do not have."""
    if t.dtype in SUPPORTED_DTYPES or t.element_size() not in _BITS_DTYPE:
        return t
    return t.view(_BITS_DTYPE[t.element_size()])


def _storage_key(t: torch.Tensor) -> int | None:
    storage = t.untyped_storage()
    return storage.data_ptr() if storage.nbytes() else None


def _copy_storage(storage: torch.UntypedStorage, device: torch.device) -> torch.UntypedStorage:
    """A copy of all bytes of ``storage`` in a new storage on ``device``."""
    src = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
    return src.to(device).untyped_storage()


def _over(storage: torch.UntypedStorage, like: torch.Tensor) -> torch.Tensor:
    """A tensor over ``storage`` with the dtype, offset, sizes and strides of ``like``."""
    out = torch.empty(0, dtype=like.dtype, device=storage.device)
    return out.set_(storage, like.storage_offset(), like.shape, like.stride())


def _needs_storage(t: torch.Tensor) -> bool:
    """Layouts a fresh ``empty_strided`` cannot take a copy of: overlapping, or maybe so."""
    return layout.has_internal_overlap(tuple(t.shape), t.stride()) is not layout.MemOverlap.NO


def _move(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A copy of ``t`` on ``device`` with its sizes, strides and conj/neg bits.

    A non-overlapping tensor is copied into ``empty_strided`` of its sizes and strides; one
    that overlaps itself (or may: ATen's "too hard") is rebuilt over a copy of its storage.
    """
    if t.is_conj():
        return _move(t.conj(), device).conj()
    if t.is_neg():
        return _move(t._neg_view(), device)._neg_view()
    if _needs_storage(t):
        return _over(_copy_storage(t.untyped_storage(), device), t)
    out = torch.empty_strided(tuple(t.shape), t.stride(), dtype=t.dtype, device=device)
    _bits(out).copy_(_bits(t))
    return out


class _ToCpu:
    """CPU stand-ins for the mydev tensors of one call, aliasing each other as they do.

    Each distinct tensor is copied once; tensors that share a mydev storage become views of
    one CPU copy of that storage, with their own offsets and strides.
    """

    def __init__(self, tensors: list[torch.Tensor]) -> None:
        distinct = {id(t): t for t in tensors if _is_mydev(t)}
        keys = Counter(_storage_key(t) for t in distinct.values())
        self._shared = {key for key, n in keys.items() if key is not None and n > 1}
        self._storages: dict[int, torch.UntypedStorage] = {}
        self.copies: dict[int, torch.Tensor] = {}  # id(mydev tensor) -> CPU tensor
        self.originals: dict[int, torch.Tensor] = {}  # id(CPU tensor) -> mydev tensor

    def __call__(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if not _is_mydev(value):
                return value
            if id(value) not in self.copies:
                cpu = self._copy(value)
                self.copies[id(value)] = cpu
                self.originals[id(cpu)] = value
            return self.copies[id(value)]
        if isinstance(value, (list, tuple)):
            return type(value)(self(item) for item in value)
        if isinstance(value, torch.device) and value.type == _DEVICE_TYPE:
            return torch.device("cpu")
        return value

    def _copy(self, t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key not in self._shared:
            return _move(t, torch.device("cpu"))
        if t.is_conj():
            return self._copy(t.conj()).conj()
        if t.is_neg():
            return self._copy(t._neg_view())._neg_view()
        if key not in self._storages:
            self._storages[key] = _copy_storage(t.untyped_storage(), torch.device("cpu"))
        return _over(self._storages[key], t)


def _write_back(original: Any, cpu: Any) -> None:
    """Copy what the CPU op wrote into the mydev tensor(s) it stands for."""
    if isinstance(original, (list, tuple)):
        for o, c in zip(original, cpu, strict=True):
            _write_back(o, c)
        return
    if not _is_mydev(original):
        return  # None, or a CPU tensor the op wrote itself
    if original.shape != cpu.shape or original.stride() != cpu.stride():
        # The CPU op resized its output (resize_output, then as_strided_ to its layout).
        original.resize_(cpu.shape)
        if original.stride() != cpu.stride():
            original.as_strided_(cpu.shape, cpu.stride())
    dst, src = original, cpu
    if dst.is_conj():
        dst, src = dst.conj(), src.conj()
    if dst.is_neg():
        dst, src = dst._neg_view(), src._neg_view()
    _bits(dst).copy_(_bits(src))


def _target_device(values: list[Any]) -> torch.device:
    """Where new results go: the ``device`` argument, else the first mydev tensor's device."""
    for value in values:
        if isinstance(value, torch.device):
            return value
    for value in values:
        for t in _tensors(value):
            if _is_mydev(t):
                return t.device
    return torch.device(_DEVICE_TYPE, 0)


def _result(value: Any, to_cpu: _ToCpu, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        if id(value) in to_cpu.originals:  # the op returned one of its inputs itself
            return to_cpu.originals[id(value)]
        if value.device.type != "cpu" or device.type == "cpu":
            return value
        return _move(value, device)
    if isinstance(value, (list, tuple)):
        return type(value)(_result(item, to_cpu, device) for item in value)
    return value


@contextmanager
def _mydev_random(op: torch._ops.OpOverload, values: list[Any], device: torch.device):
    """Let a random op draw from mydev's generators instead of CPU's.

    mydev's generator is CPU's mt19937, so its state can be lent to a CPU generator: an
    explicit mydev ``generator=`` argument is replaced by a CPU generator with its state, and
    CPU's default generator holds the mydev default generator's state while the op runs.
    States go back afterwards; CPU's own stream is left where it was.
    """
    if torch.Tag.nondeterministic_seeded not in op.tags:
        yield
        return
    lent = []
    for i, value in enumerate(values):
        if isinstance(value, torch.Generator) and value.device.type == _DEVICE_TYPE:
            cpu_generator = torch.Generator()
            cpu_generator.set_state(value.get_state())
            values[i] = cpu_generator
            lent.append((value, cpu_generator))
    index = (device.index or 0) if device.type == _DEVICE_TYPE else 0
    mydev_default = _C._default_generator(index)
    cpu_state = torch.default_generator.get_state()
    torch.default_generator.set_state(mydev_default.get_state())
    try:
        yield
    finally:
        mydev_default.set_state(torch.default_generator.get_state())
        torch.default_generator.set_state(cpu_state)
        for mydev_generator, cpu_generator in lent:
            mydev_generator.set_state(cpu_generator.get_state())


# --------------------------------------------------------------------------- the fallback


def run_on_cpu(
    op: torch._ops.OpOverload, args: tuple, kwargs: dict, name: str | None = None
) -> Any:
    """Run ``op`` on CPU copies of the mydev arguments and bring the results back.

    ``name`` is the op counted in ``fallback_stats`` (``op_name(op)`` by default); the
    explicit registrations pass the op they stand in for.
    """
    name = name or op_name(op)
    _record(name)
    schema = op._schema
    values = _bind(schema, args, kwargs)
    device = _target_device(values)
    to_cpu = _ToCpu([t for value in values for t in _tensors(value)])
    cpu_values = [to_cpu(value) for value in values]
    with _mydev_random(op, cpu_values, device):
        cpu_args, cpu_kwargs = _unbind(schema, cpu_values)
        result = op(*cpu_args, **cpu_kwargs)
    for argument, value, cpu_value in zip(schema.arguments, values, cpu_values, strict=True):
        if value is not _MISSING and _is_written(argument, name):
            _write_back(value, cpu_value)
    return _results(schema, result, values, to_cpu, device)


def _results(
    schema: torch._C.FunctionSchema,
    result: Any,
    values: list[Any],
    to_cpu: _ToCpu,
    device: torch.device,
) -> Any:
    """Map the CPU op's returns: written aliases to the original argument, the rest moved."""
    returns = schema.returns
    if not returns:
        return result
    outs = (result,) if len(returns) == 1 else tuple(result)
    mapped = []
    for ret, out in zip(returns, outs, strict=True):
        if ret.alias_info is not None:
            mapped.append(_aliased_argument(schema, values, ret.alias_info.before_set))
        else:
            mapped.append(_result(out, to_cpu, device))
    return mapped[0] if len(returns) == 1 else tuple(mapped)


def _aliased_argument(schema: torch._C.FunctionSchema, values: list[Any], alias_set: set) -> Any:
    for argument, value in zip(schema.arguments, values, strict=True):
        if argument.alias_info is not None and argument.alias_info.before_set & alias_set:
            return value
    raise RuntimeError(f"mydev fallback: no argument of {schema} is the alias set {alias_set}")


def cpu_fallback(op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
    """The boxed PrivateUse1 fallback: ``run_on_cpu``, except for view ops, which raise.

    Views are ops returning an alias they do not write, and in-place metadata ops (tagged
    ``inplace_view``: ``t_``, ``squeeze_``, …), whose CPU run would leave the mydev tensor's
    sizes and strides as they were.
    """
    if returns_view(op._schema) or torch.Tag.inplace_view in op.tags:
        raise RuntimeError(
            f"mydev: {op_name(op)} is a view op with no mydev kernel; the CPU fallback cannot "
            "run it because a CPU result would not alias the mydev input. Register a mydev "
            "kernel for it (see docs/extending.md)."
        )
    return run_on_cpu(op, args, kwargs)


# ---------------------------------------------------- ops a boxed fallback never receives


def convolution_overrideable(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    transposed: bool,
    output_padding: list[int],
    groups: int,
) -> torch.Tensor:
    """aten::convolution_overrideable: ``aten::convolution`` on CPU copies.

    ``aten::_convolution`` sends every backend it does not know here, and the default
    kernel (CompositeExplicitAutograd) raises, so the boxed fallback never sees it.
    """
    call = (input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    return run_on_cpu(
        torch.ops.aten.convolution.default, call, {}, "aten::convolution_overrideable"
    )


def convolution_backward_overrideable(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    weight: torch.Tensor,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    transposed: bool,
    output_padding: list[int],
    groups: int,
    output_mask: list[bool],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """aten::convolution_backward_overrideable: ``aten::convolution_backward`` on CPU copies.

    The overrideable schema has no ``bias_sizes``: the bias has one entry per output channel
    (``weight.size(0)``, or ``weight.size(1) * groups`` when transposed).
    """
    channels = weight.shape[1] * groups if transposed else weight.shape[0]
    bias_sizes = [channels] if output_mask[2] else None
    call = (
        grad_output,
        input,
        weight,
        bias_sizes,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        output_mask,
    )
    return run_on_cpu(
        torch.ops.aten.convolution_backward.default,
        call,
        {},
        "aten::convolution_backward_overrideable",
    )


EXPLICIT: dict[str, Callable] = {
    "convolution_overrideable": convolution_overrideable,
    "convolution_backward_overrideable": convolution_backward_overrideable,
}

_libraries: list[torch.library.Library] = []


def register() -> None:
    """Register the boxed fallback and the ``EXPLICIT`` kernels for PrivateUse1 (once)."""
    if _libraries:
        return
    boxed = torch.library.Library("_", "IMPL")
    boxed.fallback(cpu_fallback, "PrivateUse1")
    explicit = torch.library.Library("aten", "IMPL")
    for op, fn in EXPLICIT.items():
        explicit.impl(op, fn, "PrivateUse1")
    _libraries.extend((boxed, explicit))
