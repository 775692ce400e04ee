"""Decides whether the kit can use a device, and which dtypes it tries there.

Any device type torch knows is accepted (``cpu``, ``meta``, ``cuda``, ``xpu``, ``mps``, a
PrivateUse1 backend under its own name). A backend package is loaded by torch's device
autoload when it registers one (``torch_mydev`` does), or by ``--import MODULE``; the kit
never imports one itself.
"""

from __future__ import annotations

import importlib
import warnings

import torch

from torch_mydev_rules.iterator.casts import COMPUTE_DTYPES

__all__ = [
    "COMPUTE_DTYPES",
    "FLOAT_DTYPES",
    "STORAGE_DTYPES",
    "DeviceUnavailable",
    "open_device",
    "readable",
    "taken_dtypes",
]

# Every elementwise op and reduction is tried with COMPUTE_DTYPES (the rules' own list, in
# iterator.casts); the copy ops also take the dtypes torch CPU only copies and casts
# (c10::convert).
STORAGE_DTYPES = (
    *COMPUTE_DTYPES,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.complex32,
    torch.float8_e4m3fn,
    torch.float8_e4m3fnuz,
    torch.float8_e5m2,
    torch.float8_e5m2fnuz,
    torch.float8_e8m0fnu,
)
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class DeviceUnavailable(Exception):
    """The device named cannot be used here (the CLI exits with status 2)."""


def open_device(name: str, imports: tuple[str, ...] = ()) -> torch.device:
    """``torch.device(name)`` after importing ``imports``, checked by allocating on it.

    Raises ``DeviceUnavailable`` with the reason: an unknown device type (no backend
    registered under that name), or one this torch build or machine lacks (``cuda`` on a CPU
    build, no GPU present).
    """
    for module in imports:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise DeviceUnavailable(f"cannot import {module!r}: {error}") from None
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise DeviceUnavailable(
            f"torch {torch.__version__} knows no device {name!r} ({_first_line(error)}); "
            "a PrivateUse1 backend must be loaded first: by torch's device autoload, or "
            "with --import ITS_PACKAGE"
        ) from None
    try:
        torch.empty(1, device=device)
    except Exception as error:  # AssertionError for cuda on a CPU build, RuntimeError, ...
        raise DeviceUnavailable(
            f"cannot allocate on {name!r} with torch {torch.__version__}: {_first_line(error)}"
        ) from None
    return device


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def taken_dtypes(device: torch.device) -> tuple[torch.dtype, ...]:
    """The dtypes of ``STORAGE_DTYPES`` the device allocates and takes a CPU copy into
    (``mps`` has no float64, for one)."""
    taken = []
    for dtype in STORAGE_DTYPES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "ComplexHalf support is experimental"
            try:
                torch.zeros(2, dtype=dtype).to(device)
            except Exception:  # a device refuses a dtype in many ways
                continue
        taken.append(dtype)
    return tuple(taken)


def readable(device: torch.device) -> bool:
    """Whether the device's values can be read back (``meta`` holds none)."""
    return device.type != "meta"
