"""Device selection context managers, lazy initialisation and device properties.

Named and behaving as ``torch.cuda``'s (``torch.cuda.device``, ``device_of``, ``init``,
``is_initialized``, ``get_device_properties``, ``get_device_name``,
``get_device_capability``). mydev devices are host memory driven by the host's cores, so the
properties describe the host (docs/runtime.md, "Device properties").
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import Any

import torch

from torch_mydev import _C
from torch_mydev.devices import DeviceLike, index_of

# What ``get_device_capability`` reports: mydev's own (major, minor) version of what its
# kernels support, not a GPU architecture. See docs/runtime.md.
CAPABILITY = (1, 0)


def _module() -> Any:
    return getattr(torch, torch._C._get_privateuse1_backend_name())


def _optional_index(device: Any) -> int:
    """The index ``torch.cuda.device`` selects: -1 (no-op) for None and negative ints."""
    if device is None:
        return -1
    if isinstance(device, int):
        return device if device < 0 else index_of(device)
    if isinstance(device, str | torch.device):
        return index_of(device)
    raise ValueError(f"expected a mydev device, an int or None, got {device!r}")


class device:  # torch.cuda.device's name
    """Context manager that makes `device` the current mydev device (``torch.cuda.device``).

    On entry the calling thread's current device becomes `device`; on exit the previous one
    comes back, also when the block raises. None or a negative int changes nothing.
    Another device type raises ValueError, as ``torch.cuda.device("cpu")`` does.
    """

    def __init__(self, device: DeviceLike) -> None:
        self.idx = _optional_index(device)
        self.prev_idx = -1

    def __enter__(self) -> None:
        self.prev_idx = _C._exchange_device(self.idx)

    def __exit__(self, *exc: object) -> bool:
        self.idx = _C._exchange_device(self.prev_idx)
        return False


class device_of(device):  # torch.cuda.device_of's name
    """Context manager that makes the device of a tensor or storage current
    (``torch.cuda.device_of``); a no-op for objects not on mydev."""

    def __init__(self, obj: torch.Tensor | torch.UntypedStorage | torch.TypedStorage) -> None:
        on_mydev = obj.device.type == torch._C._get_privateuse1_backend_name()
        super().__init__(obj.get_device() if on_mydev else -1)


def _lazy_init() -> None:
    """Mark mydev as used: ``torch.mydev._initialized`` becomes True.

    torch's factories call it the first time a mydev device is used
    (``torch/csrc/utils/device_lazy_init.cpp`` ``device_lazy_init``), as they call
    ``torch.cuda._lazy_init``. ``torch.utils.checkpoint`` and ``torch.random.fork_rng`` save
    and restore a device's RNG state only when ``_initialized`` is true (they read it with
    getattr on the device module).
    """
    _module()._initialized = True


def init() -> None:
    """Initialise mydev now (``torch.cuda.init``); there is no driver, it only marks the
    device as used."""
    _lazy_init()


def is_initialized() -> bool:
    """Whether mydev has been initialised (``torch.cuda.is_initialized``)."""
    return bool(getattr(_module(), "_initialized", False))


def _cpu_name() -> str:
    """The host CPU's model name (``/proc/cpuinfo``), or the platform's processor name."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _cores() -> int:
    """Cores this process may run on (the scheduler's affinity mask), as CUDA counts SMs."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class _MydevDeviceProperties:
    """What ``get_device_properties`` returns (the fields of ``_CudaDeviceProperties`` that
    mean something for a host device).

    name: ``"mydev (<host CPU model>)"``; major/minor: ``CAPABILITY``; total_memory: host
    ``MemTotal`` (every device allocates from it); multi_processor_count: host cores this
    process may use (the kernels run on them); is_integrated: True (shares host memory, as an
    integrated GPU does); index: the device's ordinal.
    """

    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    is_integrated: bool
    index: int


def get_device_properties(device: DeviceLike = None) -> _MydevDeviceProperties:
    """Properties of `device` (``torch.cuda.get_device_properties``)."""
    index = index_of(device)
    _, total = _C._mem_get_info(index)
    return _MydevDeviceProperties(
        name=f"mydev ({_cpu_name()})",
        major=CAPABILITY[0],
        minor=CAPABILITY[1],
        total_memory=int(total),
        multi_processor_count=_cores(),
        is_integrated=True,
        index=index,
    )


def get_device_name(device: DeviceLike = None) -> str:
    """Name of `device` (``torch.cuda.get_device_name``): its properties' name."""
    return get_device_properties(device).name


def get_device_capability(device: DeviceLike = None) -> tuple[int, int]:
    """(major, minor) of `device` (``torch.cuda.get_device_capability``): ``CAPABILITY``."""
    props = get_device_properties(device)
    return props.major, props.minor
