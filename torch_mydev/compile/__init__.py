"""``torch.compile`` on mydev tensors: inductor's CPU C++ backend, run on mydev buffers.

mydev memory is host memory, so the C++ kernels inductor generates for CPU run unchanged on
mydev pointers. `install` makes dynamo and inductor find the mydev backend without importing
either: dynamo's ``torch._dynamo.device_interface`` gets `interface.MydevInterface` the moment
it is imported (`on_import.after_import`), so ``get_interface_for_device("mydev")`` answers
before any compile; ``torch._inductor.codegen.common.init_backend_registration`` (inductor's
first step, once per process) asks the device module ``torch.mydev`` for ``Scheduling``,
``PythonWrapperCodegen``, ``CppWrapperCodegen`` and ``WrapperFxCodegen``; a module
``__getattr__`` answers from `torch_mydev.compile.backend`, whose import registers the rest
(device op overrides, the scheduler patches of `torch_mydev._patches`). See docs/compile.md.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from torch_mydev.compile import dynamo_skip
from torch_mydev.compile.on_import import after_import

_BACKEND_NAMES = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")
_DEVICE_INTERFACE = "torch._dynamo.device_interface"


def _lazy_backend_attribute(name: str) -> Any:
    """Module ``__getattr__`` of ``torch.mydev``: the inductor backend classes, on first ask."""
    if name in _BACKEND_NAMES:
        from torch_mydev.compile import backend

        backend.register()
        return getattr(backend, name)
    raise AttributeError(f"module 'torch.mydev' has no attribute {name!r}")


def _register_interface(device_interface: types.ModuleType) -> None:
    """Import `interface`, whose import registers `MydevInterface` in `device_interface`
    (when `interface` is itself being imported, its own end registers)."""
    import torch_mydev.compile.interface  # noqa: F401


def get_device_interface() -> type:
    """The dynamo ``DeviceInterface`` of mydev (``torch.mydev.get_device_interface``: what
    later torch versions' ``init_device_reg`` asks a PrivateUse1 device module for)."""
    from torch_mydev.compile.interface import MydevInterface

    return MydevInterface


def install(module: types.ModuleType) -> None:
    """Hook the dynamo interface and the inductor backend into the device module `module`
    (``torch.mydev``), lazily.

    Costs nothing at import: dynamo and inductor are imported by their own first use. When a
    program imported inductor before torch_mydev (``init_backend_registration`` already ran
    without mydev), the backend registers now: inductor is loaded anyway.
    """
    module.__getattr__ = _lazy_backend_attribute  # type: ignore[method-assign]
    module.get_device_interface = get_device_interface  # type: ignore[attr-defined]
    dynamo_skip.install()
    after_import(_DEVICE_INTERFACE, _register_interface)
    if "torch._inductor.codegen.common" in sys.modules:
        from torch_mydev.compile import backend

        backend.register()
