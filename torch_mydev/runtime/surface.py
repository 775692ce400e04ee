"""Install the runtime functions of the other runtime modules on ``torch.mydev``: device
context managers and properties (``device_info``), lazy initialisation and fork poisoning
(``lazy_init``), autocast's supported dtypes (``autocast``), then torch's own hooks for
serialization, DLPack and the profiler (``_patches.apply_runtime``)."""

from __future__ import annotations

import torch

from torch_mydev import _patches
from torch_mydev._names import DEVICE
from torch_mydev.runtime import autocast, device_info, lazy_init

_FUNCTIONS = (
    device_info.device,
    device_info.device_of,
    lazy_init.init,
    lazy_init.is_initialized,
    lazy_init._lazy_init,
    lazy_init._is_in_bad_fork,
    device_info.get_device_properties,
    device_info.get_device_name,
    device_info.get_device_capability,
    autocast.get_amp_supported_dtype,
    autocast.is_bf16_supported,
)


def install() -> None:
    """Add the functions to the device module (``torch.mydev``) and its ``__all__``."""
    module = getattr(torch, DEVICE)
    module._initialized = False
    for fn in _FUNCTIONS:
        setattr(module, fn.__name__, fn)
        if not fn.__name__.startswith("_") and fn.__name__ not in module.__all__:
            module.__all__.append(fn.__name__)
    autocast.register()
    _patches.apply_runtime()
