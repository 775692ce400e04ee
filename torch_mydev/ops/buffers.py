"""Raw bytes of a tensor's storage as a numpy array, for kernels (no copy is made).

Copy-on-write storages (``Tensor._lazy_clone``) follow c10's rule, the one TensorIterator
keeps: a kernel takes mutable access to what it writes (``writable``, which materialises a
copy-on-write storage) before it reads any address, and reads every address through const
access (``_C._storage_span``), which materialises nothing. ``UntypedStorage.data_ptr()`` and
``Tensor.data_ptr()`` take mutable access: kernels call them on their outputs only.
"""

from __future__ import annotations

import ctypes

import numpy as np
import torch

from torch_mydev import _C

_EMPTY = np.zeros(0, dtype=np.uint8)
storage_span = _C._storage_span  # (storage address, storage bytes), through const access


def storage_bytes(tensor: torch.Tensor) -> np.ndarray:
    """A 1-D uint8 view of the whole storage of a CPU or mydev tensor, read through const
    access (a tensor the kernel writes must have gone through ``writable`` first).

    Both devices keep their bytes in host memory, so the storage's data pointer and byte
    count are all a kernel needs; the tensor must outlive the returned array.
    """
    address, nbytes = storage_span(tensor)
    if nbytes == 0:
        return _EMPTY
    buffer = (ctypes.c_uint8 * nbytes).from_address(address)
    return np.frombuffer(buffer, dtype=np.uint8)


def byte_offset(tensor: torch.Tensor) -> int:
    """Byte offset of element [0, ..., 0] inside the storage."""
    return tensor.storage_offset() * tensor.element_size()


def writable(tensor: torch.Tensor) -> None:
    """Take mutable access to the storage a kernel is about to write: a copy-on-write storage
    is materialised (its own copy of the bytes, or the shared ones when it holds the last
    reference), as TensorIterator's ``mutable_data_ptr()`` of an output does on CPU."""
    tensor.data_ptr()
