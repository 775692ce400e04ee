"""Raw bytes of a tensor's storage as a numpy array, for kernels (no copy is made)."""

from __future__ import annotations

import ctypes

import numpy as np
import torch

_EMPTY = np.zeros(0, dtype=np.uint8)


def storage_bytes(tensor: torch.Tensor) -> np.ndarray:
    """A writable 1-D uint8 view of the whole storage of a CPU or mydev tensor.

    Both devices keep their bytes in host memory, so the storage's data pointer and byte
    count are all a kernel needs; the tensor must outlive the returned array.
    """
    storage = tensor.untyped_storage()
    nbytes = storage.nbytes()
    if nbytes == 0:
        return _EMPTY
    buffer = (ctypes.c_uint8 * nbytes).from_address(storage.data_ptr())
    return np.frombuffer(buffer, dtype=np.uint8)


def byte_offset(tensor: torch.Tensor) -> int:
    """Byte offset of element [0, ..., 0] inside the storage."""
    return tensor.storage_offset() * tensor.element_size()
