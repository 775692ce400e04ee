"""mydev's dynamo ``DeviceInterface``: what dynamo and inductor ask a device type for.

Importing this module imports ``torch._dynamo.device_interface`` (and so dynamo) and
registers `MydevInterface` there (`register`). `torch_mydev.compile` imports it once torch
has loaded that module itself, so ``get_interface_for_device("mydev")`` answers before any
compile, as it does for CUDA. (When this import is what loads dynamo, the registration at
the end of this module is the one that counts: the import hook finds it half made.)
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

import torch
from torch._dynamo import device_interface as _device_interface
from torch._dynamo.device_interface import CpuInterface

from torch_mydev import _C
from torch_mydev._names import DEVICE


class MydevInterface(CpuInterface):
    """``DeviceInterface`` of mydev: CPU's (host timing events, no raw streams), with
    mydev's device index, count, synchronize and properties (``torch.mydev``)."""

    class Worker(CpuInterface.Worker):
        """What inductor's compile workers ask; as CUDA's ``Worker`` it initialises
        nothing (a worker may run in a forked child)."""

        @staticmethod
        def get_device_properties(device: Any = None) -> Any:
            return torch.mydev.get_device_properties(device)

        @staticmethod
        def current_device() -> int:
            return _C._current_device()

    @staticmethod
    @contextlib.contextmanager
    def device(device: Any) -> Iterator[None]:  # type: ignore[override]
        index = torch.device(DEVICE, device).index if isinstance(device, int) else None
        if index is None and device is not None:
            index = torch.device(device).index
        previous = torch.mydev._exchange_device(-1 if index is None else index)
        try:
            yield
        finally:
            torch.mydev._maybe_exchange_device(previous)

    # torch.mydev's own functions (this module is imported after torch.mydev is made)
    current_device = staticmethod(torch.mydev.current_device)
    set_device = staticmethod(torch.mydev.set_device)
    device_count = staticmethod(torch.mydev.device_count)
    exchange_device = staticmethod(torch.mydev._exchange_device)
    maybe_exchange_device = staticmethod(torch.mydev._maybe_exchange_device)
    synchronize = staticmethod(torch.mydev.synchronize)

    @staticmethod
    def is_triton_capable(device: Any = None) -> bool:
        return False


def register(device_interface: types.ModuleType) -> None:
    """Register `MydevInterface` for ``mydev`` and ``mydev:<i>`` in `device_interface`
    (``torch._dynamo.device_interface``), as its ``init_device_reg`` registers ``cuda`` and
    ``cuda:<i>``."""
    device_interface.register_interface_for_device(DEVICE, MydevInterface)
    for index in range(torch.mydev.device_count()):
        device_interface.register_interface_for_device(f"{DEVICE}:{index}", MydevInterface)


register(_device_interface)
