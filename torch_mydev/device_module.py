"""The ``torch.mydev`` module: device, memory and RNG functions named as in ``torch.cuda``."""

from __future__ import annotations

import sys
import types
from typing import Any

import torch

from torch_mydev import _C

_DeviceLike = torch.device | str | int | None


def _index(device: _DeviceLike) -> int:
    """The device index `device` names; RuntimeError for another device type or ordinal."""
    if device is None:
        return 0
    if isinstance(device, int):
        index = device
    else:
        device = torch.device(device)
        if device.type != torch._C._get_privateuse1_backend_name():
            raise ValueError(f"expected a mydev device, got {device}")
        index = 0 if device.index is None else device.index
    _C._check_device(index)
    return index


def is_available() -> bool:
    """Whether mydev can be used: always, it is host memory."""
    return True


def device_count() -> int:
    """Number of mydev devices (one)."""
    return _C._device_count()


def current_device() -> int:
    """Index of the current mydev device (always 0)."""
    return 0


def set_device(device: _DeviceLike) -> None:
    """Select the current device; only mydev:0 exists, any other ordinal raises."""
    _index(device)


def synchronize(device: _DeviceLike = None) -> None:
    """Wait for all kernels on `device`: they run synchronously, so this only validates it."""
    _index(device)


def memory_stats(device: _DeviceLike = None) -> dict[str, int]:
    """Allocator counters, keyed as ``torch.cuda.memory_stats``."""
    _index(device)
    return dict(sorted(_C._memory_stats().items()))


def memory_allocated(device: _DeviceLike = None) -> int:
    """Bytes currently held by live mydev storages."""
    return memory_stats(device)["allocated_bytes.all.current"]


def max_memory_allocated(device: _DeviceLike = None) -> int:
    """Peak of `memory_allocated` since start or the last `reset_peak_memory_stats`."""
    return memory_stats(device)["allocated_bytes.all.peak"]


def memory_reserved(device: _DeviceLike = None) -> int:
    """Bytes held by the allocator: live storages plus freed large blocks kept for reuse."""
    return memory_stats(device)["reserved_bytes.all.current"]


def empty_cache() -> None:
    """Return the freed blocks the allocator keeps for reuse to the system."""
    _C._empty_cache()


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    """Set the peak counters to the current values."""
    _index(device)
    _C._reset_peak_memory_stats()


def default_generator(device: _DeviceLike = None) -> torch.Generator:
    """The default random generator of `device`."""
    return _C._default_generator(_index(device))


def manual_seed(seed: int, device: _DeviceLike = None) -> None:
    """Seed the default generator of `device`."""
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
    """The generator state as a CPU ByteTensor."""
    return default_generator(device).get_state()


def set_rng_state(state: torch.Tensor, device: _DeviceLike = None) -> None:
    """Restore a state from `get_rng_state`."""
    default_generator(device).set_state(state)


def _is_in_bad_fork() -> bool:
    """Forking is safe: there is no driver state to lose (``torch.manual_seed`` asks)."""
    return False


_PUBLIC = (
    is_available,
    device_count,
    current_device,
    set_device,
    synchronize,
    memory_stats,
    memory_allocated,
    max_memory_allocated,
    memory_reserved,
    empty_cache,
    reset_peak_memory_stats,
    default_generator,
    manual_seed,
    manual_seed_all,
    seed,
    initial_seed,
    get_rng_state,
    set_rng_state,
    _is_in_bad_fork,
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
