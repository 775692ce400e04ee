"""C entry points of the same-dtype copy loops and of the small float casts, for the stub's
``_C._replay_copy`` and its ``clone``/``_to_copy`` replay.

The bodies unpack a parameter block and call ``move_bytes_at`` or the DimCounter, tiled or
planes loop, the compiled loops the Python path calls (the strided ones by symbol,
``jit._native``). Block, in ``int64`` words: a contiguous copy's byte count; else ``ndim``,
``dst_units``, ``src_units``, ``width``, the loop's three tail words, then ``shape``,
``dst_strides`` and ``src_strides`` (``ndim`` words each). A cast's block is its element
count (``cast_entry``).
"""

from __future__ import annotations

import functools

import numba
import numpy as np

from torch_mydev.kernels.copy._convert import (
    read_integral,
    read_reduced,
    write_floating,
    write_reduced,
)
from torch_mydev.kernels.copy._planes import copy_planes_at
from torch_mydev.kernels.copy._strided import copy_range_at, copy_tiles_at, move_bytes_at
from torch_mydev.kernels.jit._native import WORD, WORDS, call_native, lanes, native
from torch_mydev.kernels.jit._replay_abi import JIT, c_entry
from torch_mydev.kernels.jit._replay_abi import pointer_of as _pointer_of
from torch_mydev.kernels.jit._seal import seal


def pack(shape, dst_units: int, src_units: int, width: int, tail: tuple, dst_strides,
         src_strides) -> np.ndarray:  # fmt: skip
    """The parameter block of a strided copy entry (the one definition of its layout): ndim,
    the extents of destination and source in units, ``width``, three loop words (``tail``:
    ``begin, end`` of a range; ``tile`` or ``block``, then the first and last tile or block),
    then ``shape``, ``dst_strides`` and ``src_strides`` (in units)."""
    tail = (*tail, 0, 0, 0)[:3]
    return np.array(
        [len(shape), dst_units, src_units, width, *tail, *shape, *dst_strides, *src_strides],
        dtype=np.int64,
    )


@numba.njit(inline="always", **JIT)
def _copy_words(params):
    """A copy block's 7 head words, ``shape``, ``dst_strides`` and ``src_strides``."""
    head = numba.carray(_pointer_of(params, np.int64), 7)
    ndim = head[0]
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

    return c_entry(move_replay, move_entry, ())


@functools.cache
def strided_entry(loop: str, unit_t: type) -> int:
    """The address of the C entry of a strided copy loop (``"range"``, ``"tiles"`` or
    ``"planes"``) over units of ``unit_t``."""

    head = (*[WORD] * 4, *[WORDS] * 3, WORD, lanes(unit_t), WORD, WORD)
    if loop == "range":
        walk = native(copy_range_at, head)

        def range_replay(dst, src, unused, params):
            h, shape, ds, ss = _copy_words(params)
            lane = numba.carray(_pointer_of(dst, unit_t), 0)
            call_native(walk, dst, src, h[1], h[2], ds, ss, shape, h[3], lane, h[4], h[5])
            return 0

        body = range_replay
    else:
        walk = native(copy_tiles_at if loop == "tiles" else copy_planes_at, (*head, WORD))

        def blocks_replay(dst, src, unused, params):
            h, shape, ds, ss = _copy_words(params)
            lane = numba.carray(_pointer_of(dst, unit_t), 0)
            call_native(walk, dst, src, h[1], h[2], ds, ss, shape, h[3], lane, h[4], h[5], h[6])
            return 0

        body = blocks_replay
    return c_entry(body, strided_entry, (loop, unit_t))


# Elements a cast entry converts at a time: its canonical buffer (up to 8 bytes an element)
# is one small heap block per call, never a fresh mapping the first touch faults in.
REPLAY_CAST_CHUNK = 4096


@numba.njit(inline="always", **JIT)
def _read_as_is(source, flag, n, buffer):
    return source


@numba.njit(inline="always", **JIT)
def _read_reduced(source, is_bfloat16, n, bits):
    read_reduced(bits, source, is_bfloat16, n)
    return bits[:n].view(np.float32)


@numba.njit(inline="always", **JIT)
def _read_integral(source, is_bool, n, values):
    read_integral(values, source, is_bool, n)
    return values[:n]


@numba.njit(inline="always", **JIT)
def _write_floating(target, values, flag, nan_bits, n):
    write_floating(target, 1, values, 1, n)


@numba.njit(inline="always", **JIT)
def _write_reduced(target, values, is_bfloat16, nan_bits, n):
    write_reduced(target, values, 1, is_bfloat16, nan_bits, n)


# reader -> (its function, its canonical buffer's element type and chunk length: as_is reads
# the source where it lies and takes an empty one); writer -> its function
_READERS = {
    "as_is": (_read_as_is, np.uint8, 0),
    "reduced": (_read_reduced, np.uint32, REPLAY_CAST_CHUNK),
    "integral": (_read_integral, np.int64, REPLAY_CAST_CHUNK),
}
_WRITERS = {"floating": _write_floating, "reduced": _write_reduced}


@functools.cache
def cast_entry(src_lane: type, read: str, read_flag: bool, dst_lane: type, write: str,
               write_flag: bool, nan_bits: int) -> int:  # fmt: skip
    """The address of the C entry of a contiguous cast to float16, bfloat16, float32 or
    float64: the two steps ``cast.converters`` takes for it, with the same arguments, over
    chunks of ``REPLAY_CAST_CHUNK`` elements (each element converts on its own). The
    source is read ``"as_is"`` (float32, float64, int64), ``"reduced"`` (float16/bfloat16
    into float32 bits, ``read_reduced``; ``read_flag``: bfloat16) or ``"integral"`` (bool
    and the narrower integers into int64, ``read_integral``; ``read_flag``: bool); it is
    written ``"floating"`` (``write_floating``) or ``"reduced"`` (``write_reduced``;
    ``write_flag``: bfloat16, a NaN as ``nan_bits``). Block: the element count."""
    (reader, canonical, length), writer = _READERS[read], _WRITERS[write]
    chunk = REPLAY_CAST_CHUNK

    def cast_replay(dst, src, unused, params):
        n = numba.carray(_pointer_of(params, np.int64), 1)[0]
        source = numba.carray(_pointer_of(src, src_lane), n)
        target = numba.carray(_pointer_of(dst, dst_lane), n)
        buffer = np.empty(min(n, length), canonical)
        for begin in range(0, n, chunk):
            m = min(chunk, n - begin)
            values = reader(source[begin : begin + m], read_flag, m, buffer)
            writer(target[begin : begin + m], values, write_flag, nan_bits, m)
        return 0

    args = (src_lane, read, read_flag, dst_lane, write, write_flag, nan_bits)
    return c_entry(cast_replay, cast_entry, args)


seal(__name__)  # keep last: keys the caches and widens the literals of the loops above
