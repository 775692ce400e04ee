"""What every numba module of this package does last, ``seal(__name__)``, and the options its
loops compile with (``JIT``).

Each module-level dispatcher of the module gets its on-disk cache keyed by all of the kernels'
sources (``_cache_key.key_cache``) and its calls from other loops typed with literals widened
(``_literals.widen_literals``). tests/kernels/jit/test_cache_key.py checks that none is missed.
"""

from __future__ import annotations

import sys

from numba.core.dispatcher import Dispatcher

from torch_mydev.kernels.jit._cache_key import key_cache
from torch_mydev.kernels.jit._literals import widen_literals

# Every loop: cached on disk (keyed by ``seal``), free of the GIL, and dividing by zero as
# numpy (and C) do, to inf or nan, where Python's model would raise.
JIT = {"cache": True, "nogil": True, "error_model": "numpy"}


def seal(module_name: str) -> None:
    """Key the cache of, and widen the literals of, every dispatcher defined in the module
    ``module_name`` (its last line calls this with ``__name__``)."""
    for value in list(vars(sys.modules[module_name]).values()):
        if isinstance(value, Dispatcher) and value.py_func.__module__ == module_name:
            key_cache(value)
            widen_literals(value)
