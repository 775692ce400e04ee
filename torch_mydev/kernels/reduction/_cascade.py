"""Decides every rounding of a float sum exactly as torch CPU's serial ``cascade_sum`` does.

A replica of ``aten/src/ATen/native/cpu/SumKernel.cpp`` for one thread (torch runs it so below
``at::internal::GRAIN_SIZE`` elements, or with one thread): the result is zero-filled, then
the coalesced walk is cut as ``serial_for_each`` cuts it -- one 2-D ``loop`` call per index of
the dims above the first two -- and each call picks ATen's case: not a reduction (``out +=
in``), ``vectorized_inner_sum``, ``vectorized_outer_sum``, ``scalar_inner_sum`` or
``scalar_outer_sum``. The sums are ``row_sum`` / ``multi_row_sum``: four interleaved
accumulators (``ilp_factor``) and four cascade levels whose size grows with the row
(``level_power``). A ``Vectorized`` value is ``lanes`` independent accumulators; how a vector
load fills its lanes is ``mode``: ``PLAIN`` (one element a lane), ``HALVES`` (float16 and
bfloat16: element ``l`` plus element ``l + lanes``, ``load_fp32_from_fp16`` /
``load_fp32_from_bf16``; torch 2.13 no longer adds neighbours for float16 as
``load_reduce_vec`` did, measured on rows whose sum cancels). Accumulators are
``acc_type<T, true>``: float32 for float32/float16/bfloat16, float64 for float64; stores are
``*out += acc`` in the result's dtype.

Values equal CPU's bit for bit when ``vec`` / ``lanes`` are the ``Vectorized<T>::size()`` of
the kernel torch runs (32-byte vectors on x86, AVX512 machines included: ``kernels.reduction``).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, types, uint64
from numba.extending import overload

from torch_mydev.kernels.copy._strided import _pointer
from torch_mydev.kernels.dtypes import HALF
from torch_mydev.kernels.elementwise._rules import (
    bfloat16_to_float,
    float_to_bfloat16,
    float_to_half,
    half_to_float,
)
from torch_mydev.kernels.jit._scratch import stack_zeros
from torch_mydev.kernels.jit._seal import JIT, seal
from torch_mydev.kernels.reduction._modes import PLAIN, SCALAR
from torch_mydev.kernels.reduction._walks import (
    count_above,
    first_two,
    next_loop,
    next_output,
    offset_of,
    output_count,
)


def load(arr, i, fmt):
    """Element ``i`` as ``acc_type``: float32 for float16/bfloat16/float32, float64."""


@overload(load, inline="always")
def _load(arr, i, fmt):
    if arr.dtype == types.uint16:

        def reduced(arr, i, fmt):
            if fmt == HALF:
                return half_to_float(arr[i])
            return bfloat16_to_float(arr[i])

        return reduced
    return lambda arr, i, fmt: arr[i]


def add_store(arr, i, value, fmt):
    """``*ptr += value`` in the element's dtype (``CastStoreAccumulate``)."""


# Not inlined (numba types an inlined overload again at each of its dozen call sites): one
# compiled store per signature, which LLVM inlines where it pays. The three cascade loops'
# compile 34.6 s to 28.5 s, sums as fast warm (issue 19).
@overload(add_store)
def _add_store(arr, i, value, fmt):
    if arr.dtype == types.uint16:

        def reduced(arr, i, value, fmt):
            if fmt == HALF:
                arr[i] = float_to_half(np.float32(half_to_float(arr[i]) + value))
            else:
                arr[i] = float_to_bfloat16(np.float32(bfloat16_to_float(arr[i]) + value))

        return reduced

    def plain(arr, i, value, fmt):
        arr[i] = arr[i] + value

    return plain


def _vadd(acc, k, inp, off, lanes, mode, fmt):
    """``acc[0, k, 0:lanes] +=`` one (vector) load at element ``off``."""


@overload(_vadd, inline="always")
def _vadd_impl(acc, k, inp, off, lanes, mode, fmt):
    # HALVES loads float16/bfloat16 (uint16 lanes) only: other dtypes' loops leave that
    # branch out rather than compile it (issue 19's first-use cost).
    def plain(acc, k, inp, off, lanes, mode, fmt):
        if mode == SCALAR:
            acc[0, k, 0] += load(inp, off, fmt)
        else:
            for lane in range(lanes):
                acc[0, k, lane] += load(inp, off + lane, fmt)

    if inp.dtype != types.uint16:
        return plain

    def reduced(acc, k, inp, off, lanes, mode, fmt):
        if mode == SCALAR:
            acc[0, k, 0] += load(inp, off, fmt)
        elif mode == PLAIN:
            for lane in range(lanes):
                acc[0, k, lane] += load(inp, off + lane, fmt)
        elif fmt == HALF:  # HALVES of float16
            for lane in range(lanes):
                low = half_to_float(inp[off + lane])
                acc[0, k, lane] += low + half_to_float(inp[off + lanes + lane])
        else:  # HALVES of bfloat16
            for lane in range(lanes):
                low = bfloat16_to_float(inp[off + lane])
                acc[0, k, lane] += low + bfloat16_to_float(inp[off + lanes + lane])

    return reduced


@njit(**JIT, inline="always")
def _add_rows(acc, inp, base, begin, end, row_stride, col_stride, nrows, lanes, mode, fmt):
    """Rows ``begin`` to ``end`` (exclusive) of ``nrows`` columns into level 0 of ``acc``,
    one row after another, as ``multi_row_sum``'s loops add them."""
    for i in range(begin, end):
        row = base + i * row_stride
        for k in range(nrows):
            _vadd(acc, k, inp, row + k * col_stride, lanes, mode, fmt)


@njit(**JIT)
def _ceil_log2(x):
    if x <= 2:
        return 1
    n = 0
    v = x - 1
    while v:
        n += 1
        v >>= 1
    return n


@njit(**JIT)
def multi_row_sum(inp, base, row_stride, col_stride, size, nrows, lanes, mode, fmt, acc):
    """``multi_row_sum<acc, nrows>``: ``nrows`` columns summed over ``size`` rows in four
    cascade levels, in the scratch ``acc`` (``[4, >= nrows, >= lanes]``, of the accumulator
    type); returns its ``[nrows, lanes]`` result, a view valid until the next call."""
    level_power = max(4, _ceil_log2(size) // 4)
    level_step = 1 << level_power
    level_mask = level_step - 1
    if size < level_step:  # a short row: levels 1-3 stay 0, adding them is adding +0 once
        for k in range(nrows):
            for lane in range(lanes):
                acc[0, k, lane] = 0
        _add_rows(acc, inp, base, 0, size, row_stride, col_stride, nrows, lanes, mode, fmt)
        for k in range(nrows):
            for lane in range(lanes):
                acc[0, k, lane] += 0  # -0.0 becomes +0.0 there as well
        return acc[0, :nrows, :lanes]
    for j in range(4):
        for k in range(nrows):
            for lane in range(lanes):
                acc[j, k, lane] = 0
    i = 0
    while i + level_step <= size:
        _add_rows(acc, inp, base, i, i + level_step, row_stride, col_stride, nrows, lanes, mode,
                  fmt)  # fmt: skip
        i += level_step
        for j in range(1, 4):
            for k in range(nrows):
                for lane in range(lanes):
                    acc[j, k, lane] += acc[j - 1, k, lane]
                    acc[j - 1, k, lane] = 0
            if (i & (level_mask << (j * level_power))) != 0:
                break
    _add_rows(acc, inp, base, i, size, row_stride, col_stride, nrows, lanes, mode, fmt)
    for j in range(1, 4):
        for k in range(nrows):
            for lane in range(lanes):
                acc[0, k, lane] += acc[j, k, lane]
    return acc[0, :nrows, :lanes]


@njit(**JIT)
def row_sum(inp, base, stride, size, lanes, mode, fmt, acc):
    """``row_sum``: four interleaved ``multi_row_sum`` columns, the tail into the first,
    then the four added in order; returns ``lanes`` accumulators (a view into ``acc``)."""
    size_ilp = size // 4
    partial = multi_row_sum(inp, base, stride * 4, stride, size_ilp, 4, lanes, mode, fmt, acc)
    for i in range(size_ilp * 4, size):
        _vadd(acc, 0, inp, base + i * stride, lanes, mode, fmt)
    for k in range(1, 4):
        for lane in range(lanes):
            partial[0, lane] += partial[k, lane]
    return partial[0]


@njit(**JIT)
def _flat_multi_row_sum(inp, base, row_stride, size, width, flat):
    """``multi_row_sum`` of ``width`` consecutive columns whose vectors hold one element a
    lane (float32, float64): column ``k``'s lane ``l`` is element ``k * lanes + l`` of each
    row, so its accumulators are one flat index ``m < width`` and each row adds ``width``
    consecutive elements into as many consecutive accumulators, a loop LLVM vectorises.
    ``flat`` is the scratch as one dim, cascade level ``j`` at ``j * width``; the result is
    ``flat[:width]``. Every accumulator meets its elements in ``multi_row_sum``'s order."""
    level_power = max(4, _ceil_log2(size) // 4)
    level_step = 1 << level_power
    level_mask = level_step - 1
    i = 0
    if size < level_step:  # levels 1-3 stay 0: adding them is adding +0 once
        for m in range(width):
            flat[m] = 0
        while i < size:
            _add_run(flat, 0, inp, base + i * row_stride, width)
            i += 1
        for m in range(width):
            flat[m] += 0  # -0.0 becomes +0.0 there as well
        return
    for m in range(4 * width):
        flat[m] = 0
    while i + level_step <= size:
        for _ in range(level_step):
            _add_run(flat, 0, inp, base + i * row_stride, width)
            i += 1
        for j in range(1, 4):
            for m in range(width):
                flat[j * width + m] += flat[(j - 1) * width + m]
                flat[(j - 1) * width + m] = 0
            if (i & (level_mask << (j * level_power))) != 0:
                break
    while i < size:
        _add_run(flat, 0, inp, base + i * row_stride, width)
        i += 1
    for j in range(1, 4):
        for m in range(width):
            flat[m] += flat[j * width + m]


@njit(**JIT)
def _short_row_sum(inp, row, size0, vec, zero):
    """``_plain_row_sum`` of a row whose ``multi_row_sum`` never leaves its first level
    (fewer than 16 rows of ``4 * vec`` elements), one lane at a time: the lane's four
    columns are four scalars in registers, added side by side, with no scratch (3 to 6
    times faster than the flat form for rows of 8 to 256 elements). Every rounding is
    ``_plain_row_sum``'s: a column is ``0 + its elements`` (its ``+ 0`` of the empty levels
    changes nothing: a sum from +0.0 is never -0.0), the tail vectors go into column 0,
    the columns are added 0 to 3, then the scalar tail and the lanes into ``zero``."""
    width = 4 * vec
    vec_size = size0 // vec
    size = vec_size // 4
    final = zero
    for k in range(vec_size * vec, size0):
        final += inp[uint64(row + k)]
    for lane in range(vec):
        c0 = c1 = c2 = c3 = zero
        at = row + lane
        for _ in range(size):
            c0 += inp[uint64(at)]
            c1 += inp[uint64(at + vec)]
            c2 += inp[uint64(at + 2 * vec)]
            c3 += inp[uint64(at + 3 * vec)]
            at += width
        for i in range(size * 4, vec_size):  # row_sum's tail vectors, into column 0
            c0 += inp[uint64(row + i * vec + lane)]
        final += c0 + c1 + c2 + c3
    return final


@njit(**JIT)
def _plain_row_sum(inp, row, size0, vec, flat, zero):
    """``vectorized_inner_sum`` of one contiguous row whose vectors hold one element a lane
    (float32, float64): ``row_sum`` over ``size0 // vec`` vectors plus the scalar tail, as
    ``loop2d``'s general case computes it. ``row_sum``'s four interleaved columns are
    ``_flat_multi_row_sum``'s, rows of ``4 * vec`` consecutive elements."""
    width = 4 * vec
    vec_size = size0 // vec
    size = vec_size // 4  # multi_row_sum's rows of 4 vectors
    _flat_multi_row_sum(inp, row, width, size, width, flat)
    for i in range(size * 4, vec_size):  # row_sum's tail vectors, into column 0
        _add_run(flat, 0, inp, row + i * vec, vec)
    for k in range(1, 4):
        for lane in range(vec):
            flat[lane] += flat[k * vec + lane]
    final = zero
    for k in range(vec_size * vec, size0):
        final += inp[uint64(row + k)]
    for lane in range(vec):
        final += flat[lane]
    return final


@njit(**JIT, inline="always")
def _add_run(acc, at, inp, start, count):
    """``acc[at + m] += inp[start + m]`` for ``m < count`` (indices never negative)."""
    base = uint64(start)
    for m in range(count):
        acc[at + m] += inp[base + uint64(m)]


def _flat_rows(out, obase, os1, inp, ibase, is1, size0, size1, vec, acc, zero, fmt):
    """``loop2d``'s contiguous inner reduction whose vectors hold one element a lane
    (float32, float64): each row by ``_short_row_sum`` or ``_plain_row_sum``. Chosen by the
    lane type, so the float16/bfloat16 loop, which never takes this path, does not compile
    it (about 2 s of its compile; issue 19)."""


@overload(_flat_rows, inline="always")
def _flat_rows_impl(out, obase, os1, inp, ibase, is1, size0, size1, vec, acc, zero, fmt):
    def plain(out, obase, os1, inp, ibase, is1, size0, size1, vec, acc, zero, fmt):
        flat = acc.reshape(acc.size)
        for j in range(size1):
            row = ibase + j * is1
            if size0 < 64 * vec:  # fewer than 16 groups of 4 vectors: one cascade level
                total = _short_row_sum(inp, row, size0, vec, zero)
            else:
                total = _plain_row_sum(inp, row, size0, vec, flat, zero)
            add_store(out, obase + j * os1, total, fmt)

    def never(out, obase, os1, inp, ibase, is1, size0, size1, vec, acc, zero, fmt):
        pass  # float16/bfloat16 load in HALVES mode: their loop leaves this out

    return never if inp.dtype == types.uint16 else plain


def _flat_columns(out, obase, os1, inp, ibase, is0, size0, lanes, acc, fmt):
    """``loop2d``'s contiguous outer reduction of ``4 * lanes`` columns whose vectors hold
    one element a lane (float32, float64), their lanes as one flat index."""


@overload(_flat_columns, inline="always")
def _flat_columns_impl(out, obase, os1, inp, ibase, is0, size0, lanes, acc, fmt):
    def plain(out, obase, os1, inp, ibase, is0, size0, lanes, acc, fmt):
        flat = acc.reshape(acc.size)
        _flat_multi_row_sum(inp, ibase, is0, size0, 4 * lanes, flat)
        for m in range(4 * lanes):
            add_store(out, obase + m * os1, flat[m], fmt)

    def never(out, obase, os1, inp, ibase, is0, size0, lanes, acc, fmt):
        pass  # as in _flat_rows

    return never if inp.dtype == types.uint16 else plain


# Inlined into cascade_at, one library less to link and optimise (its compile, issue 19); the
# stores into the carray cascade_at makes are checked by tests/ops/reduction's bit-exact tests
# (numba 0.68 once lost such a store when inlined: reduction._loops._store).
@njit(**JIT, inline="always")
def loop2d(out, obase, os0, os1, inp, ibase, is0, is1, size0, size1, fmt, vec, lanes, mode,
           acc, zero):  # fmt: skip
    """One ``cascade_sum`` loop call over ``size0 x size1`` elements (strides in elements);
    ``acc`` is the sums' scratch, ``zero`` the accumulator type's 0."""
    if os0 != 0 and os1 == 0:  # move the reduction to be the first dim
        os0, os1 = os1, os0
        is0, is1 = is1, is0
        size0, size1 = size1, size0
    if os0 != 0 and os1 != 0:  # not a true reduction
        for j in range(size1):
            for i in range(size0):
                add_store(
                    out, obase + i * os0 + j * os1, load(inp, ibase + i * is0 + j * is1, fmt), fmt
                )
        return
    if is0 == 1 and size0 >= vec and mode == PLAIN and lanes == vec:
        _flat_rows(out, obase, os1, inp, ibase, is1, size0, size1, vec, acc, zero, fmt)
    elif is0 == 1 and size0 >= vec:  # contiguous inner reduction
        vec_size = size0 // vec
        for j in range(size1):
            row = ibase + j * is1
            partial = row_sum(inp, row, vec, vec_size, lanes, mode, fmt, acc)
            final = zero
            for k in range(vec_size * vec, size0):
                final += load(inp, row + k, fmt)
            for lane in range(lanes):
                final += partial[lane]
            add_store(out, obase + j * os1, final, fmt)
    elif is1 == 1 and size1 >= vec:  # contiguous outer reduction
        j = 0
        while j + 4 * lanes <= size1:
            if mode == PLAIN:  # float32/float64: the four columns' lanes as one flat index
                _flat_columns(
                    out, obase + j * os1, os1, inp, ibase + j, is0, size0, lanes, acc, fmt
                )
            else:
                sums = multi_row_sum(inp, ibase + j, is0, lanes, size0, 4, lanes, PLAIN, fmt, acc)
                for k in range(4):
                    for lane in range(lanes):
                        add_store(out, obase + (j + k * lanes + lane) * os1, sums[k, lane], fmt)
            j += 4 * lanes
        while j + lanes <= size1:
            sums1 = row_sum(inp, ibase + j, is0, size0, lanes, PLAIN, fmt, acc)
            for lane in range(lanes):
                add_store(out, obase + (j + lane) * os1, sums1[lane], fmt)
            j += lanes
        while j < size1:
            ans = row_sum(inp, ibase + j, is0, size0, 1, SCALAR, fmt, acc)
            add_store(out, obase + j * os1, ans[0], fmt)
            j += 1
    elif is0 < is1:  # scalar inner reduction
        for j in range(size1):
            ans = row_sum(inp, ibase + j * is1, is0, size0, 1, SCALAR, fmt, acc)
            add_store(out, obase + j * os1, ans[0], fmt)
    else:  # scalar outer reduction
        j = 0
        while j + 3 < size1:
            sums = multi_row_sum(inp, ibase + j * is1, is0, is1, size0, 4, 1, SCALAR, fmt, acc)
            for k in range(4):
                add_store(out, obase + (j + k) * os1, sums[k, 0], fmt)
            j += 4
        while j < size1:
            ans = row_sum(inp, ibase + j * is1, is0, size0, 1, SCALAR, fmt, acc)
            add_store(out, obase + j * os1, ans[0], fmt)
            j += 1


@njit(**JIT)
def _walk_outputs(out, shape, ostrides, fmt, divisor, zero):
    """Every result element of the walk once: set to 0 (``zero``) or divided by ``divisor``
    in its dtype (``div_``, a mean)."""
    idx = stack_zeros(shape.shape[0], np.int64)
    for _ in range(output_count(shape, ostrides)):
        off = offset_of(idx, ostrides, 0)
        if zero:
            out[off] = 0
        else:
            divide_store(out, off, divisor, fmt)
        next_output(idx, shape, ostrides)


def divide_store(arr, i, divisor, fmt):
    """``arr[i] /= divisor`` in the element's dtype (a float tensor's ``div_`` by an int)."""


@overload(divide_store)  # not inlined, as add_store
def _divide_store(arr, i, divisor, fmt):
    if arr.dtype == types.float32:

        def single(arr, i, divisor, fmt):
            arr[i] = arr[i] / np.float32(divisor)

        return single
    if arr.dtype == types.float64:

        def double(arr, i, divisor, fmt):
            arr[i] = arr[i] / np.float64(divisor)

        return double

    def reduced(arr, i, divisor, fmt):  # float16/bfloat16 never divide here (a float32 mean)
        pass

    return reduced


@njit(**JIT)
def cascade_at(out_addr, in_addr, out_units, in_units, out_lane, in_lane, shape, ostrides,
               istrides, fmt, vec, lanes, mode, token, divisor):  # fmt: skip
    """``cascade_sum`` over the coalesced walk ``shape`` (strides in elements, at least one
    dim): the result zero-filled, then ``serial_for_each``'s 2-D calls, dims 2.. outermost;
    a ``divisor`` above 0 then divides every result (``mean_out``'s ``div_``)."""
    out = numba.carray(_pointer(out_addr, out_lane), out_units)
    inp = numba.carray(_pointer(in_addr, in_lane), in_units)
    _walk_outputs(out, shape, ostrides, fmt, divisor, True)
    acc = stack_zeros(16 * lanes, token).reshape((4, 4, lanes))  # the sums' scratch
    size0, os0, is0, size1, os1, is1 = first_two(shape, ostrides, istrides)
    idx = stack_zeros(shape.shape[0], np.int64)
    for _ in range(count_above(shape, 2)):
        obase, ibase = offset_of(idx, ostrides, 2), offset_of(idx, istrides, 2)
        loop2d(out, obase, os0, os1, inp, ibase, is0, is1, size0, size1, fmt, vec, lanes, mode,
               acc, token[0])  # fmt: skip
        next_loop(idx, shape)
    if divisor > 0:
        _walk_outputs(out, shape, ostrides, fmt, divisor, False)


seal(__name__)  # keep last: keys the caches and widens the literals of the loops above
