"""torch_mydev: a PyTorch PrivateUse1 device, renamed ``mydev``, with Python kernels.

Importing the package loads the compiled stub (allocator, device guard, hooks, view ops),
renames PrivateUse1 to ``mydev``, installs the ``torch.mydev`` module and the generated
``Tensor.mydev()`` / ``Module.mydev()`` methods, and registers the Python kernels.
Installed packages are loaded by ``import torch`` itself (device-backend autoload).
"""
# ruff: noqa: E402  (``_autoload`` must exist before ``import torch``: see its docstring)


def _autoload() -> None:
    """Entry point of the ``torch.backends`` group: importing the package did the work.

    Defined before ``import torch``: when a program imports ``torch_mydev`` first, torch's
    own import runs the autoload while this module is still half made, and must find it.
    """


import torch  # noqa: F401  (loads libtorch before the stub that links against it)

from torch_mydev import _C  # noqa: F401  (loading it registers allocator, guard, hooks, views)
from torch_mydev import compile as _compile
from torch_mydev import device_module as _device_module
from torch_mydev import distributed as _distributed
from torch_mydev import runtime_surface as _runtime_surface
from torch_mydev._names import DEVICE
from torch_mydev.ops import registry as _registry
from torch_mydev.ops.fallback import FallbackWarning, fallback_stats, reset_fallback_stats
from torch_mydev_rules.iterator import Report, explain

_compile.install(_device_module.install(DEVICE))
_runtime_surface.install()
_registry.register()
_distributed.register()


__all__ = [
    "DEVICE",
    "FallbackWarning",
    "Report",
    "explain",
    "fallback_stats",
    "reset_fallback_stats",
]
