"""Decides every signed zero and NaN of a float amax/amin as torch CPU's serial kernel does.

A replica of ``binary_kernel_reduce_vec`` (``aten/src/ATen/native/cpu/Reduce.h``) with
``max_values_kernel_impl`` / ``min_values_kernel_impl``'s operations, for one thread (torch
runs it so below ``at::internal::GRAIN_SIZE`` elements, or with one thread): every result is
filled with -inf (amax) or +inf (amin), then the coalesced walk is cut as
``serial_for_each`` cuts it -- one 2-D call per index of the dims above the first two -- and
each call picks ATen's case: ``vectorized_inner_reduction`` (input contiguous along the
reduced dim 0), ``vectorized_outer_reduction`` (dim 0 reduced, output and input contiguous
along dim 1) or ``basic_loop``.

The order matters only for ties and NaN, and there the two operations differ:

- ``op`` (``max_impl`` / ``min_impl``, scalar): a canonical quiet NaN if either is NaN, else
  ``std::max(a, b)`` / ``std::min(a, b)``, which keep ``a`` on a tie (``+0`` vs ``-0``);
- ``vop`` (``maximum`` / ``minimum`` on ``Vectorized``, AVX2's ``max_ps`` / ``min_ps``): ``b``
  on a tie, and an all-ones NaN if either is NaN.

``vec`` is ``Vectorized<T>::size()`` of the kernel torch runs (32-byte vectors on x86:
``max_values_stub`` is registered with ``REGISTER_DISPATCH``, so AVX512 machines run AVX2).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, uint64

from torch_mydev.kernels.copy._strided import _pointer
from torch_mydev.kernels.jit._scratch import stack_zeros
from torch_mydev.kernels.jit._seal import JIT, seal
from torch_mydev.kernels.reduction import _walks as walks


# _vop and _op are compiled once per signature and called, not inlined: numba types an inlined
# function again at each call site (issue 19: extreme_at's compile about half). LLVM inlines
# the calls in the vector loops; the loops over one element at a time use _op_each, the same
# function inlined, where a call per element cost 10 ns (float64).
@njit(**JIT)
def _vop(a, b, is_max, nan):
    """``maximum(a, b)`` / ``minimum(a, b)`` of one lane; ``nan`` is the all-ones NaN. Written
    as selects, with no load under a branch, so LLVM vectorises the loops over lanes."""
    pick_a = (a > b) if is_max else (a < b)
    value = a if pick_a else b
    return nan if (a != a) | (b != b) else value


def _max_min(a, b, is_max, nan):
    """``max_impl(a, b)`` / ``min_impl(a, b)``; ``nan`` is the canonical quiet NaN."""
    pick_b = (a < b) if is_max else (b < a)
    value = b if pick_b else a
    return nan if (a != a) | (b != b) else value


_op = njit(**JIT)(_max_min)
_op_each = njit(**JIT, inline="always")(_max_min)


@njit(**JIT, inline="always")
def _lanes(acc, vec, is_max, quiet):
    """``op`` folded over ``acc[0:vec]`` from lane 0 up, as ``reduction128`` folds its buffer.
    ``op`` is associative: a NaN anywhere gives the quiet NaN, and otherwise the result is
    the first lane holding the extreme (a tie keeps ``a``). So four runs of ``vec // 4``
    lanes fold side by side and then in order, four dependent ``op``s instead of seven
    for eight lanes; the bits are the same."""
    if vec % 4 != 0:
        first = acc[0]
        for lane in range(1, vec):
            first = _op(first, acc[lane], is_max, quiet)
        return first
    run = vec // 4
    a, b, c, d = acc[0], acc[run], acc[2 * run], acc[3 * run]
    for lane in range(1, run):
        a = _op(a, acc[lane], is_max, quiet)
        b = _op(b, acc[run + lane], is_max, quiet)
        c = _op(c, acc[2 * run + lane], is_max, quiet)
        d = _op(d, acc[3 * run + lane], is_max, quiet)
    return _op(_op(a, b, is_max, quiet), _op(c, d, is_max, quiet), is_max, quiet)


@njit(**JIT, inline="always")
def _inner(out, o, inp, i, n, vec, is_max, all_ones, quiet, acc):
    """``vectorized_inner_reduction``: ``n`` contiguous inputs at ``i`` into ``out[o]``."""
    width = 4 * vec
    count = n // width
    if count > 0:
        for k in range(width):
            acc[k] = inp[uint64(i + k)]
        for block in range(1, count):
            base = i + block * width
            for k in range(width):
                acc[k] = _vop(acc[k], inp[uint64(base + k)], is_max, all_ones)
        for lane in range(vec):
            low = _vop(acc[lane], acc[vec + lane], is_max, all_ones)
            high = _vop(acc[2 * vec + lane], acc[3 * vec + lane], is_max, all_ones)
            acc[lane] = _vop(low, high, is_max, all_ones)
        out[o] = _op(out[o], _lanes(acc, vec, is_max, quiet), is_max, quiet)
    for k in range(count * width, n):
        out[o] = _op_each(out[o], inp[uint64(i + k)], is_max, quiet)


@njit(**JIT, inline="always")
def _outer(out, o, inp, i, is0, size0, size1, vec, is_max, all_ones, quiet, acc):
    """``vectorized_outer_reduction``: columns of ``4 * vec`` reduced down ``size0`` rows of
    stride ``is0``, each column group then combined with the output (``vop(acc, out)``);
    the remaining columns one by one with ``op``."""
    width = 4 * vec
    groups = size1 // width
    for group in range(groups):
        column = group * width
        for k in range(width):
            acc[k] = inp[uint64(i + column + k)]
        for row in range(1, size0):
            base = i + row * is0 + column
            for k in range(width):
                acc[k] = _vop(acc[k], inp[uint64(base + k)], is_max, all_ones)
        for k in range(width):
            out[o + column + k] = _vop(acc[k], out[o + column + k], is_max, all_ones)
    for column in range(groups * width, size1):
        for row in range(size0):
            value = inp[uint64(i + row * is0 + column)]
            out[o + column] = _op_each(out[o + column], value, is_max, quiet)


@njit(**JIT)
def loop2d(out, obase, os0, os1, inp, ibase, is0, is1, size0, size1, vec, is_max, nans):
    """One ``binary_kernel_reduce_vec`` loop call over ``size0 x size1`` elements (strides in
    elements)."""
    acc = stack_zeros(4 * vec, out)
    all_ones, quiet = nans[0], nans[1]
    if os0 == 0 and is0 == 1:
        for j in range(size1):
            o, i = obase + j * os1, ibase + j * is1
            _inner(out, o, inp, i, size0, vec, is_max, all_ones, quiet, acc)
    elif os0 == 0 and os1 == 1 and is1 == 1:
        _outer(out, obase, inp, ibase, is0, size0, size1, vec, is_max, all_ones, quiet, acc)
    else:
        for j in range(size1):
            o = obase + j * os1
            i = ibase + j * is1
            for r in range(size0):
                value = inp[uint64(i + r * is0)]
                out[o + r * os0] = _op_each(out[o + r * os0], value, is_max, quiet)


@njit(**JIT)
def extreme_at(out_addr, in_addr, out_units, in_units, out_lane, in_lane, shape, ostrides,
               istrides, vec, is_max, nans, unused):  # fmt: skip
    """amax (``is_max``) or amin over the coalesced walk ``shape`` (strides in elements, at
    least one dim); ``nans`` holds the all-ones and the canonical quiet NaN of the dtype.
    ``unused`` keeps the cascade's argument list (``kernels.reduction``)."""
    out = numba.carray(_pointer(out_addr, out_lane), out_units)
    inp = numba.carray(_pointer(in_addr, in_lane), in_units)
    start = -np.inf if is_max else np.inf
    idx = stack_zeros(shape.shape[0], np.int64)
    for _ in range(walks.output_count(shape, ostrides)):  # output_base().fill_(ident)
        out[walks.offset_of(idx, ostrides, 0)] = start
        walks.next_output(idx, shape, ostrides)
    size0, os0, is0, size1, os1, is1 = walks.first_two(shape, ostrides, istrides)
    for _ in range(walks.count_above(shape, 2)):  # idx is all zeros again
        obase, ibase = walks.offset_of(idx, ostrides, 2), walks.offset_of(idx, istrides, 2)
        loop2d(out, obase, os0, os1, inp, ibase, is0, is1, size0, size1, vec, is_max, nans)
        walks.next_loop(idx, shape)


seal(__name__)  # keep last: keys the caches and widens the literals of the loops above
