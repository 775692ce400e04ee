"""The ``torch.mydev`` module: device, memory and RNG functions named as in ``torch.cuda``."""

from __future__ import annotations

import sys
import types
from typing import Any

import torch

from torch_mydev import _C
from torch_mydev.runtime import streams
from torch_mydev.runtime.devices import (
    DeviceLike,
    _exchange_device,
    _maybe_exchange_device,
    current_device,
    device_count,
    index_of,
    is_available,
    set_device,
)
from torch_mydev.runtime.lazy_init import _lazy_init

_DeviceLike = DeviceLike
_index = index_of


def memory_stats(device: _DeviceLike = None) -> dict[str, int]:
    """Allocator counters of `device`, keyed as ``torch.cuda.memory_stats`` keys them.

    The same numbers as ``torch.accelerator.memory_stats``: each device has its own.
    """
    return dict(sorted(_C._memory_stats(_index(device)).items()))


def memory_allocated(device: _DeviceLike = None) -> int:
    """Bytes currently held by live storages on `device`."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: _DeviceLike = None) -> int:
    """Peak of `memory_allocated` since start or the last `reset_peak_memory_stats`."""
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: _DeviceLike = None) -> int:
    """Bytes held by the allocator for `device`: live storages plus freed large blocks kept
    for reuse."""
    return memory_stats(device)["reserved_bytes.all.current"]


def max_memory_reserved(device: _DeviceLike = None) -> int:
    """Peak of `memory_reserved` since start or the last `reset_peak_memory_stats`."""
    return memory_stats(device)["reserved_bytes.all.peak"]


def empty_cache() -> None:
    """Return the freed blocks the allocator keeps for reuse (every device's) to the system."""
    _C._empty_cache()


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    """Set the peak counters of `device` to the current values."""
    _C._reset_peak_memory_stats(_index(device))


def reset_accumulated_memory_stats(device: _DeviceLike = None) -> None:
    """Zero the allocated/freed totals of `device` (``torch.cuda``'s function of that name)."""
    _C._reset_accumulated_memory_stats(_index(device))


def mem_get_info(device: _DeviceLike = None) -> tuple[int, int]:
    """(free, total) bytes for `device` (``torch.cuda.mem_get_info``).

    mydev memory is host memory, shared by every device: free is ``MemAvailable`` and total
    ``MemTotal`` of ``/proc/meminfo`` (sysconf's available and physical pages elsewhere).
    """
    return _C._mem_get_info(_index(device))


def host_memory_stats() -> dict[str, int]:
    """Counters of the pinned host allocator (``torch.cuda.host_memory_stats`` keys)."""
    return dict(sorted(_C._host_memory_stats().items()))


def reset_peak_host_memory_stats() -> None:
    """Set the pinned allocator's peaks to the current values."""
    _C._reset_host_peak_memory_stats()


def default_generator(device: _DeviceLike = None) -> torch.Generator:
    """The default random generator of `device` (each device has its own)."""
    return _C._default_generator(_index(device))


def manual_seed(seed: int, device: _DeviceLike = None) -> None:
    """Seed the default generator of `device` (the current device by default)."""
    default_generator(device).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seed every mydev generator (``torch.manual_seed`` calls this)."""
    for index in range(device_count()):
        manual_seed(seed, index)


def seed() -> int:
    """Seed the default generator with a non-deterministic number and return it."""
    return default_generator().seed()


def initial_seed() -> int:
    """The seed the default generator started from."""
    return default_generator().initial_seed()


def get_rng_state(device: _DeviceLike = None) -> torch.Tensor:
    """The generator state as a CPU ByteTensor (initialises mydev, as CUDA's does)."""
    _lazy_init()
    return default_generator(device).get_state()


def set_rng_state(state: torch.Tensor, device: _DeviceLike = None) -> None:
    """Restore a state from `get_rng_state` (initialises mydev, as CUDA's does)."""
    _lazy_init()
    default_generator(device).set_state(state)


_PUBLIC = (
    is_available,
    device_count,
    current_device,
    set_device,
    _exchange_device,
    _maybe_exchange_device,
    streams.synchronize,
    streams.current_stream,
    streams.default_stream,
    streams.set_stream,
    streams.stream,
    streams.Stream,
    streams.Event,
    streams.StreamContext,
    memory_stats,
    memory_allocated,
    max_memory_allocated,
    memory_reserved,
    max_memory_reserved,
    empty_cache,
    reset_peak_memory_stats,
    reset_accumulated_memory_stats,
    mem_get_info,
    host_memory_stats,
    reset_peak_host_memory_stats,
    default_generator,
    manual_seed,
    manual_seed_all,
    seed,
    initial_seed,
    get_rng_state,
    set_rng_state,
)


def install(name: str) -> types.ModuleType:
    """Rename PrivateUse1 to `name`, register ``torch.<name>`` and the generated methods."""
    if torch._C._get_privateuse1_backend_name() != name:
        torch.utils.rename_privateuse1_backend(name)
    module = types.ModuleType(f"torch.{name}", __doc__)
    functions: dict[str, Any] = {fn.__name__: fn for fn in _PUBLIC}
    module.__dict__.update(functions)
    module.__all__ = [k for k in functions if not k.startswith("_")]
    torch._register_device_module(name, module)
    sys.modules[f"torch.{name}"] = module
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
    )
    return module
