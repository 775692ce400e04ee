"""C entry points of the reduction walks, ``where`` and ``fill``, for ``threads.parallel_calls``.

The bodies unpack a parameter block and call the serial loops the Python path calls, by
symbol (``jit._native``): (``reduction._loops.inner_at`` / ``outer_at`` / ``split_part_at``,
``elementwise._loops.where_kernel`` / ``fill_kernel``) on the part of their range the block
names, so the bytes written are the same. The blocks' layouts are defined once, by
``pack_walk`` and ``pack_move`` here.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from numba import types

from torch_mydev.kernels.elementwise._loops import fill_kernel, where_kernel
from torch_mydev.kernels.jit._native import WORD, WORD_ROWS, WORDS, call_native, lanes, native
from torch_mydev.kernels.jit._replay_abi import c_entry
from torch_mydev.kernels.jit._replay_abi import pointer_of as _pointer_of
from torch_mydev.kernels.jit._seal import seal
from torch_mydev.kernels.reduction._loops import inner_at, outer_at, split_part_at

# Words before a walk block's arrays: nk, nr, obase, ibase, fmt_in, fmt_out, op, the mean's
# divisor (float64 bits), begin, end, out_units, in_units, partial's address, partial's length.
WALK_HEAD = 14


def pack_walk(common: tuple, begin: int, end: int, units: tuple[int, int],
              partial: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """A reduction walk's block: ``common`` = (obase, ibase, kshape, kout, kin, rshape, rin,
    fmt_in, fmt_out, op, div) as ``reduction.prepare`` lays them out, the range ``begin ..
    end`` (outputs, kept-dim indices or chunks), the extents in lanes of output and input,
    and for a split the partial results' array; then kshape, kout, kin, rshape, rin."""
    obase, ibase, kshape, kout, kin, rshape, rin, fmt_in, fmt_out, op, div = common
    head = [
        kshape.shape[0],
        rshape.shape[0],
        obase,
        ibase,
        fmt_in,
        fmt_out,
        op,
        int(np.float64(div).view(np.int64)),
        begin,
        end,
        *units,
        0 if partial is None else partial.ctypes.data,
        0 if partial is None else partial.shape[0],
    ]
    return np.concatenate([np.array(head, np.int64), kshape, kout, kin, rshape, rin])


@numba.njit(inline="always", cache=True, nogil=True)
def _walk_words(params):
    h = numba.carray(_pointer_of(params, np.int64), WALK_HEAD)
    nk, nr = h[0], h[1]
    at = params + 8 * WALK_HEAD
    kshape = numba.carray(_pointer_of(at, np.int64), nk)
    kout = numba.carray(_pointer_of(at + 8 * nk, np.int64), nk)
    kin = numba.carray(_pointer_of(at + 16 * nk, np.int64), nk)
    rshape = numba.carray(_pointer_of(at + 24 * nk, np.int64), nr)
    rin = numba.carray(_pointer_of(at + 24 * nk + 8 * nr, np.int64), nr)
    div = numba.carray(_pointer_of(params + 56, np.float64), 1)[0]
    return h, kshape, kout, kin, rshape, rin, div


@functools.cache
def walk_entry(walk: str, out_t: type, in_t: type, acc_t: type) -> int:
    """The address of the C entry of ``<walk>_at`` (``inner``, ``outer``, ``split_part``)
    for these lane types (``acc_t``: a split's partial results)."""

    head = (*[WORD] * 4, lanes(out_t), lanes(in_t), WORD, WORD, *[WORDS] * 5, *[WORD] * 3,
            types.float64)  # fmt: skip
    if walk == "split_part":
        loop = native(split_part_at, (*head, lanes(acc_t), WORD, WORD))

        def split_replay(out, inp, unused, params):
            h, kshape, kout, kin, rshape, rin, div = _walk_words(params)
            out_lane = numba.carray(_pointer_of(out, out_t), 0)
            in_lane = numba.carray(_pointer_of(inp, in_t), 0)
            partial = numba.carray(_pointer_of(h[12], acc_t), h[13])
            call_native(loop, out, inp, h[10], h[11], out_lane, in_lane, h[2], h[3], kshape, kout,
                        kin, rshape, rin, h[4], h[5], h[6], div, partial, h[8], h[9])  # fmt: skip
            return 0

        body = split_replay
    else:
        loop = native(inner_at if walk == "inner" else outer_at, (*head, WORD, WORD))

        def walk_replay(out, inp, unused, params):
            h, kshape, kout, kin, rshape, rin, div = _walk_words(params)
            out_lane = numba.carray(_pointer_of(out, out_t), 0)
            in_lane = numba.carray(_pointer_of(inp, in_t), 0)
            call_native(loop, out, inp, h[10], h[11], out_lane, in_lane, h[2], h[3], kshape,
                        kout, kin, rshape, rin, h[4], h[5], h[6], div, h[8], h[9])  # fmt: skip
            return 0

        body = walk_replay
    return c_entry(body, walk_entry, (walk, out_t, in_t, acc_t))


def pack_move(arrays: tuple, base: np.ndarray, strides: np.ndarray, shape: np.ndarray,
              value: np.ndarray | None = None) -> np.ndarray:  # fmt: skip
    """A ``where`` / ``fill`` block: ndim, then per operand (out, cond, a, b for ``where``;
    out for ``fill``) its address and length in lanes, its start offset, then shape, strides
    (operands x ndim) and, for ``fill``, the value's bits."""
    words = [shape.shape[0]]
    for array, start in zip(arrays, base, strict=True):
        words += [array.ctypes.data, array.shape[0], start]
    words += [*shape, *strides.reshape(-1)]
    if value is not None:  # one lane: 1 to 16 bytes
        raw = value.tobytes()
        words += np.frombuffer(raw.ljust(-(-len(raw) // 8) * 8, b"\0"), np.int64).tolist()
    return np.array(words, dtype=np.int64)


@functools.cache
def move_entry(kind: str, lane_t: type) -> int:
    """The address of the C entry of ``where_kernel`` or ``fill_kernel`` for lanes of
    ``lane_t`` (the condition is bytes); the block holds every operand (``pack_move``)."""

    lane = lanes(lane_t)
    if kind == "where":
        loop = native(where_kernel, (lane, lanes(np.uint8), lane, lane, WORDS, WORD_ROWS, WORDS))

        def where_replay(unused_a, unused_b, unused_c, params):
            w = numba.carray(_pointer_of(params, np.int64), 13)
            ndim = w[0]
            out = numba.carray(_pointer_of(w[1], lane_t), w[2])
            cond = numba.carray(_pointer_of(w[4], np.uint8), w[5])
            a = numba.carray(_pointer_of(w[7], lane_t), w[8])
            b = numba.carray(_pointer_of(w[10], lane_t), w[11])
            base = np.array([w[3], w[6], w[9], w[12]], dtype=np.int64)
            shape = numba.carray(_pointer_of(params + 104, np.int64), ndim)
            strides = numba.carray(_pointer_of(params + 104 + 8 * ndim, np.int64), (4, ndim))
            return call_native(loop, out, cond, a, b, base, strides, shape)

        body = where_replay
    else:
        loop = native(fill_kernel, (lane, lane, WORDS, WORD_ROWS, WORDS))

        def fill_replay(unused_a, unused_b, unused_c, params):
            w = numba.carray(_pointer_of(params, np.int64), 4)
            ndim = w[0]
            out = numba.carray(_pointer_of(w[1], lane_t), w[2])
            base = np.array([w[3]], dtype=np.int64)
            shape = numba.carray(_pointer_of(params + 32, np.int64), ndim)
            strides = numba.carray(_pointer_of(params + 32 + 8 * ndim, np.int64), (1, ndim))
            value = numba.carray(_pointer_of(params + 32 + 16 * ndim, lane_t), 1)
            return call_native(loop, out, value, base, strides, shape)

        body = fill_replay
    return c_entry(body, move_entry, (kind, lane_t))


seal(__name__)  # keep last: keys the caches and widens the literals of the loops above
