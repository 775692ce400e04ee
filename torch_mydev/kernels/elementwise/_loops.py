"""Walks an elementwise plan, row by row, applying the rules of ``_rules`` (numba loops).

Every kernel walks a TensorIterator plan -- a fastest-first shape and per-operand element
strides -- one row (dim 0) at a time, and reads and writes typed *lanes* over the raw storage:
the dtype itself for the integer, float and complex types, ``uint8`` for bool, ``uint16`` bit
patterns for float16 and bfloat16 (numba has no CPU float16). A small ``fmt`` flag says what a
``uint8`` or ``uint16`` lane holds; what each element is (the compute type, the rounding, the
per-op rule) is ``_rules.py``. Kernels return a status: 0, or 1 when an integer division met
a zero divisor (torch raises ``ZeroDivisionError`` there).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, uint64

from torch_mydev.kernels.copy._strided import _pointer
from torch_mydev.kernels.dtypes import (  # what a uint8 / uint16 lane holds
    PLAIN,
)
from torch_mydev.kernels.elementwise._rules import (
    ADD,
    CLAMP_MIN,
    DIV,
    DIV_FLOOR,
    DIV_TRUNC,
    EQ,
    MUL,
    NE,
    NEG,
    THRESHOLD,
    THRESHOLD_BACKWARD,
    abs_rule,
    add_rule,
    clamp_min_rule,
    div_floor_rule,
    div_rule,
    div_trunc_rule,
    load,
    ordered,
    store,
    threshold_rule,
    zero_of,
)
from torch_mydev.kernels.jit._scratch import stack_copy, stack_zeros
from torch_mydev.kernels.jit._seal import JIT, seal
from torch_mydev.kernels.reduction._walks import count_above

# ---- rows --------------------------------------------------------------------------------------


@njit(cache=True, nogil=True, inline="always")
def _ix(offset, i, stride):
    """Lane index ``offset + i * stride`` as uint64: the loops' indices are never negative,
    and unsigned ones spare numba's negative-index wraparound test per element (with it the
    1K-element add ran about 4x slower and did not vectorise)."""
    return uint64(offset) + uint64(i) * uint64(stride)


@njit(**JIT, inline="always")
def _next_row(counter, offsets, strides, shape):
    """Advance the multi-index over dims 1.. by one row and move every operand's offset."""
    for d in range(1, shape.shape[0]):
        counter[d] += 1
        if counter[d] < shape[d]:
            for k in range(offsets.shape[0]):
                offsets[k] += strides[k, d]
            return
        counter[d] = 0
        for k in range(offsets.shape[0]):
            offsets[k] -= strides[k, d] * (shape[d] - 1)


@njit(**JIT)
def _binary_row(op, out, o, so, a, ia, sa, b, ib, sb, n, alpha, fmt, out_fmt, mid, check_zero):
    if op == ADD and mid == PLAIN:
        # the same sum as add_rule's, with the rounding branch out of the loop: a loop body
        # without it vectorises (float32 1M elements: about 4x faster)
        for i in range(n):
            x = load(a, _ix(ia, i, sa), fmt)
            y = load(b, _ix(ib, i, sb), fmt)
            store(out, _ix(o, i, so), add_rule(x, y, alpha, PLAIN), out_fmt)
    elif op == ADD:
        for i in range(n):
            x = load(a, _ix(ia, i, sa), fmt)
            y = load(b, _ix(ib, i, sb), fmt)
            store(out, _ix(o, i, so), add_rule(x, y, alpha, mid), out_fmt)
    elif op == MUL:
        for i in range(n):
            x = load(a, _ix(ia, i, sa), fmt)
            y = load(b, _ix(ib, i, sb), fmt)
            store(out, _ix(o, i, so), x * y, out_fmt)
    elif op == DIV:
        for i in range(n):
            x = load(a, _ix(ia, i, sa), fmt)
            y = load(b, _ix(ib, i, sb), fmt)
            store(out, _ix(o, i, so), div_rule(x, y), out_fmt)
    elif op == DIV_TRUNC:
        for i in range(n):
            x = load(a, _ix(ia, i, sa), fmt)
            y = load(b, _ix(ib, i, sb), fmt)
            if check_zero and y == 0:
                return 1
            store(out, _ix(o, i, so), div_trunc_rule(x, y, mid), out_fmt)
    elif op == CLAMP_MIN:
        for i in range(n):
            x = load(a, _ix(ia, i, sa), fmt)
            store(out, _ix(o, i, so), clamp_min_rule(x, alpha), out_fmt)
    elif op == THRESHOLD:
        for i in range(n):
            x = load(a, _ix(ia, i, sa), fmt)
            y = load(b, _ix(ib, i, sb), fmt)
            store(out, _ix(o, i, so), threshold_rule(x, alpha, y, x), out_fmt)
    elif op == THRESHOLD_BACKWARD:
        for i in range(n):
            x = load(a, _ix(ia, i, sa), fmt)
            y = load(b, _ix(ib, i, sb), fmt)
            store(out, _ix(o, i, so), threshold_rule(x, alpha, zero_of(y), y), out_fmt)
    elif op == DIV_FLOOR:
        for i in range(n):
            x = load(a, _ix(ia, i, sa), fmt)
            y = load(b, _ix(ib, i, sb), fmt)
            if check_zero and y == 0:
                return 1
            store(out, _ix(o, i, so), div_floor_rule(x, y, mid), out_fmt)
    return 0


@njit(**JIT, inline="always")
def binary_kernel(op, out, a, b, base, strides, shape, alpha, fmt, out_fmt, mid, check_zero):
    """``out = op(a, b)`` over a plan (add/mul/div and its rounding modes).

    ``base`` holds the three start offsets and ``strides`` a ``(3, ndim)`` array, in elements
    of each lane; ``shape`` is fastest first with at least one dim. ``alpha`` (add) is already
    in the compute type. ``fmt`` describes the input lanes, ``out_fmt`` the output lane, ``mid``
    the rounding of intermediates. ``check_zero`` stops at a zero divisor and returns 1.
    """
    offsets = stack_copy(base)
    counter = stack_zeros(shape.shape[0], np.int64)
    n = shape[0]
    for _ in range(count_above(shape, 1)):
        status = _binary_row(
            op,
            out,
            offsets[0],
            strides[0, 0],
            a,
            offsets[1],
            strides[1, 0],
            b,
            offsets[2],
            strides[2, 0],
            n,
            alpha,
            fmt,
            out_fmt,
            mid,
            check_zero,
        )
        if status != 0:
            return status
        _next_row(counter, offsets, strides, shape)
    return 0


@njit(**JIT)
def _compare_row(op, out, o, so, a, ia, sa, b, ib, sb, n, fmt):
    if op == EQ:
        for i in range(n):
            out[_ix(o, i, so)] = (
                1 if load(a, _ix(ia, i, sa), fmt) == load(b, _ix(ib, i, sb), fmt) else 0
            )
    elif op == NE:
        for i in range(n):
            out[_ix(o, i, so)] = (
                1 if load(a, _ix(ia, i, sa), fmt) != load(b, _ix(ib, i, sb), fmt) else 0
            )
    else:
        for i in range(n):
            x = load(a, _ix(ia, i, sa), fmt)
            y = load(b, _ix(ib, i, sb), fmt)
            out[_ix(o, i, so)] = 1 if ordered(x, y, op) else 0


@njit(**JIT, inline="always")
def compare_kernel(op, out, a, b, base, strides, shape, fmt):
    """``out = op(a, b)`` for the six comparisons; ``out`` is a bool (uint8) lane array."""
    offsets = stack_copy(base)
    counter = stack_zeros(shape.shape[0], np.int64)
    n = shape[0]
    for _ in range(count_above(shape, 1)):
        _compare_row(
            op,
            out,
            offsets[0],
            strides[0, 0],
            a,
            offsets[1],
            strides[1, 0],
            b,
            offsets[2],
            strides[2, 0],
            n,
            fmt,
        )
        _next_row(counter, offsets, strides, shape)
    return 0


@njit(**JIT)
def _unary_row(op, out, o, so, a, ia, sa, n, fmt):
    if op == NEG:
        for i in range(n):
            store(out, _ix(o, i, so), -load(a, _ix(ia, i, sa), fmt), fmt)
    else:
        for i in range(n):
            store(out, _ix(o, i, so), abs_rule(load(a, _ix(ia, i, sa), fmt)), fmt)


@njit(**JIT, inline="always")
def unary_kernel(op, out, a, base, strides, shape, fmt):
    """``out = op(a)`` (neg, abs) with input and output of one lane type and format."""
    offsets = stack_copy(base)
    counter = stack_zeros(shape.shape[0], np.int64)
    n = shape[0]
    for _ in range(count_above(shape, 1)):
        _unary_row(op, out, offsets[0], strides[0, 0], a, offsets[1], strides[1, 0], n, fmt)
        _next_row(counter, offsets, strides, shape)
    return 0


@njit(**JIT)
def where_kernel(out, cond, a, b, base, strides, shape):
    """``out = a if cond else b``, moving lanes unchanged (``where_kernel``)."""
    offsets = stack_copy(base)
    counter = stack_zeros(shape.shape[0], np.int64)
    n = shape[0]
    for _ in range(count_above(shape, 1)):
        o, c, ia, ib = offsets[0], offsets[1], offsets[2], offsets[3]
        so, sc, sa, sb = strides[0, 0], strides[1, 0], strides[2, 0], strides[3, 0]
        for i in range(n):
            if cond[_ix(c, i, sc)] != 0:
                out[_ix(o, i, so)] = a[_ix(ia, i, sa)]
            else:
                out[_ix(o, i, so)] = b[_ix(ib, i, sb)]
        _next_row(counter, offsets, strides, shape)
    return 0


@njit(**JIT)
def fill_kernel(out, value, base, strides, shape):
    """Write ``value[0]`` (a lane already in the output's type) into every element."""
    offsets = stack_copy(base)
    counter = stack_zeros(shape.shape[0], np.int64)
    n = shape[0]
    v = value[0]
    for _ in range(count_above(shape, 1)):
        o = offsets[0]
        so = strides[0, 0]
        for i in range(n):
            out[_ix(o, i, so)] = v
        _next_row(counter, offsets, strides, shape)
    return 0


# ---- the same kernels over raw addresses -------------------------------------------------------
#
# The walkers above (``binary_kernel``, ``compare_kernel``, ``unary_kernel``) are inlined into
# these, which are all that calls them: a function numba compiles on its own costs its own
# typing, module and optimisation, 0.35 s of a float32 ``binary_at``'s 3.5 s and 0.9 s of
# ``compare_at``'s 2.3 s (issue 19's first use). The one-dim shortcut stays: without it (the
# row function called from the walker alone) two-dim calls ran up to a fifth slower in a
# micro-benchmark.
#
# What Python calls: the operands' addresses (element [0, ..., 0] of each), any array of each
# operand's lane type (only its dtype is read), and ``meta``, an int64 array of the plan's
# constants: the operands' extents in lanes (one past the last element the plan reaches), then
# the kernel's codes. With the operand offsets all 0, ``strides`` and ``shape`` are as above.


@njit(**JIT)
def binary_at(
    out_address,
    a_address,
    b_address,
    out_lane,
    a_lane,
    b_lane,
    meta,
    strides,
    shape,
    alpha,
):
    """``binary_kernel`` at three addresses; ``meta`` = extents of out, a, b, then ``op``,
    ``fmt``, ``out_fmt``, ``mid``, ``check_zero`` (0/1). A one-dim plan runs its one row
    directly (no offset arrays to allocate)."""
    out = numba.carray(_pointer(out_address, out_lane), meta[0])
    a = numba.carray(_pointer(a_address, a_lane), meta[1])
    b = numba.carray(_pointer(b_address, b_lane), meta[2])
    op, fmt, out_fmt, mid, check_zero = meta[3], meta[4], meta[5], meta[6], meta[7] != 0
    if shape.shape[0] == 1:
        return _binary_row(
            op,
            out,
            0,
            strides[0, 0],
            a,
            0,
            strides[1, 0],
            b,
            0,
            strides[2, 0],
            shape[0],
            alpha,
            fmt,
            out_fmt,
            mid,
            check_zero,
        )
    base = stack_zeros(3, np.int64)
    return binary_kernel(op, out, a, b, base, strides, shape, alpha, fmt, out_fmt, mid, check_zero)


@njit(**JIT)
def compare_at(out_address, a_address, b_address, out_lane, a_lane, meta, strides, shape):
    """``compare_kernel`` at three addresses (``a`` and ``b`` share ``a_lane``); ``meta`` =
    extents of out, a, b, then ``op``, ``fmt``."""
    out = numba.carray(_pointer(out_address, out_lane), meta[0])
    a = numba.carray(_pointer(a_address, a_lane), meta[1])
    b = numba.carray(_pointer(b_address, a_lane), meta[2])
    if shape.shape[0] == 1:
        _compare_row(
            meta[3],
            out,
            0,
            strides[0, 0],
            a,
            0,
            strides[1, 0],
            b,
            0,
            strides[2, 0],
            shape[0],
            meta[4],
        )
        return 0
    base = stack_zeros(3, np.int64)
    return compare_kernel(meta[3], out, a, b, base, strides, shape, meta[4])


@njit(**JIT)
def unary_at(out_address, a_address, lane, meta, strides, shape):
    """``unary_kernel`` at two addresses of one lane type; ``meta`` = extents of out, a, then
    ``op``, ``fmt``."""
    out = numba.carray(_pointer(out_address, lane), meta[0])
    a = numba.carray(_pointer(a_address, lane), meta[1])
    if shape.shape[0] == 1:
        _unary_row(meta[2], out, 0, strides[0, 0], a, 0, strides[1, 0], shape[0], meta[3])
        return 0
    base = stack_zeros(2, np.int64)
    return unary_kernel(meta[2], out, a, base, strides, shape, meta[3])


@njit(**JIT)
def where_at(
    out_address, cond_address, a_address, b_address, lane, cond_lane, meta, strides, shape
):
    """``where_kernel`` at four addresses (``out``, ``a``, ``b`` of one lane type, ``cond``
    bytes); ``meta`` = extents of out, cond, a, b."""
    out = numba.carray(_pointer(out_address, lane), meta[0])
    cond = numba.carray(_pointer(cond_address, cond_lane), meta[1])
    a = numba.carray(_pointer(a_address, lane), meta[2])
    b = numba.carray(_pointer(b_address, lane), meta[3])
    base = np.zeros(4, np.int64)
    return where_kernel(out, cond, a, b, base, strides, shape)


seal(__name__)  # keep last: keys the caches and widens the literals of the loops above
