"""Structured ops' functional overloads on mydev: CPU's functional kernel, CPU's layout.

A structured op with no mydev kernel (``exp``, ``sin``, ``maximum``, ``atan2``, ``mm``, ...)
has a generated CompositeExplicitAutogradNonFunctional kernel: the op's meta function on
the mydev tensors decides the output's sizes and strides, the output is allocated on mydev
and the op's ``out=`` overload runs over it. mydev registers each such functional overload
(``structured_functional_ops``) to run CPU's functional kernel instead (``fallback.run_on_cpu``
in Python, the stub's plain path in C++: CPU aliases of the arguments, the new result
adopted as mydev memory, counted in ``fallback_stats`` under the functional overload's name).

Two reasons. Speed: the composite's meta function, the mydev ``out=`` allocation and the
``out=`` overload's own trip through the fallback cost about a third of a small call, and
CPU's functional kernel does the same work once. Layouts: that meta function is
TensorIterator's build, and ``TensorIteratorBase::compute_types`` replaces an input whose
dtype is not the common dtype by a cast temporary only when the common device is CPU
(``op.tensor().to(common_dtype_)``, laid out with ``preserve_format``); on any other device it
reads the input as it is, as CUDA does. A temporary has the input's strides when the input
is non-overlapping and dense, and ``infer_dense_strides`` otherwise, so the two builds give
other output strides for a non-dense input of another dtype: ``torch.exp`` of an int32
``as_strided((2, 1, 3, 3, 1), (72, 1, 12, 2, 2))`` is ``(9, 9, 3, 1, 1)`` on CPU and was
``(9, 1, 3, 1, 1)`` through the composite (``torch_mydev_rules.iterator.explain`` with
``cpu=True`` / ``cpu=False`` shows both).

The composite still runs where it is the point, for calls whose mydev tensors are all
non-overlapping and dense (where no layout can differ):

- when the op's ``out=`` overload (``out_overload``) has a mydev kernel of its own (one a
  user registered with ``torch.library``), the composite calls it. That is read at each
  call, so a kernel registered later is used at once;
- when a mydev tensor argument holds at least ``_C._COMPOSITE_BYTES`` (1 MiB): mydev's
  allocator keeps freed blocks for reuse, while CPU's functional kernel would take its
  result from CPU's allocator, whose large blocks are new pages each time (``sin`` of 16M
  float32 elements spent two thirds of its time faulting them in). At that size the
  composite's extra steps cost nothing measurable.

Either way the ``out=`` overload is what falls back, and what ``fallback_stats`` counts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch._C import DispatchKey

from torch_mydev import _C
from torch_mydev._names import DEVICE
from torch_mydev.ops.fallback import schema as fs
from torch_mydev_rules.layout import is_non_overlapping_and_dense

__all__ = ["all_dense", "kernel_for", "out_overload", "structured_functional_ops"]

_COMPOSITE = DispatchKey.CompositeExplicitAutogradNonFunctional
_has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
_COMPOSITE_BYTES: int = _C._COMPOSITE_BYTES
_Tensor = torch.Tensor


def _mydev_tensors(values: Any) -> Iterator[torch.Tensor]:
    """The mydev tensors among ``values`` and inside lists in them."""
    for value in values:
        if isinstance(value, _Tensor):
            if value.device.type == DEVICE:
                yield value
        elif isinstance(value, (list, tuple)):
            yield from _mydev_tensors(value)


def all_dense(values: Any) -> bool:
    """Whether every mydev tensor among ``values`` (and inside lists in them) is
    non-overlapping and dense: then CPU's cast temporaries keep its strides."""
    return all(
        t.is_contiguous() or is_non_overlapping_and_dense(t.shape, t.stride())
        for t in _mydev_tensors(values)
    )


def _large(values: Any) -> bool:
    """Whether a mydev tensor among ``values`` (and inside lists in them) holds at least
    ``_COMPOSITE_BYTES`` of elements."""
    return any(t.numel() * t.itemsize >= _COMPOSITE_BYTES for t in _mydev_tensors(values))


def structured_functional_ops(
    is_structured: Callable[[str], bool], skip: set[str]
) -> list[torch._ops.OpOverload]:
    """aten functional overloads of structured ops, which mydev registers (``kernel_for``):
    a CompositeExplicitAutogradNonFunctional kernel, a CPU kernel, no
    PrivateUse1 kernel, no trailing ``_`` (in-place ops write ``self``'s own layout), and
    ``is_structured`` (``boxed._structured``); ``skip`` holds qualified names
    (``"aten::sqrt"``) registered otherwise."""
    mydev, cpu = fs.kernels_for("PrivateUse1"), fs.kernels_for("CPU")
    non_functional = fs.kernels_for("CompositeExplicitAutogradNonFunctional")
    found = []
    for packet_name in torch._C._dispatch_get_all_op_names():
        if not packet_name.startswith("aten::") or packet_name in skip:
            continue
        name, _, overload = packet_name.removeprefix("aten::").partition(".")
        if name.endswith("_") or packet_name in mydev:
            continue
        if not (
            packet_name in non_functional and packet_name in cpu and is_structured(packet_name)
        ):
            continue
        found.append(getattr(getattr(torch.ops.aten, name), overload or "default"))
    return found


@functools.cache
def out_overload(op: torch._ops.OpOverload) -> str | None:
    """The qualified name of the ``out=`` overload ``op``'s generated composite calls: the
    one of its packet whose arguments other than the ``out=`` ones are ``op``'s, by name and
    type (``aten::add.Tensor`` -> ``aten::add.out``, ``aten::pow.Tensor_Scalar`` ->
    ``aten::pow.Tensor_Scalar_out``); None when there is none."""
    wanted = [(a.name, str(a.type)) for a in op._schema.arguments]
    packet = getattr(torch.ops.aten, op._schema.name.removeprefix("aten::"))
    for overload in packet.overloads():
        schema = getattr(packet, overload)._schema
        if any(a.is_out for a in schema.arguments) and wanted == [
            (a.name, str(a.type)) for a in schema.arguments if not a.is_out
        ]:
            return f"{schema.name}.{schema.overload_name}"
    return None


def kernel_for(op: torch._ops.OpOverload, run_on_cpu: Callable) -> Callable:
    """The PrivateUse1 kernel of the structured functional overload ``op`` (Python's side;
    the stub's ``_structured_kernel`` runs its plain calls): CPU's functional kernel
    (``run_on_cpu(op, args, kwargs)``), or the generated composite when every mydev tensor
    argument is non-overlapping and dense and either ``op``'s ``out=`` overload has a mydev
    kernel or one of them holds at least ``_COMPOSITE_BYTES`` (the module's docstring).

    Always CPU's kernel when a Python number stands in a ``Tensor`` argument: a wrapped
    number (``x % 4`` reaches ``remainder.Tensor`` with the 4 wrapped by
    ``remainder.Scalar``) comes to Python as a number, which the composite cannot take
    back; ``run_on_cpu`` runs the overload it fits (``remainder.Scalar``, as
    ``fallback.schema.resolve`` picks), the one the caller called.
    """
    call_composite = op._op_dk

    def kernel(*args: Any, **kwargs: Any) -> Any:
        values = (*args, *kwargs.values())
        out = out_overload(op)
        if (
            (_large(values) or (out is not None and _has_kernel(out, "PrivateUse1")))
            and fs.resolve(op, args, kwargs).op is op
            and all_dense(values)
        ):
            return call_composite(_COMPOSITE, *args, **kwargs)
        return run_on_cpu(op, args, kwargs)

    kernel.__name__ = kernel.__qualname__ = f"structured_{op.__name__.replace('.', '_')}"
    return kernel
