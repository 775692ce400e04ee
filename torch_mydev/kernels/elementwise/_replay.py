"""C entry points of the elementwise loops, for the stub's ``_C._replay``.

The bodies only unpack a parameter block and call ``binary_at`` / ``compare_at`` /
``unary_at``, the machine code the Python path calls (by symbol, ``jit._native``), so the
bytes written are the same.
Block, in ``int64`` words: ``ndim``, the loop's 8-word ``meta`` (unused words 0),
``shape[ndim]``, ``strides[rows, ndim]`` (rows: 3 for binary/compare, 2 for unary), then the
compute value's bytes (binary only).
"""

from __future__ import annotations

import functools

import numba
import numpy as np

from torch_mydev.kernels.elementwise._loops import binary_at, compare_at, unary_at
from torch_mydev.kernels.jit._native import WORD, WORD_ROWS, WORDS, call_native, lanes, native
from torch_mydev.kernels.jit._replay_abi import JIT, c_entry
from torch_mydev.kernels.jit._replay_abi import pointer_of as _pointer_of
from torch_mydev.kernels.jit._seal import seal

META_WORDS = 8


def pack(meta: np.ndarray, strides: np.ndarray, shape: np.ndarray, value=None) -> np.ndarray:
    """The parameter block the entries read: ndim, meta (``META_WORDS`` words), shape,
    strides, then the compute value's bytes (the one definition of its layout)."""
    ndim = shape.shape[0]
    head = _head_words(strides, shape)
    params = np.zeros(head + 2, dtype=np.int64)
    params[0] = ndim
    params[1 : 1 + meta.shape[0]] = meta
    params[1 + META_WORDS : 1 + META_WORDS + ndim] = shape
    params[1 + META_WORDS + ndim : head] = strides.reshape(-1)
    if value is not None:
        raw = np.frombuffer(np.asarray(value).tobytes(), dtype=np.uint8)
        params.view(np.uint8)[8 * head : 8 * head + raw.size] = raw
    return params


def _head_words(strides: np.ndarray, shape: np.ndarray) -> int:
    """The words before the compute value: ndim, meta, shape, strides."""
    return 1 + META_WORDS + shape.shape[0] + strides.size


def value_word(args: tuple) -> int:
    """The word of a binary loop's block (``pack``) where its compute value starts (add's
    ``alpha``), for its arguments after the addresses (``Prepared.args``)."""
    *_, strides, shape, _value = args
    return _head_words(strides, shape)


@numba.njit(inline="always", **JIT)
def _words(params, rows):
    """A block's ``ndim``, ``meta``, ``shape`` and ``strides`` (``rows`` of them)."""
    ndim = numba.carray(_pointer_of(params, np.int64), 1)[0]
    meta = numba.carray(_pointer_of(params + 8, np.int64), META_WORDS)
    shape = numba.carray(_pointer_of(params + 72, np.int64), ndim)
    strides = numba.carray(_pointer_of(params + 72 + 8 * ndim, np.int64), (rows, ndim))
    return ndim, meta, shape, strides


def block_of(kind: str, args: tuple) -> tuple[int, np.ndarray]:
    """The C entry of ``<kind>_at`` for a prepared loop's arguments after the addresses
    (``Prepared.args``), and the parameter block it reads (``pack``)."""
    if kind == "binary":
        *_, meta, strides, shape, value = args
        return entry(kind, args), pack(meta, strides, shape, value)
    *_, meta, strides, shape = args
    return entry(kind, args), pack(meta, strides, shape)


def entry(kind: str, args: tuple) -> int:
    """The C entry of ``<kind>_at`` (``binary``, ``compare``, ``unary``) for the lane types
    and compute value of its arguments after the addresses (``Prepared.args``)."""
    if kind == "binary":
        out_t, a_t, b_t, *_, value = args
        return binary_entry(out_t.dtype.type, a_t.dtype.type, b_t.dtype.type, type(value))
    if kind == "compare":
        return compare_entry(args[0].dtype.type, args[1].dtype.type)
    return unary_entry(args[0].dtype.type)


@functools.cache
def binary_entry(out_t: type, a_t: type, b_t: type, value_t: type) -> int:
    """The address of ``binary_at``'s C entry for these lane types and compute value type."""
    value = numba.typeof(value_t(0))
    loop = native(binary_at, (*[WORD] * 3, lanes(out_t), lanes(a_t), lanes(b_t), WORDS,
                              WORD_ROWS, WORDS, value))  # fmt: skip

    def binary_replay(out, a, b, params):
        ndim, meta, shape, strides = _words(params, 3)
        value = numba.carray(_pointer_of(params + 72 + 32 * ndim, value_t), 1)[0]
        out_lane = numba.carray(_pointer_of(out, out_t), 0)
        a_lane = numba.carray(_pointer_of(a, a_t), 0)
        b_lane = numba.carray(_pointer_of(b, b_t), 0)
        return call_native(loop, out, a, b, out_lane, a_lane, b_lane, meta, strides, shape, value)

    return c_entry(binary_replay, binary_entry, (out_t, a_t, b_t, value_t))


@functools.cache
def compare_entry(out_t: type, a_t: type) -> int:
    """The address of ``compare_at``'s C entry for these lane types."""
    loop = native(compare_at, (*[WORD] * 3, lanes(out_t), lanes(a_t), WORDS, WORD_ROWS, WORDS))

    def compare_replay(out, a, b, params):
        _, meta, shape, strides = _words(params, 3)
        out_lane = numba.carray(_pointer_of(out, out_t), 0)
        a_lane = numba.carray(_pointer_of(a, a_t), 0)
        return call_native(loop, out, a, b, out_lane, a_lane, meta, strides, shape)

    return c_entry(compare_replay, compare_entry, (out_t, a_t))


@functools.cache
def unary_entry(lane_t: type) -> int:
    """The address of ``unary_at``'s C entry for this lane type (``b`` is ignored)."""
    loop = native(unary_at, (WORD, WORD, lanes(lane_t), WORDS, WORD_ROWS, WORDS))

    def unary_replay(out, a, b, params):
        _, meta, shape, strides = _words(params, 2)
        lane = numba.carray(_pointer_of(out, lane_t), 0)
        return call_native(loop, out, a, lane, meta, strides, shape)

    return c_entry(unary_replay, unary_entry, (lane_t,))


seal(__name__)  # keep last: keys the caches and widens the literals of the loops above
