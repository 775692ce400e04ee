"""C entry points of the elementwise and copy loops, for the stub's per-call replay.

Each entry is a ``numba.cfunc`` of one C signature, ``int64 (int64 out, int64 a, int64 b,
int64 params)``: three element addresses and the address of a packed ``int64`` parameter
block (``pack``), read back into the arrays and the compute value the loop takes. The body
only unpacks and calls ``binary_at`` / ``compare_at`` / ``unary_at``, the same compiled loops
the Python path calls, so the bytes written are the same. One entry per combination of
lane types (closure constants: numba freezes them into the machine code, and ``cache=True``
keeps each entry on disk, keyed by them).

Parameter block, in ``int64`` words: ``ndim``, the loop's 8-word ``meta`` (unused words 0),
``shape[ndim]``, ``strides[rows, ndim]`` (rows: 3 for binary/compare, 2 for unary), then the
compute value's bytes (binary only). The copy entries (``_C._replay_copy``) take the
destination and source addresses and ``dst_units``, ``src_units``, ``width`` and the three
tail words of the loop, then ``shape``, ``dst_strides`` and ``src_strides`` (``ndim``
words each), after ``ndim``; a contiguous copy's block is its byte count.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic

from ._copy_planes import copy_planes_at
from ._elementwise_loops import binary_at, compare_at, unary_at
from ._strided import copy_range_at, copy_tiles_at, move_bytes_at

C_SIGNATURE = types.int64(types.int64, types.int64, types.int64, types.int64)
META_WORDS = 8
_JIT = {"cache": True, "nogil": True}


@intrinsic
def _pointer_of(typingctx, address, cls):
    """``address`` as a pointer to elements of the number class ``cls`` (``np.float32``)."""
    pointer = types.CPointer(cls.instance_type)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(address, cls), codegen


@functools.cache
def binary_entry(out_t: type, a_t: type, b_t: type, value_t: type) -> int:
    """The address of ``binary_at``'s C entry for these lane types and compute value type."""

    def binary_replay(out, a, b, params):
        ndim = numba.carray(_pointer_of(params, np.int64), 1)[0]
        meta = numba.carray(_pointer_of(params + 8, np.int64), META_WORDS)
        shape = numba.carray(_pointer_of(params + 72, np.int64), ndim)
        strides = numba.carray(_pointer_of(params + 72 + 8 * ndim, np.int64), (3, ndim))
        value = numba.carray(_pointer_of(params + 72 + 32 * ndim, value_t), 1)[0]
        out_lane = numba.carray(_pointer_of(out, out_t), 0)
        a_lane = numba.carray(_pointer_of(a, a_t), 0)
        b_lane = numba.carray(_pointer_of(b, b_t), 0)
        return binary_at(out, a, b, out_lane, a_lane, b_lane, meta, strides, shape, value)

    return numba.cfunc(C_SIGNATURE, **_JIT)(binary_replay).address


@functools.cache
def compare_entry(out_t: type, a_t: type) -> int:
    """The address of ``compare_at``'s C entry for these lane types."""

    def compare_replay(out, a, b, params):
        ndim = numba.carray(_pointer_of(params, np.int64), 1)[0]
        meta = numba.carray(_pointer_of(params + 8, np.int64), META_WORDS)
        shape = numba.carray(_pointer_of(params + 72, np.int64), ndim)
        strides = numba.carray(_pointer_of(params + 72 + 8 * ndim, np.int64), (3, ndim))
        out_lane = numba.carray(_pointer_of(out, out_t), 0)
        a_lane = numba.carray(_pointer_of(a, a_t), 0)
        return compare_at(out, a, b, out_lane, a_lane, meta, strides, shape)

    return numba.cfunc(C_SIGNATURE, **_JIT)(compare_replay).address


@functools.cache
def unary_entry(lane_t: type) -> int:
    """The address of ``unary_at``'s C entry for this lane type (``b`` is ignored)."""

    def unary_replay(out, a, b, params):
        ndim = numba.carray(_pointer_of(params, np.int64), 1)[0]
        meta = numba.carray(_pointer_of(params + 8, np.int64), META_WORDS)
        shape = numba.carray(_pointer_of(params + 72, np.int64), ndim)
        strides = numba.carray(_pointer_of(params + 72 + 8 * ndim, np.int64), (2, ndim))
        lane = numba.carray(_pointer_of(out, lane_t), 0)
        return unary_at(out, a, lane, meta, strides, shape)

    return numba.cfunc(C_SIGNATURE, **_JIT)(unary_replay).address


@numba.njit(inline="always", **_JIT)
def _copy_words(params, ndim):
    """A copy block's 7 head words, ``shape``, ``dst_strides`` and ``src_strides``."""
    head = numba.carray(_pointer_of(params, np.int64), 7)
    shape = numba.carray(_pointer_of(params + 56, np.int64), ndim)
    dst_strides = numba.carray(_pointer_of(params + 56 + 8 * ndim, np.int64), ndim)
    src_strides = numba.carray(_pointer_of(params + 56 + 16 * ndim, np.int64), ndim)
    return head, shape, dst_strides, src_strides


@functools.cache
def move_entry() -> int:
    """The address of ``move_bytes_at``'s C entry (a contiguous copy: one byte range)."""

    def move_replay(dst, src, unused, params):
        move_bytes_at(dst, src, numba.carray(_pointer_of(params, np.int64), 1)[0])
        return 0

    return numba.cfunc(C_SIGNATURE, **_JIT)(move_replay).address


@functools.cache
def strided_entry(loop: str, unit_t: type) -> int:
    """The address of the C entry of a strided copy loop (``"range"``, ``"tiles"`` or
    ``"planes"``) over units of ``unit_t``."""

    if loop == "range":

        def range_replay(dst, src, unused, params):
            ndim = numba.carray(_pointer_of(params, np.int64), 1)[0]
            h, shape, ds, ss = _copy_words(params, ndim)
            lane = numba.carray(_pointer_of(dst, unit_t), 0)
            copy_range_at(dst, src, h[1], h[2], ds, ss, shape, h[3], lane, h[4], h[5])
            return 0

        body = range_replay
    elif loop == "tiles":

        def tiles_replay(dst, src, unused, params):
            ndim = numba.carray(_pointer_of(params, np.int64), 1)[0]
            h, shape, ds, ss = _copy_words(params, ndim)
            lane = numba.carray(_pointer_of(dst, unit_t), 0)
            copy_tiles_at(dst, src, h[1], h[2], ds, ss, shape, h[3], lane, h[4], h[5], h[6])
            return 0

        body = tiles_replay
    else:

        def planes_replay(dst, src, unused, params):
            ndim = numba.carray(_pointer_of(params, np.int64), 1)[0]
            h, shape, ds, ss = _copy_words(params, ndim)
            lane = numba.carray(_pointer_of(dst, unit_t), 0)
            copy_planes_at(dst, src, h[1], h[2], ds, ss, shape, h[3], lane, h[4], h[5], h[6])
            return 0

        body = planes_replay
    return numba.cfunc(C_SIGNATURE, **_JIT)(body).address
