"""Scratch arrays that the loops pass around without touching a reference count.

numba counts references to every array it allocates (``np.zeros``, ``np.empty``): each
copy of one into a variable, an inlined helper's argument among them, is an atomic
increment and a decrement at its end (``NRT_incref`` / ``NRT_decref``). A loop that passes
its scratch to a helper once per row paid two locked instructions a row, 45 % of an
``amax`` of 256 rows of 32 (perf, 2026-11-28). ``borrow`` gives the same memory as an
array with no owner, as ``numba.carray`` makes them: copies cost nothing, and the owner
must outlive it (a function's argument does, for the whole call).
"""

from __future__ import annotations

import numba
from numba import njit

from torch_mydev.kernels.jit._replay_abi import pointer_of
from torch_mydev.kernels.jit._seal import JIT, seal


@njit(**JIT, inline="always")
def borrow(owner):
    """``owner``'s elements as a C-contiguous array without a reference count; valid while
    ``owner`` is alive (``owner`` C-contiguous)."""
    return numba.carray(pointer_of(owner.ctypes.data, owner), owner.shape)


seal(__name__)  # keep last: keys the cache of ``borrow`` by the kernels' sources
