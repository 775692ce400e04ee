"""``torch.compile`` on mydev tensors: inductor's CPU C++ backend, run on mydev buffers.

mydev memory is host memory, so the C++ kernels inductor generates for CPU run unchanged on
mydev pointers. `install` makes inductor find the mydev backend without importing inductor:
``torch._inductor.codegen.common.init_backend_registration`` (inductor's first step, once per
process) asks the device module ``torch.mydev`` for ``Scheduling``, ``PythonWrapperCodegen``,
``CppWrapperCodegen`` and ``WrapperFxCodegen``; a module ``__getattr__`` answers from
`torch_mydev.compile.backend`, whose import registers the rest (device interface, device op
overrides, the scheduler patches of `torch_mydev._patches`). See docs/compile.md.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from torch_mydev.compile import dynamo_skip

_BACKEND_NAMES = ("Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen")


def _lazy_backend_attribute(name: str) -> Any:
    """Module ``__getattr__`` of ``torch.mydev``: the inductor backend classes, on first ask."""
    if name in _BACKEND_NAMES:
        from torch_mydev.compile import backend

        backend.register()
        return getattr(backend, name)
    raise AttributeError(f"module 'torch.mydev' has no attribute {name!r}")


def install(module: types.ModuleType) -> None:
    """Hook the inductor backend into the device module `module` (``torch.mydev``), lazily.

    Costs nothing at import: inductor is imported by inductor's own first use. When a
    program imported inductor before torch_mydev (``init_backend_registration`` already ran
    without mydev), the backend registers now: inductor is loaded anyway.
    """
    module.__getattr__ = _lazy_backend_attribute  # type: ignore[method-assign]
    dynamo_skip.install()
    if "torch._inductor.codegen.common" in sys.modules:
        from torch_mydev.compile import backend

        backend.register()
