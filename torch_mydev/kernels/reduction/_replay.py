"""C entry points of the exact float reductions, for the stub's replay of repeated calls.

The bodies only unpack a parameter block and call ``cascade_at`` (sum, mean) or
``extreme_at`` (amax, amin), the machine code the Python path calls (by symbol,
``jit._native``), so the bytes written are the same. Block, in ``int64`` words:
``out_units``, ``in_units``, ``ndim``, four loop words (cascade: ``fmt``, ``vec``,
``lanes``, ``mode``; extreme: ``vec``, ``is_max``, 0, 0), the divisor (a mean's count, else
0), then ``shape``, ``ostrides`` and ``istrides`` (``ndim`` words each), then (extreme) the
two NaN words.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from numba import types

from torch_mydev.kernels.jit._native import WORD, WORDS, call_native, lanes, native
from torch_mydev.kernels.jit._replay_abi import JIT, c_entry
from torch_mydev.kernels.jit._replay_abi import pointer_of as _pointer_of
from torch_mydev.kernels.jit._seal import seal
from torch_mydev.kernels.reduction._cascade import cascade_at
from torch_mydev.kernels.reduction._extreme import extreme_at

HEAD_WORDS = 8


def pack(out_units: int, in_units: int, loop_words: tuple, divisor: int, shape: np.ndarray,
         ostrides: np.ndarray, istrides: np.ndarray, tail: np.ndarray | None = None
         ) -> np.ndarray:  # fmt: skip
    """The parameter block the entries read (the one definition of its layout)."""
    ndim = shape.shape[0]
    words = [out_units, in_units, ndim, *loop_words, divisor]
    assert len(words) == HEAD_WORDS
    block = np.concatenate([np.array(words, np.int64), shape, ostrides, istrides])
    if tail is not None:
        block = np.concatenate([block, tail.view(np.int64)])
    return block.astype(np.int64)


@numba.njit(inline="always", **JIT)
def _arrays(params, ndim):
    shape = numba.carray(_pointer_of(params + 8 * HEAD_WORDS, np.int64), ndim)
    ostrides = numba.carray(_pointer_of(params + 8 * (HEAD_WORDS + ndim), np.int64), ndim)
    istrides = numba.carray(_pointer_of(params + 8 * (HEAD_WORDS + 2 * ndim), np.int64), ndim)
    return shape, ostrides, istrides


@functools.cache
def cascade_entry(lane_t: type, acc_t: type) -> int:
    """The address of ``cascade_at``'s C entry for a lane type and its accumulator type."""
    lane = lanes(lane_t)
    loop = native(cascade_at, (*[WORD] * 4, lane, lane, *[WORDS] * 3, *[WORD] * 4,
                               lanes(acc_t), WORD))  # fmt: skip

    def cascade_replay(out, inp, unused, params):
        h = numba.carray(_pointer_of(params, np.int64), HEAD_WORDS)
        shape, ostrides, istrides = _arrays(params, h[2])
        out_lane = numba.carray(_pointer_of(out, lane_t), 0)
        in_lane = numba.carray(_pointer_of(inp, lane_t), 0)
        token = np.zeros(1, acc_t)
        call_native(loop, out, inp, h[0], h[1], out_lane, in_lane, shape, ostrides, istrides,
                    h[3], h[4], h[5], h[6], token, h[7])  # fmt: skip
        return 0

    return c_entry(cascade_replay, cascade_entry, (lane_t, acc_t))


@functools.cache
def extreme_entry(lane_t: type) -> int:
    """The address of ``extreme_at``'s C entry for a lane type."""
    lane = lanes(lane_t)
    loop = native(extreme_at, (*[WORD] * 4, lane, lane, *[WORDS] * 3, WORD, types.boolean,
                               lane, WORD))  # fmt: skip

    def extreme_replay(out, inp, unused, params):
        h = numba.carray(_pointer_of(params, np.int64), HEAD_WORDS)
        ndim = h[2]
        shape, ostrides, istrides = _arrays(params, ndim)
        nans = numba.carray(_pointer_of(params + 8 * (HEAD_WORDS + 3 * ndim), lane_t), 2)
        out_lane = numba.carray(_pointer_of(out, lane_t), 0)
        in_lane = numba.carray(_pointer_of(inp, lane_t), 0)
        call_native(loop, out, inp, h[0], h[1], out_lane, in_lane, shape, ostrides, istrides,
                    h[3], h[4] != 0, nans, 0)  # fmt: skip
        return 0

    return c_entry(extreme_replay, extreme_entry, (lane_t,))


seal(__name__)  # keep last: keys the cache of ``_arrays`` by the kernels' sources
