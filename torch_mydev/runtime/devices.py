"""Which mydev devices exist and which one is current (``torch.cuda``'s device functions).

The device count comes from ``TORCH_MYDEV_DEVICE_COUNT`` (default 2), read once when the
stub loads. As with CUDA, the current device belongs to the calling thread and starts at 0;
``torch.mydev.device(i)``, ``torch.accelerator.set_device_index`` and device guards all set
the same state, kept in the stub (csrc_stub/runtime/device.cpp). As CUDA's, `current_device` and
`set_device` initialise mydev first (`torch_mydev.runtime.lazy_init`), so they raise in a forked
child of a process that had used mydev.
"""

from __future__ import annotations

import torch

from torch_mydev import _C
from torch_mydev.runtime.lazy_init import _lazy_init

DeviceLike = torch.device | str | int | None


def index_of(device: DeviceLike) -> int:
    """The mydev device index `device` names; None or a device without index: the current one.

    ValueError for another device type; RuntimeError ("invalid device ordinal") for an index
    out of range, as CUDA raises it.
    """
    if device is None:
        return _C._current_device()
    if isinstance(device, int):
        index = device
    else:
        device = torch.device(device)
        if device.type != torch._C._get_privateuse1_backend_name():
            raise ValueError(f"expected a mydev device, got {device}")
        index = _C._current_device() if device.index is None else device.index
    _C._check_device(index)
    return _C._current_device() if index < 0 else index


def is_available() -> bool:
    """Whether mydev can be used: always, it is host memory."""
    return True


def device_count() -> int:
    """Number of mydev devices (``TORCH_MYDEV_DEVICE_COUNT``, default 2)."""
    return _C._device_count()


def current_device() -> int:
    """Index of the calling thread's current mydev device (``torch.cuda.current_device``)."""
    _lazy_init()
    return _C._current_device()


def set_device(device: DeviceLike) -> None:
    """Make `device` the calling thread's current device (``torch.cuda.set_device``).

    A negative index changes nothing, as with CUDA; a device without an index (or None) is a
    ValueError, as ``torch.cuda._utils._get_device_index(device, optional=False)`` raises.
    """
    if isinstance(device, int) and device < 0:
        return
    if device is None or (not isinstance(device, int) and torch.device(device).index is None):
        raise ValueError(
            f"Expected a torch.device with a specified index or an integer, but got:{device}"
        )
    index = index_of(device)
    _lazy_init()
    _C._set_device(index)


def _exchange_device(device: int) -> int:
    """Set the current device, return the previous one; -1 changes nothing and returns -1
    (``torch.cuda._exchange_device``)."""
    return _C._exchange_device(device)


def _maybe_exchange_device(device: int) -> int:
    """As `_exchange_device` (``torch.cuda._maybe_exchange_device``)."""
    return _C._exchange_device(device)
