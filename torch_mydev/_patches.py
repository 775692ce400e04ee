"""Every assignment into torch's own modules, one function each (helpers share this file).

Each patch names the torch function it replaces and why; tests check that the patched
attribute still exists and that the original still behaves as the patch assumes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from torch_mydev._names import DEVICE


def _replace(owner: Any, name: str, make: Callable[[Any], Callable]) -> None:
    """Set ``owner.<name>`` to ``make(original)``, once. The replacement is marked
    ``_mydev_patched``, keeps ``_mydev_original`` (what the tests read to check that the
    original still behaves as the patch assumes) and the original's docstring; a second call
    leaves the patched attribute as it is."""
    original = getattr(owner, name)
    if getattr(original, "_mydev_patched", False):
        return
    replacement = make(original)
    replacement._mydev_patched = True  # type: ignore[attr-defined]
    replacement._mydev_original = original  # type: ignore[attr-defined]
    replacement.__doc__ = original.__doc__
    setattr(owner, name, replacement)


# ---- inductor (torch.compile): mydev runs inductor's CPU C++ backend -------------------------


def patch_scheduler_node_is_cpu() -> None:
    """``torch._inductor.scheduler.BaseSchedulerNode.is_cpu``: true for mydev nodes too.

    The scheduler asks ``is_cpu()`` to keep CPU C++ kernels out of the loop reordering and
    pointwise-for-reduction reindexing that only its SIMD (Triton) kernels handle; mydev
    kernels are those CPU C++ kernels, and backward graphs fail in
    ``Scheduler._try_reindex_pointwise_for_reduction`` without this.
    """
    from torch._inductor import scheduler

    def make(original: Any) -> Callable:
        def is_cpu(self: Any) -> bool:
            device = self.get_device()
            return device is not None and device.type in ("cpu", DEVICE)

        return is_cpu

    _replace(scheduler.BaseSchedulerNode, "is_cpu", make)


def patch_ir_is_cpu() -> None:
    """``torch._inductor.ir.is_cpu``: true for mydev IR nodes too.

    ``ir.Loops.has_large_inner_fn`` (from torch 2.14 through
    ``Loops.get_realize_opcount_threshold``) and ``StorageBox.has_exceeded_max_reads`` pick
    CPU's realize thresholds (``realize_cpu_opcount_threshold`` ...) by it, so mydev graphs
    fuse and realize where compiled CPU graphs do.
    """
    from torch._inductor import ir

    def make(original: Any) -> Callable:
        def is_cpu(x: Any) -> bool:
            return ir.get_device_type(x) in ("cpu", DEVICE)

        return is_cpu

    _replace(ir, "is_cpu", make)


def patch_cpp_device_to_aten() -> None:
    """``torch._inductor.codegen.cpp_utils.DEVICE_TO_ATEN``: mydev is ``at::kPrivateUse1``.

    The C++ wrapper (``cpp_wrapper=True``) names a buffer's device by this table
    (``CppWrapperCpu.codegen_device`` -> ``aoti_torch_device_type_privateuse1()``) and asserts
    for device types it lacks.
    """
    from torch._inductor.codegen import cpp_utils

    cpp_utils.DEVICE_TO_ATEN.setdefault(DEVICE, "at::kPrivateUse1")


def apply_inductor() -> None:
    """The inductor patches (called by ``torch_mydev.compile.backend.register``)."""
    patch_scheduler_node_is_cpu()
    patch_ir_is_cpu()
    patch_cpp_device_to_aten()


# ---- DLPack: a renamed PrivateUse1 device is DLPack's external device ------------------------


def patch_tensor_dlpack_device() -> None:
    """``torch.Tensor.__dlpack_device__``: mydev tensors are ``(kDLExtDev, index)``.

    torch 2.13 (``torch/_tensor.py`` ``Tensor.__dlpack_device__``) compares the device type
    with the string ``"privateuse1"``, which a renamed backend never equals, and raises
    ``ValueError: Unknown device type mydev for Dlpack``; ``torch.from_dlpack`` calls it first,
    so no mydev tensor could be exchanged. ``kDLExtDev`` is what torch's own C++ exporter
    (``at::toDLPack``) writes into a PrivateUse1 capsule and what its importer maps back to
    PrivateUse1, so the pair agrees with the capsule.
    """
    import torch
    from torch.utils.dlpack import DLDeviceType

    def make(original: Any) -> Callable:
        def __dlpack_device__(self: torch.Tensor) -> tuple[Any, int]:
            device = self.device
            if device.type == DEVICE and not torch.overrides.has_torch_function_unary(self):
                return (DLDeviceType.kDLExtDev, device.index if device.index is not None else 0)
            return original(self)

        return __dlpack_device__

    _replace(torch.Tensor, "__dlpack_device__", make)


# ---- backend metadata (csrc_stub/runtime/backend_meta.cpp) through deepcopy and fake tensors ---

_TORCH_BITS = ("conj", "neg")  # keys of get_tensor_metadata that are torch's, not the backend's


def copy_backend_meta(src: Any, dst: Any) -> None:
    """Give mydev tensor `dst` the backend flags of mydev tensor `src` (what torch 2.13 lacks:
    later torch copies them with ``torch._C._copy_backend_meta``); anything else: nothing."""
    import torch

    if src.device.type != DEVICE or dst.device.type != DEVICE:
        return
    flags = {k: v for k, v in torch._C._get_tensor_metadata(src).items() if k not in _TORCH_BITS}
    if flags:
        torch._C._set_tensor_metadata(dst, flags)


def patch_deepcopy_backend_meta() -> None:
    """``torch.Tensor.__deepcopy__`` and ``torch.nn.Parameter.__deepcopy__``: the copy of a
    mydev tensor keeps its backend flags.

    torch 2.13 makes the copy from a new storage (``new_empty([]).set_(...)``) or a
    ``clone``, which start without backend metadata, so deepcopy (``copy.deepcopy(model)``)
    dropped the flags that ``torch.save`` keeps.
    """
    import torch

    def make(original: Any) -> Callable:
        def __deepcopy__(self: Any, memo: dict) -> Any:
            result = original(self, memo)
            if isinstance(result, torch.Tensor):
                copy_backend_meta(self, result)
            return result

        return __deepcopy__

    for cls in (torch.Tensor, torch.nn.Parameter):  # each defines its own __deepcopy__
        _replace(cls, "__deepcopy__", make)


def patch_fake_tensor_backend_meta() -> None:
    """``torch._subclasses.fake_tensor.FakeTensorConverter.from_real_tensor``: the fake
    tensor of a mydev tensor has its backend flags.

    torch 2.13 builds the fake from a meta tensor and copies sizes, strides and autograd
    state, not backend metadata. As later torch does, the flags come from the real tensor,
    or from the tensor a ``FunctionalTensor`` wraps (the wrapper has none).
    """
    import torch
    from torch._subclasses.fake_tensor import FakeTensorConverter
    from torch._subclasses.functional_tensor import FunctionalTensor

    def make(original: Any) -> Callable:
        def from_real_tensor(self: Any, fake_mode: Any, t: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(self, fake_mode, t, *args, **kwargs)
            functional = isinstance(t, FunctionalTensor)
            copy_backend_meta(torch._from_functional_tensor(t.elem) if functional else t, out)
            return out

        return from_real_tensor

    _replace(FakeTensorConverter, "from_real_tensor", make)


def patch_backward_on_the_calling_thread() -> None:
    """``torch.autograd``'s ``_engine_run_backward`` (what ``Tensor.backward``,
    ``torch.autograd.backward`` and ``torch.autograd.grad`` call): a backward whose roots
    include a mydev tensor runs on the calling thread, as a CPU backward does, instead of
    on the engine's per-device worker thread (``set_multithreading_enabled(False)`` for
    that call).

    The engine gives every device but CPU (and meta, lazy) a worker thread, which suits a
    GPU: the thread only queues kernels. mydev's kernels run on the host, many on CPU's
    own kernels, whose OpenMP regions then start from two threads, the caller's in the
    forward and the worker's in the backward; libgomp gives each its own team, whose
    threads spin after each region, so on a machine with as many cores as threads the two
    teams take each other's cores: a small CNN's training step took 12 ms on two cores
    against 4.9 ms on one thread (CPU: 2.5 ms either way).
    """
    from torch import autograd

    def make(original: Callable) -> Callable:
        def _engine_run_backward(t_outputs: Any, *args: Any, **kwargs: Any) -> Any:
            if any(isinstance(t, torch.Tensor) and t.device.type == DEVICE for t in t_outputs):
                with autograd.set_multithreading_enabled(False):
                    return original(t_outputs, *args, **kwargs)
            return original(t_outputs, *args, **kwargs)

        return _engine_run_backward

    _replace(autograd, "_engine_run_backward", make)


def apply_runtime() -> None:
    """The runtime patches (called when ``torch.mydev`` is installed,
    ``torch_mydev.runtime.surface.install``)."""
    patch_tensor_dlpack_device()
    patch_deepcopy_backend_meta()
    patch_fake_tensor_backend_meta()
    patch_backward_on_the_calling_thread()


# ---- torch.distributed ----------------------------------------------------------------------


def patch_default_backend_type() -> None:
    """``torch.distributed.distributed_c10d._new_process_group_helper``: a group made with no
    backend on a mydev machine gets mydev's backend as its default backend type.

    With no backend (``init_process_group()``), torch 2.13 builds the group for the
    accelerator alone (``BackendConfig``: ``mydev:mydev``) but sets the group's default backend
    type to ``GLOO`` (``NCCL`` when NCCL is in the map), as if every accelerator used gloo
    or nccl. The group then has no backend of its default type, and whatever asks for it
    (DDP's logger through ``ProcessGroup::getBackendName``, ``pg.name()``) raises "Could not
    find backend type 1". After the helper, such a group's default becomes ``CUSTOM``, the
    type of the one backend it has.

    torch 2.14 picks the default type from the group's own backends
    (``_get_default_backend_type_for_backend_config``: the accelerator's, ``CUSTOM`` for a
    registered plugin); where torch has that resolver, nothing is patched.
    """
    import torch.distributed.distributed_c10d as c10d

    if hasattr(c10d, "_get_default_backend_type_for_backend_config"):
        return

    def make(original: Any) -> Callable:
        def _new_process_group_helper(*args: Any, **kwargs: Any) -> Any:
            pg, store = original(*args, **kwargs)
            backend = kwargs["backend"] if "backend" in kwargs else args[3]
            if (
                isinstance(pg, c10d.ProcessGroup)
                and str(backend) == c10d.Backend.UNDEFINED
                and c10d.BackendConfig(backend).get_device_backend_map().get(DEVICE) is not None
            ):
                pg._set_default_backend(c10d.ProcessGroup.BackendType.CUSTOM)
            return pg, store

        return _new_process_group_helper

    _replace(c10d, "_new_process_group_helper", make)
