"""The CPU fallback: an op with no mydev kernel runs on CPU over mydev memory.

Registered as PrivateUse1's boxed fallback (``Library("_", "IMPL").fallback``), it receives
every op that ``registry.KERNELS`` and the stub's view table leave out, as
``(op, *args, **kwargs)``. What it decides, in order (details in docs/fallback.md):

1. the overload: the one actually called (``fallback.schema.resolve``: torch hands
   ``copysign.out`` for a ``copysign.Scalar_out`` call);
2. views are refused: an op whose schema returns an alias of an input that it does not
   write (``Tensor(a)``), or that changes a tensor's metadata in place (``inplace_view``);
3. devices, checked as CUDA does before anything runs (``fallback.devices``): mydev tensors
   and 0-dim CPU inputs only;
4. arguments: every mydev tensor becomes a CPU alias of its bytes (``_C._cpu_alias``; one
   CPU storage per mydev storage), or a CPU copy when ``COPY_ENV`` is set or an ``out=``
   tensor must grow (``fallback.copy``); ``device=mydev`` becomes ``cpu``;
5. the op runs on CPU through the dispatcher (below autograd, so nothing is recorded
   twice); a random op draws from its mydev generator (``fallback.random``);
6. written arguments (``Tensor(a!)``) end with CPU's values, sizes and strides; a return
   that aliases a written argument is the original mydev tensor; any other tensor is
   copied once to mydev with its CPU sizes and strides.

``convolution_overrideable`` and ``convolution_backward_overrideable`` never reach a boxed
fallback (their CompositeExplicitAutograd defaults raise for other backends), so they are
registered here explicitly and run ``aten::convolution`` / ``aten::convolution_backward``
through the same machinery. This mirrors the CPU fallback of PyTorch's OpenReg backend
(``torch_openreg/csrc/aten/native/Extra.cpp``) and ``at::native::cpu_fallback``
(aten/src/ATen/native/CPUFallback.cpp).
"""

from __future__ import annotations

import os
import sys
import threading
import types
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

from torch_mydev import _C
from torch_mydev._names import DEVICE
from torch_mydev.ops.fallback import copy as fc
from torch_mydev.ops.fallback import devices as fd
from torch_mydev.ops.fallback import random as fr
from torch_mydev.ops.fallback import schema as fs
from torch_mydev.ops.fallback import sdpa as fallback_sdpa
from torch_mydev.ops.fallback import structured as fst
from torch_mydev.ops.fallback.adopt import may_adopt
from torch_mydev.ops.fallback.schema import op_name, returns_view

__all__ = [
    "COPY_ENV",
    "WARN_ENV",
    "FallbackWarning",
    "cpu_fallback",
    "fallback_stats",
    "op_name",
    "register",
    "reset_fallback_stats",
    "returns_view",
    "run_on_cpu",
    "zero_copy",
]

WARN_ENV = "TORCH_MYDEV_FALLBACK_WARN"
COPY_ENV = "TORCH_MYDEV_FALLBACK_COPY"
_MISSING = fs.MISSING

# The zero-copy path; False (or TORCH_MYDEV_FALLBACK_COPY=1 at import) copies every mydev
# argument to CPU and back, the old way: for benchmarking and debugging only. Set it as an
# attribute of this module (``fallback.zero_copy = False``): the stub's C++ path reads it too.
zero_copy: bool = os.environ.get(COPY_ENV) != "1"


class _Module(types.ModuleType):
    """This module's type: assigning ``zero_copy`` tells the stub's C++ path as well."""

    @property
    def zero_copy(self) -> bool:
        return self.__dict__["zero_copy"]

    @zero_copy.setter
    def zero_copy(self, value: bool) -> None:
        self.__dict__["zero_copy"] = value
        _C._fallback_zero_copy(bool(value))


sys.modules[__name__].__class__ = _Module


class FallbackWarning(UserWarning):
    """Warned once per op (while ``TORCH_MYDEV_FALLBACK_WARN=1``) when it runs on CPU."""


# ---------------------------------------------------------------------------- statistics

# os.environ's own bytes mapping: what ``os.environ`` reads, without encoding the key on
# each call (a third of a small fallback op's bookkeeping); os.environ updates it on every
# change, so the variable is still read at each call.
_environ_bytes: Any = getattr(os.environ, "_data", None)
_WARN_KEY: Any = os.fsencode(WARN_ENV)
_WARN_ON: Any = b"1"
if not isinstance(_environ_bytes, dict) or not all(type(k) is bytes for k in _environ_bytes):
    _environ_bytes, _WARN_KEY, _WARN_ON = os.environ, WARN_ENV, "1"  # not POSIX's layout
_stats: Counter[str] = Counter()
_warned: set[str] = set()
_lock = threading.Lock()


def fallback_stats() -> dict[str, int]:
    """How many times each op ran on CPU since start or ``reset_fallback_stats``.

    Keys are qualified overload names as in ``op_name`` (``"aten::sin.out"``), sorted: the
    calls Python ran and those the stub's C++ path ran (``csrc_stub/ops/fallback.cpp``).
    """
    with _lock:
        counts = _stats + Counter(_C._fallback_counts())
        return dict(sorted(counts.items()))


def reset_fallback_stats() -> None:
    """Forget the counts, and which ops were warned about already."""
    with _lock:
        _stats.clear()
        _warned.clear()
        _C._fallback_reset_counts()


def record_call(name: str) -> None:
    with _lock:
        _stats[name] += 1
    if name in _warned or _environ_bytes.get(_WARN_KEY) != _WARN_ON:
        return
    with _lock:
        warn = name not in _warned
        _warned.add(name)
    if warn:
        warnings.warn(
            f"mydev has no kernel for {name}; it runs on CPU "
            f"(this warning is shown once per op; unset {WARN_ENV} to silence it)",
            FallbackWarning,
            stacklevel=4,
        )


# --------------------------------------------------------------------------- the fallback


def _move(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A copy of ``t`` on ``device`` with its sizes and strides (``fallback.copy.move``)."""
    return fc.move(t, device)


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for t in value if isinstance(t, torch.Tensor)]
    return []


def target_device(values: list[Any]) -> torch.device:
    """Where new results go: the ``device`` argument, else the first mydev tensor's device."""
    for value in values:
        if isinstance(value, torch.device):
            return value
    for value in values:
        for t in _tensors(value):
            if t.device.type == DEVICE:
                return t.device
    return torch.device(DEVICE, _C._current_device())


def run_on_cpu(
    op: torch._ops.OpOverload,
    args: tuple,
    kwargs: dict,
    name: str | None = None,
    count: bool = True,
) -> Any:
    """Run ``op`` on CPU over the mydev arguments' memory and return mydev results.

    ``name`` is the op counted in ``fallback_stats`` (``op_name`` of the overload called,
    by default); the explicit registrations pass the op they stand in for. A native op
    whose loop is still compiling runs here uncounted (``count=False``): it has a kernel.
    """
    op_info = fs.resolve(op, args, kwargs)
    if count:
        record_call(name or op_info.name)
    values = fs.bind(op_info, args, kwargs)
    fd.check_call(op_info.name, op_info.names, values, op_info.written)
    device = target_device(values)
    if op_info.random:
        op_info, values = fr.with_generator(op_info, values)
    return _run(op_info, values, device, fc.Aliases if zero_copy else fc.Copies)


def _run(op_info: fs.OpInfo, values: list[Any], device: torch.device, kind: type) -> Any:
    for written, value in zip(op_info.written, values, strict=False):
        if written and value is not _MISSING:
            fc.materialize(value)  # before any alias is made (ops/fallback/copy.py)
    to_cpu = kind([t for value in values for t in _tensors(value)])
    cpu_values = [to_cpu(value) for value in values]
    special = fr.SPECIAL.get(op_info.name) if op_info.random else None

    def call() -> Any:
        if special is not None:
            return special(*[None if v is _MISSING else v for v in cpu_values])
        cpu_args, cpu_kwargs = fs.unbind(op_info, cpu_values)
        return op_info.cpu_kernel(*cpu_args, **cpu_kwargs)

    # A seeded op gets a mydev generator's state through its ``generator`` argument, or
    # through its special form's (fr.SPECIAL); one with neither (``_fused_sdp_choice``,
    # attention kernels with dropout) runs as CPU runs it, on CPU's default generator.
    lends = op_info.random and (op_info.generator_index is not None or special is not None)
    result = fr.lend(op_info, cpu_values, device, call) if lends else call()
    for written, value, cpu_value in zip(op_info.written, values, cpu_values, strict=False):
        if written and value is not _MISSING:
            fc.write_back(value, cpu_value)
    # New results of CPU's own kernel over aliases may be adopted (``fallback.adopt``), and
    # those of a random op's special form (new tensors of CPU's kernels, fr.SPECIAL).
    adopt = (
        isinstance(to_cpu, fc.Aliases)
        and (special is not None or op_info.cpu_kernel is op_info.op)
        and may_adopt(op_info.op)
    )
    return _results(op_info, result, values, to_cpu, device, adopt)


def _result(
    value: Any, to_cpu: fc.Copies, device: torch.device, adopt: bool, moved: dict[int, Any]
) -> Any:
    """A CPU op's return as the mydev value the call returns: an alias as its mydev tensor,
    a new CPU tensor adopted (``adopt``; never a tensor the call was passed) or copied, one
    tensor returned twice as one mydev tensor (``moved``)."""
    if isinstance(value, torch.Tensor):
        original = to_cpu.originals.get(id(value))
        if original is not None:  # the op returned one of its inputs itself
            return original
        if value.device.type != "cpu" or device.type == "cpu":
            return value
        found = moved.get(id(value))
        if found is None:
            if adopt and id(value) not in to_cpu.passed:
                index = device.index if device.index is not None else _C._current_device()
                found = _C._adopt(value, index)
            if found is None:
                found = fc.to_mydev(value, device)
            moved[id(value)] = found
        return found
    if isinstance(value, (list, tuple)):
        return type(value)(_result(item, to_cpu, device, adopt, moved) for item in value)
    return value


def _results(
    op_info: fs.OpInfo,
    result: Any,
    values: list[Any],
    to_cpu: fc.Copies,
    device: torch.device,
    adopt: bool,
) -> Any:
    """Map the CPU op's returns: written aliases to the original argument, the rest moved."""
    n = len(op_info.return_alias)
    if n == 0:
        return result
    outs = (result,) if n == 1 else tuple(result)
    moved: dict[int, Any] = {}
    mapped = []
    for alias, out in zip(op_info.return_alias, outs, strict=True):
        if alias is not None:
            mapped.append(values[alias])
        else:
            mapped.append(_result(out, to_cpu, device, adopt, moved))
    return mapped[0] if n == 1 else tuple(mapped)


def cpu_fallback(op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> Any:
    """The boxed PrivateUse1 fallback: ``run_on_cpu``, except for view ops, which raise.

    Views are ops returning an alias they do not write, and in-place metadata ops (tagged
    ``inplace_view``: ``t_``, ``squeeze_``, …), whose CPU run would leave the mydev tensor's
    sizes and strides as they were.
    """
    if fs.info(op).is_view:
        raise RuntimeError(
            f"mydev: {op_name(op)} is a view op with no mydev kernel; the CPU fallback cannot "
            "run it because a CPU result would not alias the mydev input. Register a mydev "
            "kernel for it (see docs/extending.md)."
        )
    return run_on_cpu(op, args, kwargs)


# ---------------------------------------------------- ops a boxed fallback never receives


def convolution_overrideable(*call: Any) -> torch.Tensor:
    """aten::convolution_overrideable: ``aten::convolution`` on CPU copies, with the same
    arguments (``input, weight, bias, stride, padding, dilation, transposed,
    output_padding, groups``).

    ``aten::_convolution`` sends every backend it does not know here, and the default
    kernel (CompositeExplicitAutograd) raises, so the boxed fallback never sees it.
    """
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
CPU_KERNEL_OPS: list[torch._ops.OpOverload] = []  # registered by ``register``
STRUCTURED_OPS: list[torch._ops.OpOverload] = []  # ``fallback.structured``
_STRUCTURED: set[torch._ops.OpOverload] = set()  # the same, to look up

# Structured ops whose meta function resizes the output after building it (Loss.cpp:
# ``build_borrowing_binary_op`` then ``maybe_get_output().resize_({})`` for a reduction).
# Their generated CompositeExplicitAutogradNonFunctional kernel runs that meta on mydev and
# calls ``out=`` with the 0-dim result; CPU's ``out`` kernel runs the meta again, resizes
# that one-element output to the input's shape and warns ("An output with one or more
# elements was resized ..."), which CPU's functional call never does. On mydev the
# functional overload runs CPU's functional kernel instead (one element copied back).
FUNCTIONAL_ON_CPU: tuple[str, ...] = ("mse_loss", "smooth_l1_loss")

# Structured ops whose meta function warns: the composite runs it on mydev and CPU's ``out=``
# kernel runs it again, so the warning came twice where CPU's functional call gives it once.
# ``index.Tensor``'s meta (IndexingUtils.h ``expandTensors``) warns "indexing with dtype
# torch.uint8 is now deprecated" for a uint8 mask (``x[mask_uint8]``) and turns the mask into
# indices with ``nonzero`` (a second op on mydev). Their functional overload runs CPU's.
META_WARNS_ON_CPU: tuple[str, ...] = ("index.Tensor",)


def _overload(name: str) -> torch._ops.OpOverload:
    """``"lerp.Scalar"`` -> ``torch.ops.aten.lerp.Scalar``; no overload name: ``default``."""
    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, packet), overload or "default")


def _structured(packet_name: str, cpu: frozenset[str], explicit: frozenset[str]) -> bool:
    """Whether ``packet_name`` is the functional or in-place variant of a structured op.

    Its packet (``sin``) or, for ``sin_``, the base op's has an ``out=`` overload with a CPU
    kernel and no CompositeExplicitAutograd one: the structured kernel. The generated
    CompositeExplicitAutogradNonFunctional kernel of such an op allocates the output on
    mydev and calls that ``out`` overload, which reaches the fallback and runs CPU's kernel
    over it: zero copies, nothing to register. ``cpu`` and ``explicit`` are
    ``fs.kernels_for("CPU")`` and ``fs.kernels_for("CompositeExplicitAutograd")``.
    """
    name = packet_name.removeprefix("aten::").partition(".")[0]
    for base in {name, name.rstrip("_")}:
        packet = getattr(torch.ops.aten, base, None)
        if packet is None:
            continue
        for overload in packet.overloads():
            schema = getattr(packet, overload)._schema
            qualified = f"{schema.name}.{schema.overload_name}" if schema.overload_name else ""
            if (
                qualified
                and any(a.is_out for a in schema.arguments)
                and qualified in cpu
                and qualified not in explicit
            ):
                return True
    return False


def cpu_kernel_ops() -> list[torch._ops.OpOverload]:
    """aten overloads with a CPU kernel that PrivateUse1 would run as a composite kernel
    instead of reaching the fallback.

    The dispatcher prefers a CompositeExplicitAutograd(NonFunctional) kernel to a backend
    fallback, so ``native_layer_norm`` on mydev would run ``math_native_layer_norm``
    (batch_norm + addcmul) and differ from CPU's kernel in the last bits, and
    ``pixel_unshuffle`` would run ``math_pixel_unshuffle`` (a zero-element result gets other
    strides than CPU's). Listed from the dispatcher itself (torch 2.13:
    CompositeExplicitAutograd: ``addr``, ``all.dims``, ``any.dims``, ``native_group_norm``,
    ``native_layer_norm`` and their ``out`` forms; CompositeExplicitAutogradNonFunctional,
    structured ops left out (``_structured``): ``pixel_shuffle``, ``pixel_unshuffle``);
    each is registered to run its CPU kernel through the fallback.
    """
    cpu, explicit = fs.kernels_for("CPU"), fs.kernels_for("CompositeExplicitAutograd")
    mydev = fs.kernels_for("PrivateUse1")
    non_functional = fs.kernels_for("CompositeExplicitAutogradNonFunctional")
    found = []
    for packet_name in torch._C._dispatch_get_all_op_names():
        if not packet_name.startswith("aten::"):
            continue
        if packet_name not in cpu or packet_name in mydev:
            continue
        if packet_name not in explicit and not (
            packet_name in non_functional and not _structured(packet_name, cpu, explicit)
        ):
            continue
        name, _, overload = packet_name.removeprefix("aten::").partition(".")
        found.append(getattr(getattr(torch.ops.aten, name), overload or "default"))
    return found


# The ``EXPLICIT`` ops' CPU kernels for the stub's C++ path: (the op run instead, whether its
# arguments gain ``bias_sizes`` after ``weight``), as the functions above call them.
EXPLICIT_TARGETS: dict[str, tuple[str, bool]] = {
    "aten::convolution_overrideable": ("aten::convolution", False),
    "aten::convolution_backward_overrideable": ("aten::convolution_backward", True),
}


def fast_path_facts(
    op: torch._ops.OpOverload,
) -> tuple[str, tuple[bool, ...], str | None, bool, tuple[bool, ...], str | None] | None:
    """What the stub's C++ path (``csrc_stub/ops/fallback.cpp``) needs to run ``op``'s plain
    calls: the name it is counted under, which arguments it writes, for an ``EXPLICIT``
    op the op whose CPU kernel runs instead (``EXPLICIT_TARGETS``), which arguments may
    be CPU tensors (``fallback.devices.CPU_ALLOWED``, as on CUDA), and for a structured
    functional op the ``out=`` overload whose own mydev kernel takes its dense calls
    (``fallback.structured``); None when every call must run here in Python: a view op, a
    random op (its generator), one that runs another CPU kernel (``fallback.rnn``), or an
    op outside ``aten``."""
    op_info = fs.info(op)
    if op_info.is_view or op_info.random or op_info.cpu_kernel is not op or op.namespace != "aten":
        return None
    target, bias_sizes = EXPLICIT_TARGETS.get(op_info.name, (None, False))
    allowed = fd.CPU_ALLOWED.get(op_info.name, frozenset())
    cpu_allowed = tuple(name in allowed for name in op_info.names)
    out = fst.out_overload(op) if op in _STRUCTURED else None
    return op_info.name, op_info.written, target, bias_sizes, cpu_allowed, out


def _to_mydev(t: torch.Tensor, index: int) -> torch.Tensor:
    return fc.to_mydev(t, torch.device(DEVICE, index))


# Python's kernels run on this backend key, which no tensor carries: the stub's C++ kernels
# on PrivateUse1 run plain calls themselves and redispatch the others here.
PYTHON_KEY = "PrivateUse3"


def register() -> None:
    """Register the boxed fallback, the ``EXPLICIT`` kernels, the ``cpu_kernel_ops``, the
    structured functional ops (``fallback.structured``) and the attention kernels of
    ``fallback.sdpa`` for PrivateUse1 (once)."""
    if _libraries:
        return
    boxed = torch.library.Library("_", "IMPL")
    boxed.fallback(cpu_fallback, PYTHON_KEY)
    _C._fallback_install(fast_path_facts, _to_mydev, fc.write_back)
    _C._fallback_zero_copy(zero_copy)
    explicit = torch.library.Library("aten", "IMPL")
    for op, fn in EXPLICIT.items():
        explicit.impl(op, fn, PYTHON_KEY)
        _C._fallback_kernel(op)
    CPU_KERNEL_OPS[:] = cpu_kernel_ops()
    CPU_KERNEL_OPS.extend(_overload(name) for name in (*FUNCTIONAL_ON_CPU, *META_WARNS_ON_CPU))
    for op in CPU_KERNEL_OPS:
        name = op_name(op).removeprefix("aten::")
        explicit.impl(name, fs.op_kernel(op, run_on_cpu, "cpu_kernel"), PYTHON_KEY)
        _C._fallback_kernel(name)
    # structured functional ops: CPU's functional kernel (fallback.structured)
    cpu, composite = fs.kernels_for("CPU"), fs.kernels_for("CompositeExplicitAutograd")
    STRUCTURED_OPS[:] = fst.structured_functional_ops(
        lambda name: _structured(name, cpu, composite), {op_name(op) for op in CPU_KERNEL_OPS}
    )
    _STRUCTURED.update(STRUCTURED_OPS)
    for op in STRUCTURED_OPS:
        name = op_name(op).removeprefix("aten::")
        explicit.impl(name, fst.kernel_for(op, run_on_cpu), PYTHON_KEY)
        _C._structured_kernel(name)
    fallback_sdpa.register(explicit, PYTHON_KEY)  # and its plain calls in the stub
    _C._native_dropout_kernel()  # its plain calls in the stub (csrc_stub/ops/random.cpp)
    _libraries.extend((boxed, explicit))
