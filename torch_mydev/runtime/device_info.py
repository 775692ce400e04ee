"""Device selection context managers and device properties.

Named and behaving as ``torch.cuda``'s (``torch.cuda.device``, ``device_of``,
``get_device_properties``, ``get_device_name``, ``get_device_capability``). mydev devices are
host memory driven by the host's cores, so the properties describe the host (docs/runtime.md,
"Device properties"). Initialisation is `torch_mydev.runtime.lazy_init`'s.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from typing import Any

import torch

from torch_mydev import _C
from torch_mydev.runtime.devices import DeviceLike, index_of

# What ``get_device_capability`` reports: mydev's own (major, minor) version of what its
# kernels support, not a GPU architecture. See docs/runtime.md.
CAPABILITY = (1, 0)


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


def _l2_cache_size() -> int:
    """Bytes of the level-2 cache of the host's first core (``/sys/devices/system/cpu``), or
    0 where the host does not say."""
    caches = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in sorted(os.listdir(caches)):
            with open(f"{caches}/{entry}/level", encoding="ascii") as f:
                if f.read().strip() != "2":
                    continue
            with open(f"{caches}/{entry}/size", encoding="ascii") as f:
                size = f.read().strip()
            units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
            return int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
    except (OSError, ValueError):
        pass
    return 0


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
    integrated GPU does); L2_cache_size: bytes of the host core's level-2 cache (0 when the
    host does not say); index: the device's ordinal.
    """

    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    is_integrated: bool
    L2_cache_size: int
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
        L2_cache_size=_l2_cache_size(),
        index=index,
    )


def get_device_name(device: DeviceLike = None) -> str:
    """Name of `device` (``torch.cuda.get_device_name``): its properties' name."""
    return get_device_properties(device).name


def get_device_capability(device: DeviceLike = None) -> tuple[int, int]:
    """(major, minor) of `device` (``torch.cuda.get_device_capability``): ``CAPABILITY``."""
    props = get_device_properties(device)
    return props.major, props.minor
