"""torch_mydev: a PyTorch PrivateUse1 device, renamed ``mydev``, with Python kernels.

Importing the package loads the compiled stub (allocator, device guard, hooks, view ops),
renames PrivateUse1 to ``mydev``, installs the ``torch.mydev`` module and the generated
``Tensor.mydev()`` / ``Module.mydev()`` methods, and registers the Python kernels.
Installed packages are loaded by ``import torch`` itself (device-backend autoload).
"""

import torch  # first: loads libtorch, which the stub links against

import torch_mydev_autoload as _loader

if _loader.failure is not None:
    # torch's autoload already tried this import and failed: raise that error again, since
    # running the registrations a second time would fail differently and hide the cause.
    raise _loader.failure
if torch.__version__.split(".")[:2] not in [v.split(".") for v in _loader.SUPPORTED_TORCH]:
    raise ImportError(
        f"torch_mydev supports torch {', '.join(_loader.SUPPORTED_TORCH)}, not {torch.__version__}"
    )

# First: the stub built for this torch becomes torch_mydev._C (its loading registers the
# allocator, guard, hooks, views), which the modules below import.
from torch_mydev import _stub  # noqa: F401
from torch_mydev import compile as _compile
from torch_mydev import distributed as _distributed
from torch_mydev._names import DEVICE
from torch_mydev.ops import registry as _registry
from torch_mydev.ops.fallback.boxed import FallbackWarning, fallback_stats, reset_fallback_stats
from torch_mydev.runtime import module as _device_module
from torch_mydev.runtime import surface as _runtime_surface
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
