"""The parallel elementwise kernels write the serial loops' bytes, whatever the split.

Truth: the serial kernels of ``elementwise._loops`` (themselves checked against torch CPU in
``tests/ops``) over the same plan and the same input bytes. ``elementwise.parallel``'s
``ParallelKernel`` and ``run_moves`` run with 1, 2, 3 and 5 parts (more parts than cores
is allowed) and, for ``binary``, tiles of sides 4, 16 and 128, including tiles cut short at
the end of a dim; the output bytes must equal the serial output's. Sizes are small: the
split, not the size, is under test.
"""

from __future__ import annotations

import contextlib
import itertools

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.support.dtypes import FEW
from torch_mydev.kernels.copy import loops as copy_loops
from torch_mydev.kernels.elementwise import kernel as K
from torch_mydev.kernels.elementwise.parallel import ParallelKernel, run_moves
from torch_mydev.kernels.parallel import threads

SLICES = (1, 2, 3, 5)


def _loops():
    from torch_mydev.kernels.elementwise import _loops as _elementwise_loops

    return _elementwise_loops


@contextlib.contextmanager
def _parts(n: int, numel: int = 2):
    """Every plan runs in parallel, in ``n`` parts (the counter shows it did when the plan's
    ``numel`` elements make more than one part)."""
    count, threshold = threads.count, copy_loops.PARALLEL_MIN_NUMEL
    threads.count = lambda: n
    copy_loops.PARALLEL_MIN_NUMEL = 1
    before = threads.regions()
    try:
        yield
    finally:
        threads.count, copy_loops.PARALLEL_MIN_NUMEL = count, threshold
    assert threads.regions() > before or min(n, numel) == 1


def _parallel(kind, prepared, shape, tile=0):
    return ParallelKernel(kind, prepared.kernel, int(np.prod(shape)), tile)


@st.composite
def plans(draw, operands: int):
    """A fastest-first shape (1-3 dims, some long enough to tile) and element strides: the
    output dense in some dim order, the inputs arbitrary (broadcast 0s included)."""
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.sampled_from((1, 2, 5, 17, 33))) for _ in range(ndim))
    order = draw(st.permutations(range(ndim)))
    out = [0] * ndim
    step = 1
    for d in order:
        out[d] = step
        step *= shape[d]
    inputs = [
        tuple(draw(st.sampled_from((0, 1, 3, 40, 41, 700))) for _ in range(ndim))
        for _ in range(operands - 1)
    ]
    return shape, (tuple(out), *inputs)


def _buffers(shape, strides, dtype, seed, *, nonzero=False):
    """One byte buffer per operand, large enough for its strides, of random values."""
    g = np.random.default_rng(seed)
    out = []
    for s in strides:
        n = sum((size - 1) * st_ for size, st_ in zip(shape, s, strict=True)) + 1
        if dtype.is_floating_point:
            v = g.uniform(-100, 100, n)
            v[g.integers(0, n, max(n // 7, 1))] = 0.0
            values = torch.from_numpy(v).to(dtype)
        else:
            values = torch.from_numpy(g.integers(-100, 100, n)).to(dtype)
        if nonzero:
            values[values == 0] = 3
        out.append(values.view(torch.uint8).numpy().copy())
    return out


def _byte_strides(strides, dtype):
    size = dtype.itemsize
    return tuple(tuple(x * size for x in s) for s in strides)


@given(
    plan=plans(3),
    dtype=st.sampled_from(FEW),
    op=st.sampled_from(K.ARITHMETIC + K.THRESHOLDS),
    seed=st.integers(0, 5),
)
def test_binary_parallel_writes_the_serial_bytes(plan, dtype, op, seed):
    shape, strides = plan
    if op == "div" and not dtype.is_floating_point:
        op = "div_floor"  # integer true division computes in float: another plan
    prepared = K.prepare_binary(op, dtype, shape, _byte_strides(strides, dtype), alpha=3)
    out, a, b = _buffers(shape, strides, dtype, seed, nonzero=True)
    expected = out.copy()
    serial = getattr(prepared.kernel, "serial", prepared.kernel)
    assert serial(expected.ctypes.data, a.ctypes.data, b.ctypes.data, *prepared.args) == 0
    for slices, tile in ((1, 0), (2, 0), (3, 0), (5, 0), (2, 4), (3, 16), (5, 128)):
        got = out.copy()
        with _parts(slices, np.prod(shape)):
            status = _parallel("binary", prepared, shape, tile)(
                got.ctypes.data, a.ctypes.data, b.ctypes.data, *prepared.args
            )
        assert status == 0
        assert np.array_equal(got, expected), (slices, tile)


def test_binary_parallel_reports_a_zero_divisor():
    shape, strides = (40, 17), ((1, 40), (1, 40), (17, 1))
    prepared = K.prepare_binary(
        "div_trunc", torch.int64, shape, _byte_strides(strides, torch.int64)
    )
    out, a, b = _buffers(shape, strides, torch.int64, 1, nonzero=True)
    b.view(np.int64)[600] = 0
    for slices, tile in itertools.product(SLICES, (0, 16)):
        with _parts(slices):
            status = _parallel("binary", prepared, shape, tile)(
                out.ctypes.data, a.ctypes.data, b.ctypes.data, *prepared.args
            )
        assert status == 1


@given(
    plan=plans(3),
    dtype=st.sampled_from(FEW),
    op=st.sampled_from(K.COMPARISONS),
    seed=st.integers(0, 5),
)
def test_compare_parallel_writes_the_serial_bytes(plan, dtype, op, seed):
    shape, strides = plan
    byte_strides = (
        strides[0],  # bool output: one byte per element
        *(tuple(x * dtype.itemsize for x in s) for s in strides[1:]),
    )
    prepared = K.prepare_compare(op, dtype, shape, byte_strides)
    _, a, b = _buffers(shape, strides, dtype, seed)
    out = np.full(sum((n - 1) * s for n, s in zip(shape, strides[0], strict=True)) + 1, 7, np.uint8)
    expected = out.copy()
    serial = getattr(prepared.kernel, "serial", prepared.kernel)
    serial(expected.ctypes.data, a.ctypes.data, b.ctypes.data, *prepared.args)
    for slices in SLICES:
        got = out.copy()
        with _parts(slices, np.prod(shape)):
            _parallel("compare", prepared, shape)(
                got.ctypes.data, a.ctypes.data, b.ctypes.data, *prepared.args
            )
        assert np.array_equal(got, expected), slices


@given(
    plan=plans(2),
    dtype=st.sampled_from(FEW),
    op=st.sampled_from(K.UNARY),
    seed=st.integers(0, 5),
)
def test_unary_parallel_writes_the_serial_bytes(plan, dtype, op, seed):
    shape, strides = plan
    prepared = K.prepare_unary(op, dtype, shape, _byte_strides(strides, dtype))
    out, a = _buffers(shape, strides, dtype, seed)
    expected = out.copy()
    serial = getattr(prepared.kernel, "serial", prepared.kernel)
    serial(expected.ctypes.data, a.ctypes.data, *prepared.args)
    for slices in SLICES:
        got = out.copy()
        with _parts(slices, np.prod(shape)):
            _parallel("unary", prepared, shape)(got.ctypes.data, a.ctypes.data, *prepared.args)
        assert np.array_equal(got, expected), slices


@given(plan=plans(4), seed=st.integers(0, 5))
def test_where_and_fill_parallel_write_the_serial_bytes(plan, seed):
    loops = _loops()
    shape, strides = plan
    out, a, b = (x.view(np.uint32) for x in _buffers(shape, strides[:3], torch.float32, seed))
    n_cond = sum((size - 1) * s for size, s in zip(shape, strides[3], strict=True)) + 1
    cond = np.random.default_rng(seed).integers(0, 2, n_cond).astype(np.uint8)
    shape_ = np.array(shape, np.int64)
    lane_strides = np.array([strides[0], strides[3], strides[1], strides[2]], np.int64)
    base = np.zeros(4, np.int64)
    expected = out.copy()
    loops.where_kernel(expected, cond, a, b, base, lane_strides, shape_)
    filled = out.copy()
    value = np.array([0xDEADBEEF], np.uint32)
    loops.fill_kernel(filled, value, base[:1], lane_strides[:1], shape_)
    for slices in SLICES:
        got = out.copy()
        with _parts(slices, np.prod(shape)):
            assert run_moves("where", (got, cond, a, b), base, lane_strides, shape_)
        assert np.array_equal(got, expected), slices
        got = out.copy()
        with _parts(slices, np.prod(shape)):
            assert run_moves("fill", (got,), base[:1], lane_strides[:1], shape_, value)
        assert np.array_equal(got, filled), slices


@pytest.mark.parametrize(
    ("shape", "strides", "tiled"),
    [
        # channels_last [16, 64, 128, 128] + contiguous, coalesced: the contiguous input
        # steps a 16K-element plane along dim 0
        ((64, 16384, 16), ((1, 64, 1 << 20), (1, 64, 1 << 20), (16384, 1, 1 << 20)), True),
        # a square transpose: walked linearly
        ((4096, 4096), ((1, 4096), (1, 4096), (4096, 1)), False),
        # no input contiguous along dim 1
        ((64, 4096), ((1, 64), (1, 64), (0, 1 << 13)), False),
        # too narrow to tile
        ((8, 4096), ((1, 8), (1, 8), (4096, 1)), False),
    ],
)
def test_which_binary_plans_tile(shape, strides, tiled):
    lane_strides = np.array(strides, np.int64)
    tile = K._tile_of(lane_strides, np.array(shape, np.int64))
    assert tile == (K.BINARY_TILE if tiled else 0)
