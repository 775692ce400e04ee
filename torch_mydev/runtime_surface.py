"""Install the runtime functions of H3's modules on ``torch.mydev`` (serialization's device
context managers, lazy initialisation and fork poisoning, device properties, autocast,
DLPack, profiler)."""

from __future__ import annotations

import torch

from torch_mydev import _patches, autocast, device_info, lazy_init
from torch_mydev._names import DEVICE

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
