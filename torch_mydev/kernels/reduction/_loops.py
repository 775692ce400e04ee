"""Decides how each result element of a reduction is accumulated (numba loops).

A reduction plan is split by the caller into *kept* dims (the output moves along them) and
*reduced* dims (the output's stride is 0), both fastest first, strides in lanes. Values are
widened on load (``widen``): int64 for bool and the integer lanes (a sum wraps as the
result's integer type does once stored; a bool byte other than 0 reads as 1, as CPU loads
it), float64 for every float lane (float16/bfloat16 bit patterns are decoded exactly
first). Sums accumulate in float64, in blocks of ``BLOCK`` elements whose partial sums are
added in order; max/min compare the widened values (exact) and propagate NaN as ATen's
``max_propagate_nan`` does. ``put`` rounds once to the result: float32 (a mean divides
there, in float32, as CPU's ``sum_out(...).div_(n)`` does), float64, float16/bfloat16
through float32, integers by wrapping.

Walks, picked by the caller: ``inner`` (each output reduces its own span), ``outer`` (the
fastest kept dim is the input's fastest: a row of accumulators advances together, contiguous
loads), each over a range of outputs that ``reduction.run`` cuts in runs for threads, and
``split_part_at`` / ``split_store_at`` (one output, its span cut in chunks reduced on
threads and combined in order).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, types
from numba.extending import overload

from torch_mydev.kernels.copy._strided import _pointer
from torch_mydev.kernels.dtypes import BOOL, HALF
from torch_mydev.kernels.elementwise._rules import (
    bfloat16_to_float,
    float_to_bfloat16,
    float_to_half,
    half_to_float,
)
from torch_mydev.kernels.jit._scratch import stack_zeros
from torch_mydev.kernels.jit._seal import JIT, seal

SUM = 0
MEAN = 1
MAX = 2
MIN = 3

# Elements summed into one partial before it joins the running total (float accuracy).
BLOCK = 4096
# Accumulators one ``outer`` walk keeps at once (a row of the fastest kept dim).
OUTER_CHUNK = 512


def widen(arr, i, fmt):
    """Element ``i`` of a lane array as int64 (bool, integers) or float64 (floats)."""


@overload(widen, inline="always")
def _widen(arr, i, fmt):
    dtype = arr.dtype
    if dtype == types.uint16:

        def reduced(arr, i, fmt):
            if fmt == HALF:
                return np.float64(half_to_float(arr[i]))
            return np.float64(bfloat16_to_float(arr[i]))

        return reduced
    if isinstance(dtype, types.Float):
        return lambda arr, i, fmt: np.float64(arr[i])
    if dtype == types.uint8:  # bool lanes: any nonzero byte is true, as CPU loads it

        def byte(arr, i, fmt):
            if fmt == BOOL:
                return np.int64(arr[i] != 0)
            return np.int64(arr[i])

        return byte
    return lambda arr, i, fmt: np.int64(arr[i])


def acc_zero(arr):
    """The additive identity of ``widen``'s type for ``arr``."""


@overload(acc_zero, inline="always")
def _acc_zero(arr):
    if arr.dtype == types.uint16 or isinstance(arr.dtype, types.Float):
        return lambda arr: np.float64(0.0)
    return lambda arr: np.int64(0)


def acc_array(arr, n):
    """``n`` accumulators of ``widen``'s type for ``arr``."""


@overload(acc_array, inline="always")
def _acc_array(arr, n):
    if arr.dtype == types.uint16 or isinstance(arr.dtype, types.Float):
        return lambda arr, n: np.zeros(n, dtype=np.float64)
    return lambda arr, n: np.zeros(n, dtype=np.int64)


def put(arr, i, value, fmt, op, divisor):
    """Store an accumulated ``value`` into result element ``i`` (a mean divides first)."""


@overload(put, inline="always")
def _put(arr, i, value, fmt, op, divisor):
    dtype = arr.dtype
    if dtype == types.uint16:

        def reduced(arr, i, value, fmt, op, divisor):
            f = np.float32(value)
            if op == MEAN:
                f = np.float32(f / np.float32(divisor))
            if fmt == HALF:
                arr[i] = float_to_half(f)
            else:
                arr[i] = float_to_bfloat16(f)

        return reduced
    if dtype == types.float32:

        def single(arr, i, value, fmt, op, divisor):
            f = np.float32(value)
            if op == MEAN:
                f = np.float32(f / np.float32(divisor))
            arr[i] = f

        return single
    if dtype == types.float64:

        def double(arr, i, value, fmt, op, divisor):
            if op == MEAN:
                value = value / np.float64(divisor)
            arr[i] = value

        return double

    def integer(arr, i, value, fmt, op, divisor):
        arr[i] = value

    return integer


@njit(**JIT, inline="always")
def combine(acc, v, op):
    """``acc`` after meeting ``v``: sum, or max/min keeping the first NaN met."""
    if op == MAX:
        if acc != acc:
            return acc
        return v if (v > acc or v != v) else acc
    if op == MIN:
        if acc != acc:
            return acc
        return v if (v < acc or v != v) else acc
    return acc + v


@njit(**JIT, fastmath={"reassoc"})
def _sum_run(inp, off, n, stride, fmt):
    """Sum of ``n`` elements from ``off`` by ``stride``, reassociated (vectorised) in the
    wide type: at most ``BLOCK`` of them, so the rounding error stays that of a block. The
    loops index a slice from 0: indices LLVM knows are not negative (no wrap-around select),
    measured 8x faster than indexing ``inp`` from ``off``."""
    acc = acc_zero(inp)
    if stride == 1:
        seg = inp[off : off + n]
        for k in range(n):
            acc += widen(seg, k, fmt)
        return acc
    if stride == 0:  # an expanded dim: one element, n times
        value = widen(inp, off, fmt)
        for _ in range(n):
            acc += value
        return acc
    strided = inp[off : off + (n - 1) * stride + 1 : stride]
    for k in range(n):
        acc += widen(strided, k, fmt)
    return acc


@njit(**JIT)
def _run(inp, off, n, stride, fmt, op, acc):
    """``acc`` combined with ``n`` elements from ``off`` by ``stride``."""
    if op <= MEAN:  # SUM or MEAN
        done = 0
        while done < n:
            step = min(BLOCK, n - done)
            acc += _sum_run(inp, off + done * stride, step, stride, fmt)
            done += step
        return acc
    if stride == 1:
        return combine(acc, extreme_run(inp[off : off + n], op, fmt), op)
    if stride == 0:  # an expanded dim: max/min of one element
        return combine(acc, widen(inp, off, fmt), op)
    strided = inp[off : off + (n - 1) * stride + 1 : stride]
    for k in range(n):
        acc = combine(acc, widen(strided, k, fmt), op)
    return acc


def extreme_run(seg, op, fmt):
    """Max (``op == MAX``) or min of a non-empty contiguous run, widened; NaN if any is NaN."""


def _ordered_extreme(bits_type, int_type, float_type, mask):
    """Floats compared as integers: ``b ^ ((b >> 63 or 31) & mask)`` orders the bit patterns
    as the values (-0.0 below +0.0), and integer max/min loops vectorise where a float one
    with a NaN check does not (measured 2.4 ms against 0.2 ms for 4M float32). NaNs are
    looked for in the same pass."""
    shift = bits_type.bitwidth - 1

    def run(seg, op, fmt):
        bits = seg.view(bits_type)
        best = bits[0] ^ ((bits[0] >> shift) & mask)
        nan = False
        if op == MAX:
            for k in range(seg.shape[0]):
                key = bits[k] ^ ((bits[k] >> shift) & mask)
                best = key if key > best else best
                nan |= seg[k] != seg[k]
        else:
            for k in range(seg.shape[0]):
                key = bits[k] ^ ((bits[k] >> shift) & mask)
                best = key if key < best else best
                nan |= seg[k] != seg[k]
        if nan:
            return np.float64(np.nan)
        value = best ^ ((best >> shift) & mask)
        return np.float64(int_type(value).view(float_type))

    return run


@overload(extreme_run)
def _extreme_run(seg, op, fmt):
    if seg.dtype == types.float32:
        return _ordered_extreme(types.int32, np.int32, np.float32, np.int32(0x7FFFFFFF))
    if seg.dtype == types.float64:
        mask = np.int64(0x7FFFFFFFFFFFFFFF)
        return _ordered_extreme(types.int64, np.int64, np.float64, mask)
    if isinstance(seg.dtype, types.Integer) and seg.dtype != types.uint16:

        def integer(seg, op, fmt):
            best = widen(seg, 0, fmt)
            if op == MAX:
                for k in range(seg.shape[0]):
                    v = widen(seg, k, fmt)
                    best = v if v > best else best
            else:
                for k in range(seg.shape[0]):
                    v = widen(seg, k, fmt)
                    best = v if v < best else best
            return best

        return integer

    def reduced(seg, op, fmt):  # float16/bfloat16 bit patterns: the generic loop
        acc = widen(seg, 0, fmt)
        for k in range(seg.shape[0]):
            acc = combine(acc, widen(seg, k, fmt), op)
        return acc

    return reduced


@njit(**JIT)
def reduce_span(inp, base, rshape, rstrides, begin, end, fmt, op):
    """The reduction of the reduced-space elements ``begin .. end`` (linear, dim 0 fastest)
    at ``base``: row by row along reduced dim 0. ``begin < end``."""
    nr = rshape.shape[0]
    if nr == 1:  # one reduced dim: one run, no counter
        off = base + begin * rstrides[0]
        acc = acc_zero(inp) if op <= MEAN else widen(inp, off, fmt)
        return _run(inp, off, end - begin, rstrides[0], fmt, op, acc)
    idx = stack_zeros(nr, np.int64)
    rem = begin
    off = base
    for d in range(nr):
        idx[d] = rem % rshape[d]
        rem //= rshape[d]
        off += idx[d] * rstrides[d]
    acc = acc_zero(inp) if op <= MEAN else widen(inp, off, fmt)  # SUM, MEAN: from 0
    pos = begin
    n0 = rshape[0]
    s0 = rstrides[0]
    while pos < end:
        n = min(n0 - idx[0], end - pos)
        acc = _run(inp, off, n, s0, fmt, op, acc)
        pos += n
        off += n * s0
        idx[0] += n
        d = 0
        while idx[d] == rshape[d] and d + 1 < nr:  # carry into the slower dims
            off -= idx[d] * rstrides[d]
            idx[d] = 0
            d += 1
            idx[d] += 1
            off += rstrides[d]
    return acc


@njit(**JIT, inline="always")
def _kept_offsets(o, kshape, kout, kin):
    """Output and input offsets of output ``o`` (linear over the kept dims, dim 0 fastest)."""
    out_off = 0
    in_off = 0
    rem = o
    for d in range(kshape.shape[0]):
        i = rem % kshape[d]
        rem //= kshape[d]
        out_off += i * kout[d]
        in_off += i * kin[d]
    return out_off, in_off


# inner and outer are inlined into their one caller (inner_at, outer_at): a library less to
# type, link and optimise again per signature (issue 19: about 0.5 s each, no change warm).
@njit(**JIT, inline="always")
def inner(out, inp, obase, ibase, kshape, kout, kin, rshape, rin, fmt_in, fmt_out, op, div,
          o_begin, o_end):  # fmt: skip
    """Outputs ``o_begin .. o_end``, each over its whole reduced span."""
    nred = 1
    for d in range(rshape.shape[0]):
        nred *= rshape[d]
    for o in range(o_begin, o_end):
        out_off, in_off = _kept_offsets(o, kshape, kout, kin)
        acc = reduce_span(inp, ibase + in_off, rshape, rin, 0, nred, fmt_in, op)
        put(out, obase + out_off, acc, fmt_out, op, div)


@njit(**JIT, inline="always")
def outer(out, inp, obase, ibase, kshape, kout, kin, rshape, rin, fmt_in, fmt_out, op, div,
          o_begin, o_end):  # fmt: skip
    """Outputs whose index along kept dim 0 runs ``o_begin .. o_end``, for every index of
    the slower kept dims: ``OUTER_CHUNK`` accumulators walk the reduced space together, each
    step reading a run along kept dim 0 (the input's fastest)."""
    n0 = kshape[0]
    nk = 1
    for d in range(1, kshape.shape[0]):
        nk *= kshape[d]
    nr = rshape.shape[0]
    nred = 1
    for d in range(nr):
        nred *= rshape[d]
    acc = acc_array(inp, OUTER_CHUNK)
    idx = stack_zeros(nr, np.int64)
    for rest in range(nk):
        out_rest, in_rest = _kept_offsets(rest * n0, kshape, kout, kin)
        for c in range(o_begin, o_end, OUTER_CHUNK):
            width = min(OUTER_CHUNK, o_end - c)
            ob = obase + out_rest + c * kout[0]
            ib = ibase + in_rest + c * kin[0]
            for j in range(width):  # the first reduced element starts every accumulator
                acc[j] = widen(inp, ib + j * kin[0], fmt_in)
            idx[:] = 0
            off = 0
            for _ in range(1, nred):
                idx[0] += 1
                off += rin[0]
                d = 0
                while idx[d] == rshape[d] and d + 1 < nr:
                    off -= idx[d] * rin[d]
                    idx[d] = 0
                    d += 1
                    idx[d] += 1
                    off += rin[d]
                _outer_step(acc, inp, ib + off, kin[0], width, fmt_in, op)
            for j in range(width):
                put(out, ob + j * kout[0], acc[j], fmt_out, op, div)


@njit(**JIT)
def _outer_step(acc, inp, off, stride, width, fmt, op):
    """Accumulators ``0 .. width`` meet one run of the input (as ``_sum_run``, a slice)."""
    if stride == 1:
        seg = inp[off : off + width]
        if op <= MEAN:
            for j in range(width):
                acc[j] += widen(seg, j, fmt)
        else:
            for j in range(width):
                acc[j] = combine(acc[j], widen(seg, j, fmt), op)
        return
    if op <= MEAN:
        for j in range(width):
            acc[j] += widen(inp, off + j * stride, fmt)
    else:
        for j in range(width):
            acc[j] = combine(acc[j], widen(inp, off + j * stride, fmt), op)


# ---- the forms over raw addresses (output, input), called through ``_entry.entry_point`` ----


@njit(**JIT)
def inner_at(out_addr, in_addr, out_units, in_units, out_lane, in_lane, obase, ibase, kshape,
             kout, kin, rshape, rin, fmt_in, fmt_out, op, div, a, b):  # fmt: skip
    """``inner`` over ``out_units`` / ``in_units`` lanes at two addresses."""
    out = numba.carray(_pointer(out_addr, out_lane), out_units)
    inp = numba.carray(_pointer(in_addr, in_lane), in_units)
    inner(out, inp, obase, ibase, kshape, kout, kin, rshape, rin, fmt_in, fmt_out, op, div, a, b)


@njit(**JIT)
def outer_at(out_addr, in_addr, out_units, in_units, out_lane, in_lane, obase, ibase, kshape,
             kout, kin, rshape, rin, fmt_in, fmt_out, op, div, a, b):  # fmt: skip
    """``outer`` over two addresses (as ``inner_at``)."""
    out = numba.carray(_pointer(out_addr, out_lane), out_units)
    inp = numba.carray(_pointer(in_addr, in_lane), in_units)
    outer(out, inp, obase, ibase, kshape, kout, kin, rshape, rin, fmt_in, fmt_out, op, div, a, b)


@njit(**JIT)
def split_part_at(out_addr, in_addr, out_units, in_units, out_lane, in_lane, obase, ibase,
                  kshape, kout, kin, rshape, rin, fmt_in, fmt_out, op, div, partial,
                  p_begin, p_end):  # fmt: skip
    """One output (no kept dims) whose span is cut in ``partial.shape[0]`` equal chunks:
    chunks ``p_begin .. p_end`` reduced into ``partial`` (``split_store_at`` combines)."""
    inp = numba.carray(_pointer(in_addr, in_lane), in_units)
    nred = 1
    for d in range(rshape.shape[0]):
        nred *= rshape[d]
    parts = partial.shape[0]
    size = (nred + parts - 1) // parts
    for p in range(p_begin, p_end):
        begin = p * size
        end = min(begin + size, nred)
        if begin < end:
            partial[p] = reduce_span(inp, ibase, rshape, rin, begin, end, fmt_in, op)


@njit(**JIT)
def split_store_at(out_addr, in_addr, out_units, in_units, out_lane, in_lane, obase, ibase,
                   kshape, kout, kin, rshape, rin, fmt_in, fmt_out, op, div,
                   partial):  # fmt: skip
    """The output of ``split_part_at``'s chunks: their results combined in chunk order (the
    chunks past the span's end, when it is shorter than one per chunk, are skipped)."""
    out = numba.carray(_pointer(out_addr, out_lane), out_units)
    nred = 1
    for d in range(rshape.shape[0]):
        nred *= rshape[d]
    parts = partial.shape[0]
    size = (nred + parts - 1) // parts
    acc = partial[0]
    for p in range(1, parts):
        if p * size < nred:
            acc = combine(acc, partial[p], op)
    _store(out, obase, acc, fmt_out, op, div)


@njit(**JIT)
def _store(out, i, acc, fmt, op, div):
    # ``put`` through a call: inlined into split_store_at (numba 0.68), its store to the
    # array made from an address was lost (tests/kernels/reduction/test_reduction_parallel.py).
    put(out, i, acc, fmt, op, div)


seal(__name__)  # keep last: keys the caches and widens the literals of the loops above
