"""Kernels: numba loops over raw storage bytes, driven by a plan; no torch dispatch here.

One sub-package per family, ``copy``, ``elementwise`` and ``reduction``, each with its
``kernel`` module (what the ops call) and its numba modules (named with a leading
underscore); ``parallel`` runs their loops on threads, ``jit`` compiles and caches them.
``dtypes``, ``operand`` and ``float8`` describe bytes for all of them.

Importing this package (or ``copy.kernel``) imports neither numba nor any compiled loop:
``import torch`` loads this package through device autoload, so the numba modules
(``copy._strided``, ``copy._convert``) load on the first copy, through
``load_numba_modules``.
"""

from __future__ import annotations

import functools
import gc
import importlib
import threading
from types import ModuleType

from torch_mydev.kernels.jit import compiler

# numba's target set-up is not reentrant: threads making their first call at once raised
# "generator already executing" from it. One lock serialises the loading, and the refresh
# itself also holds numba's compiler lock, which every compile and cache load holds.
_load_lock = threading.Lock()
_loaded = False


def numba_loaded() -> bool:
    """Whether ``load_numba_modules`` has readied numba's CPU target in this process."""
    return _loaded


def load_numba_modules(*names: str) -> tuple[ModuleType, ...]:
    """Import the numba loop modules ``names`` (of this package: ``"copy._strided"``) and
    ready numba's CPU target.

    The first call imports numba and initialises its CPU target (the lowering registries and
    the NRT module): some 75,000 new objects on top of torch's 165,000, enough to make
    CPython run two full collections over the whole heap (about 0.1 s each) that find
    almost nothing. The cyclic collector is paused meanwhile and restored as it was: no
    result changes, unreachable cycles are only freed later (one full collection follows
    within the next ~100K allocations). Later calls only look the modules up.
    """
    global _loaded
    with _load_lock:
        enabled = gc.isenabled()
        gc.disable()
        try:
            modules = tuple(importlib.import_module(f"{__name__}.{name}") for name in names)
            from numba.core.compiler_lock import global_compiler_lock
            from numba.core.registry import cpu_target

            # What the first compile or cache load does, under the lock numba's own refreshes
            # run under: a refresh beside another thread's compile raised "generator already
            # executing" (both walk the same registry loaders).
            with global_compiler_lock:
                cpu_target.target_context.refresh()
            compiler.install()
            _loaded = True
        finally:
            if enabled:
                gc.enable()
    return modules


@functools.cache
def numba_module(name: str) -> ModuleType:
    """The numba module ``name`` of this package (``"copy._strided"``), imported through
    ``load_numba_modules`` on its first use and then kept: what each kernel asks for its
    loops with, so that importing a kernel module never imports numba."""
    (module,) = load_numba_modules(name)
    return module
