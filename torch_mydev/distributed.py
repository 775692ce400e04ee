"""The ``mydev`` c10d backend: gloo's collectives run on CPU aliases of mydev memory.

mydev memory is host memory, so a CPU tensor over the same bytes (``_C._cpu_alias``) is the
mydev tensor as gloo can see it. The backend is a C++ ``c10d::Backend``
(``csrc_stub/distributed/c10d_backend.cpp``, ``_C._MydevBackend``) wrapping one
``ProcessGroupGloo`` over the same store: each collective hands gloo those aliases and gloo
reads and writes the mydev buffers in place, with no copy. Only a tensor gloo cannot take as
it is (not contiguous, or with a lazy conjugate/negative bit) goes through a contiguous CPU
temporary, copied back when the collective has finished. Every ``Work`` reports the caller's
tensors as its result and future value, never the aliases: DDP builds its gradient views
from the future's value.

Being a C++ backend registered on the group for the mydev device is what lets every caller
of ``ProcessGroup::getBackend(mydev)`` find it: the functional collectives
(``torch.ops._c10d_functional``, ``DTensor.full_tensor``, compiled graphs) and
``dist._coalescing_manager(device=...)``. Collectives gloo lacks for tensors (reduce-scatter of
one flat tensor) are composed from the ones it has.

Registered as the backend ``"mydev"`` for the device ``mydev``
(``Backend.register_backend(..., devices=["mydev"])``), so ``init_process_group()`` with no
backend picks it on a machine whose accelerator is mydev; CPU tensors go to gloo.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import torch.distributed as dist

from torch_mydev import _C, _patches
from torch_mydev._names import DEVICE

__all__ = ["BACKEND", "register"]

BACKEND = "mydev"


def _create(store: Any, rank: int, size: int, timeout: timedelta) -> Any:
    """The backend of one group: ``_C._MydevBackend`` over a gloo group on the same store."""
    from torch._C._distributed_c10d import ProcessGroupGloo

    return _C._MydevBackend(ProcessGroupGloo(store, rank, size, timeout))


def register() -> None:
    """Make ``"mydev"`` a c10d backend and the default one for the mydev device."""
    if not dist.is_available() or BACKEND.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND, _create, devices=[DEVICE])
    _patches.patch_default_backend_type()
