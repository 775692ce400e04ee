"""Structured ops' functional overloads on mydev: CPU's output layout for non-dense inputs.

A structured op with no mydev kernel (``exp``, ``sin``, ``maximum``, ``atan2``, ...) runs
on mydev as its generated CompositeExplicitAutogradNonFunctional kernel: the op's meta
function on the mydev tensors decides the output's sizes and strides, the output is
allocated on mydev and the ``out=`` overload runs CPU's kernel over it (``fallback.py``).
That meta function is TensorIterator's build, and ``TensorIteratorBase::compute_types``
replaces an input whose dtype is not the common dtype by a cast temporary only when the
common device is CPU (``op.tensor().to(common_dtype_)``, laid out with ``preserve_format``);
on any other device it reads the input as it is, as CUDA does. A temporary has the input's
strides when the input is non-overlapping and dense, and ``infer_dense_strides`` otherwise,
so the two builds give other output strides for a non-dense input of another dtype:
``torch.exp`` of an int32 ``as_strided((2, 1, 3, 3, 1), (72, 1, 12, 2, 2))`` is
``(9, 9, 3, 1, 1)`` on CPU and was ``(9, 1, 3, 1, 1)`` on mydev
(``torch_mydev_rules.iterator.explain`` with ``cpu=True`` / ``cpu=False`` shows both).

mydev's layouts are CPU's, so each such functional overload is registered here: a call with
a mydev tensor argument that is not non-overlapping and dense runs CPU's functional kernel
(``fallback.run_on_cpu``: its result is adopted, counted in ``fallback_stats`` under the
functional overload's name); any other call runs the generated composite as before (no
difference is possible: a dense input's temporary has its strides), counted as the
``out=`` overload. The list comes from the dispatcher (``structured_functional_ops``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._C import DispatchKey

from torch_mydev._names import DEVICE
from torch_mydev.ops.fallback import schema as fs
from torch_mydev_rules.layout import is_non_overlapping_and_dense

__all__ = ["all_dense", "kernel_for", "structured_functional_ops"]

_COMPOSITE = DispatchKey.CompositeExplicitAutogradNonFunctional
_Tensor = torch.Tensor


def all_dense(values: Any) -> bool:
    """Whether every mydev tensor among ``values`` (and inside lists in them) is
    non-overlapping and dense: then CPU's cast temporaries keep its strides."""
    for value in values:
        if isinstance(value, _Tensor):
            if (
                value.device.type == DEVICE
                and not value.is_contiguous()
                and not is_non_overlapping_and_dense(value.shape, value.stride())
            ):
                return False
        elif isinstance(value, (list, tuple)) and not all_dense(value):
            return False
    return True


def structured_functional_ops(
    is_structured: Callable[[str], bool], skip: set[str]
) -> list[torch._ops.OpOverload]:
    """aten functional overloads that PrivateUse1 runs as their generated structured
    composite: a CompositeExplicitAutogradNonFunctional kernel, a CPU kernel, no
    PrivateUse1 kernel, no trailing ``_`` (in-place ops write ``self``'s own layout), and
    ``is_structured`` (``boxed._structured``); ``skip`` holds qualified names
    (``"aten::sqrt"``) registered otherwise."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    found = []
    for packet_name in torch._C._dispatch_get_all_op_names():
        if not packet_name.startswith("aten::") or packet_name in skip:
            continue
        name, _, overload = packet_name.removeprefix("aten::").partition(".")
        if name.endswith("_") or has(packet_name, "PrivateUse1"):
            continue
        if not (
            has(packet_name, "CompositeExplicitAutogradNonFunctional")
            and has(packet_name, "CPU")
            and is_structured(packet_name)
        ):
            continue
        found.append(getattr(getattr(torch.ops.aten, name), overload or "default"))
    return found


def kernel_for(op: torch._ops.OpOverload, run_on_cpu: Callable) -> Callable:
    """The PrivateUse1 kernel of the structured functional overload ``op``: CPU's
    functional kernel (``run_on_cpu(op, args, kwargs)``) when a mydev tensor argument is
    not non-overlapping and dense, else the generated composite.

    Also CPU's kernel when a Python number stands in a ``Tensor`` argument: a wrapped
    number (``x % 4`` reaches ``remainder.Tensor`` with the 4 wrapped by
    ``remainder.Scalar``) comes to Python as a number, which the composite cannot take
    back; ``run_on_cpu`` runs the overload it fits (``remainder.Scalar``, as
    ``fallback.schema.resolve`` picks), the one the caller called.
    """
    call_composite = op._op_dk

    def kernel(*args: Any, **kwargs: Any) -> Any:
        if fs.resolve(op, args, kwargs).op is op and all_dense(args) and all_dense(kwargs.values()):
            return call_composite(_COMPOSITE, *args, **kwargs)
        return run_on_cpu(op, args, kwargs)

    kernel.__name__ = kernel.__qualname__ = f"structured_{op.__name__.replace('.', '_')}"
    return kernel
