"""The one parallel loop: calls of C entry points, spread over numba's threads (numba).

``run_calls(calls, starts)`` is ``at::parallel_for`` over parts whose work is already laid
out: part ``p`` makes, in order, the calls in rows ``starts[p] .. starts[p + 1]`` of
``calls``, each row a C entry point of ``jit._replay_abi.C_SIGNATURE`` (its address) and that
entry's four arguments. The entries are the serial loops' C forms (``elementwise._replay``,
``_replay_copy``, ``_replay_reduction``), each told the part of its range to walk.

Why one loop: a ``parallel=True`` function is compiled per argument types, 4 to 8 s each on
this machine, once per loop and dtype; this one has one signature, is compiled once (then
loaded from numba's cache), and each loop's C entry costs a fraction of a second over the
serial loop it calls (which a small call of the op has usually compiled already).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from torch_mydev.kernels.jit._seal import seal


@intrinsic
def _call(typingctx, address, a, b, c, d):
    """Call the C function at ``address``: ``int64 (int64, int64, int64, int64)``."""
    signature = types.int64(types.int64, types.int64, types.int64, types.int64, types.int64)

    def codegen(context, builder, sig, args):
        word = ir.IntType(64)
        function = ir.FunctionType(word, [word] * 4)
        pointer = builder.inttoptr(args[0], function.as_pointer())
        return builder.call(pointer, args[1:])

    return signature, codegen


@njit(cache=True, nogil=True, parallel=True)
def run_calls(calls, starts):
    """Part ``p`` (one per thread) calls rows ``starts[p] .. starts[p + 1]`` of ``calls``
    (address, then four arguments) in order; returns the largest status they returned."""
    parts = starts.shape[0] - 1
    status = np.zeros(max(parts, 1), np.int64)
    for p in prange(parts):
        worst = 0
        for r in range(starts[p], starts[p + 1]):
            row = calls[r]
            worst = max(worst, _call(row[0], row[1], row[2], row[3], row[4]))
        status[p] = worst
    return status.max()


seal(__name__)  # keep last: keys the caches and widens the literals of the loops above
