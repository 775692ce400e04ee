"""When mydev counts as initialised, and fork poisoning: ``torch.cuda``'s rules for both.

torch's factories call ``torch.mydev._lazy_init()`` the first time a mydev device is used in
a process (``device_lazy_init`` in ``torch/csrc/utils/device_lazy_init.cpp``), as they call
``torch.cuda._lazy_init``. The first call marks mydev initialised (``torch.mydev._initialized``,
which ``torch.utils.checkpoint`` and ``torch.random.fork_rng`` read) and registers torch's
fork handler for PrivateUse1 (csrc_stub/runtime/lazy_init.cpp). A process forked after that is "in
bad fork": its copy of mydev's state belongs to the parent, so, as with CUDA, using mydev
there raises (``Cannot re-initialize mydev in forked subprocess``) and ``torch.manual_seed``
leaves mydev's generators alone. A child forked before the parent used mydev may use it.
"""

from __future__ import annotations

import os
import threading

import torch

from torch_mydev._names import DEVICE

_initialization_lock = threading.Lock()
# True in the process that initialised mydev, False again in its children forked through
# Python (os.fork, multiprocessing), which ask the stub: the common case without a call into
# C++. A child forked from C without Python's fork hooks keeps True and is not poisoned.
_initialized_here = False


def _forget_in_child() -> None:
    global _initialized_here
    _initialized_here = False


os.register_at_fork(after_in_child=_forget_in_child)


def _module() -> object:
    return getattr(torch, DEVICE)


def _is_in_bad_fork() -> bool:
    """Whether this process was forked from one that had initialised mydev
    (``torch.cuda._is_in_bad_fork``; ``torch.manual_seed`` asks before seeding mydev)."""
    return torch.ops.mydev._is_in_bad_fork()


def is_initialized() -> bool:
    """Whether mydev is initialised in this process (``torch.cuda.is_initialized``): never in
    a forked child of a process that had initialised it."""
    if not getattr(_module(), "_initialized", False):
        return False
    return _initialized_here or not _is_in_bad_fork()


def _lazy_init() -> None:
    """Initialise mydev once per process (``torch.cuda._lazy_init``): mark it initialised and
    poison later forks. In a poisoned child, RuntimeError with CUDA's message."""
    global _initialized_here
    if is_initialized():
        return
    with _initialization_lock:
        if is_initialized():
            return
        if _is_in_bad_fork():
            raise RuntimeError(
                f"Cannot re-initialize {DEVICE} in forked subprocess. To use {DEVICE} with "
                "multiprocessing, you must use the 'spawn' start method"
            )
        torch.ops.mydev._register_fork_handler()
        _initialized_here = True
        _module()._initialized = True  # type: ignore[attr-defined]


def init() -> None:
    """Initialise mydev now (``torch.cuda.init``)."""
    _lazy_init()
