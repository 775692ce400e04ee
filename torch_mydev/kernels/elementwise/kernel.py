"""Decides how a planned elementwise op reaches its numba loop: lanes, offsets, compute values.

The caller (``torch_mydev.ops.elementwise.aten``) has planned the iteration like TensorIterator
and passes each operand as an ``Operand``: a 1-D ``uint8`` array over its whole storage, the
byte offset of element ``[0, ..., 0]``, its dtype, and byte strides over the coalesced,
fastest-first shape (0 on broadcast dims). This module

1. views each storage as typed *lanes* (see ``elementwise._loops``) and turns byte offsets and
   strides into lane units, checking that every element lies inside its buffer (the loops do
   not bounds-check);
2. converts Python numbers into the op's compute type the way ``c10::convert`` does
   (``elementwise.scalars``, through the copy kernel), e.g. ``alpha`` for ``add``;
3. calls one of five loops: ``binary`` (add/mul/div), ``compare``, ``unary`` (neg/abs),
   ``where`` and ``fill``; from ``PARALLEL_MIN_NUMEL`` elements (``_threshold``) the same
   loops over parts of the plan on threads (``elementwise.parallel``), walking a large
   transposed binary plan in tiles (``_tile_of``).

All inputs of ``binary``/``compare``/``unary`` share the common dtype (torch CPU converts the
others first); outputs are that dtype too, except ``compare``'s bool output. Importing this
module does not import numba: the loops load on the first call and ``cache=True`` keeps their
machine code between processes. Python work per call is O(ndim), never per element.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from types import ModuleType
from typing import NamedTuple

import numpy as np
import torch

from torch_mydev.kernels import numba_module
from torch_mydev.kernels.copy.loops import PARALLEL_MIN_NUMEL, TILE_MIN_SIDE, parallel_allowed
from torch_mydev.kernels.dtypes import PLAIN, SUPPORTED_DTYPES, layout_of
from torch_mydev.kernels.elementwise.parallel import ParallelKernel, run_moves
from torch_mydev.kernels.elementwise.scalars import compute_scalar, read_scalar, scalar_bytes
from torch_mydev.kernels.operand import Operand

__all__ = [
    "ARITHMETIC",
    "COMPARISONS",
    "SUPPORTED_DTYPES",
    "THRESHOLDS",
    "UNARY",
    "Operand",
    "Prepared",
    "binary",
    "compare",
    "fill",
    "prepare_binary",
    "prepare_compare",
    "prepare_unary",
    "read_scalar",
    "scalar_bytes",
    "unary",
    "where",
]

ARITHMETIC = ("add", "mul", "div", "div_trunc", "div_floor")
# The relu family, on the binary loop (codes after ARITHMETIC's): ``clamp_min`` (b unused:
# pass a), ``threshold`` (b: the value), ``threshold_backward`` (a: self, b: grad); ``alpha``
# is the bound or the threshold.
THRESHOLDS = ("clamp_min", "threshold", "threshold_backward")
_BINARY_CODES = {op: code for code, op in enumerate(ARITHMETIC + THRESHOLDS)}
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
UNARY = ("neg", "abs")

# The one dtype table (``dtypes``): ``element`` is the lane the loops read, ``fmt`` its format.
_LAYOUTS = {dtype: layout_of(dtype) for dtype in SUPPORTED_DTYPES}

_REDUCED = (torch.float16, torch.bfloat16)
# The loops the stub's replay runs (``Prepared.replay_block``).
_REPLAYED = frozenset({"binary", "compare", "unary"})
# Where moves lanes unchanged: any dtype of one width moves as that width's unsigned lane.
_MOVE_LANES = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.uint16),
    4: np.dtype(np.uint32),
    8: np.dtype(np.uint64),
    16: np.dtype(np.complex128),
}

# A one-dim plan of a cheap op runs in parallel from this many elements (``_threshold``).
PARALLEL_STREAM_MIN_NUMEL = 1 << 21
# Tile side of a large transposed binary op (``_tile_of``): 64 to 512 measured within noise
# of each other for the channels_last + contiguous add; 32 and 4096 clearly slower.
BINARY_TILE = 128


def _load() -> ModuleType:
    """Import the numba loops on first use (importing the package must not import numba)."""
    return numba_module("elementwise._loops")


class Prepared(NamedTuple):
    """One op over one plan, set up once: ``kernel(*addresses, *args)`` runs it.

    ``addresses`` are those of element ``[0, ..., 0]`` of each operand, output first, each a
    multiple of its lane size; ``extents[i]`` is how many bytes from there operand ``i`` must
    hold (0 for an empty iteration, whose ``kernel`` does nothing). ``kernel`` is the loop's
    compiled entry point (``_entry.entry_point``): it returns a status, 0 or 1 for an integer
    division by zero, and checks nothing; the caller checks the extents.
    """

    kernel: Callable
    args: tuple
    extents: tuple[int, ...]
    kind: str = ""  # the loop: "binary", "compare", "unary", "where" ("": an empty iteration)

    def replay_block(self) -> tuple[int, np.ndarray] | None:
        """The C entry's address and the parameter block that run this loop from the stub's
        replay (``_replay.py``), or None for a loop it does not replay: an empty iteration or
        a parallel one (a large layout, whose cost is the loop, not the call). The
        arguments' order is this module's own; nothing outside it unpacks them."""
        if self.kind not in _REPLAYED or isinstance(self.kernel, ParallelKernel):
            return None
        from torch_mydev.kernels.elementwise import _replay

        return _replay.block_of(self.kind, self.args)

    def replay_value_word(self) -> int:
        """The word of a binary loop's ``replay_block`` holding its compute value (add's
        ``alpha``), which the stub's replay writes per call; -1 for other loops."""
        if self.kind != "binary":
            return -1
        from torch_mydev.kernels.elementwise import _replay

        return _replay.value_word(self.args)


def prepare_binary(
    op: str,
    dtype: torch.dtype,
    shape: tuple[int, ...],
    strides: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]],
    *,
    alpha: bool | int | float | complex = 1,
    scalar_other: bool = False,
) -> Prepared:
    """``binary``'s set-up for operands of ``dtype`` with these byte ``strides`` (out, a, b).

    ``scalar_other``: ``b`` is one float32 value (all strides 0) and the op computes in float32
    with a single rounding, as ``binary``'s ``scalar_other`` (float16/bfloat16 only).
    """
    _check_dtype(dtype)
    code = _BINARY_CODES[op]
    fmt = _LAYOUTS[dtype].fmt
    mid = fmt if dtype in _REDUCED else PLAIN
    b_lane = _LAYOUTS[dtype].element
    if scalar_other:
        if dtype not in _REDUCED:
            raise ValueError("scalar_other is only for float16/bfloat16 ops")
        mid, b_lane = PLAIN, np.dtype(np.float32)
    lanes = (_LAYOUTS[dtype].element, _LAYOUTS[dtype].element, b_lane)
    check_zero = op in ("div_trunc", "div_floor") and not (
        dtype.is_floating_point or dtype.is_complex
    )
    shape_, lane_strides, units, extents = _lay_out(shape, strides, lanes)
    if not extents[0]:
        return _EMPTY
    meta = np.array([*units, code, fmt, fmt, mid, int(check_zero)], dtype=np.int64)
    if op in ("threshold", "threshold_backward") and dtype in _REDUCED:
        # threshold_kernel compares float16/bfloat16 values in float32 with the threshold
        # converted to float32 (``Scalar::to<float>``), not to the tensor's dtype
        scalar = scalar_bytes(alpha, torch.float32).view(np.float32)[0]
    else:
        scalar = compute_scalar(alpha, dtype)
    args = (*_tokens(lanes), meta, lane_strides, shape_, scalar)
    cheap = op in ("add", "mul", *THRESHOLDS) and dtype not in _REDUCED and not dtype.is_complex
    tile = _tile_of(lane_strides, shape_)
    return _prepared("binary", 3, args, extents, _threshold(shape_, cheap), tile)


def prepare_compare(
    op: str,
    dtype: torch.dtype,
    shape: tuple[int, ...],
    strides: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]],
) -> Prepared:
    """``compare``'s set-up: ``a``/``b`` of ``dtype``, a bool output; byte ``strides``."""
    _check_dtype(dtype)
    code = COMPARISONS.index(op)
    if dtype.is_complex and code > 1:
        raise ValueError(f"{op} is not defined for complex values")
    lane = _LAYOUTS[dtype].element
    lanes = (_LAYOUTS[torch.bool].element, lane, lane)
    shape_, lane_strides, units, extents = _lay_out(shape, strides, lanes)
    if not extents[0]:
        return _EMPTY
    meta = np.array([*units, code, _LAYOUTS[dtype].fmt], dtype=np.int64)
    args = (*_tokens(lanes[:2]), meta, lane_strides, shape_)
    cheap = dtype not in _REDUCED
    return _prepared("compare", 3, args, extents, _threshold(shape_, cheap))


def prepare_unary(
    op: str,
    dtype: torch.dtype,
    shape: tuple[int, ...],
    strides: tuple[tuple[int, ...], tuple[int, ...]],
) -> Prepared:
    """``unary``'s set-up: output and input of ``dtype``; byte ``strides`` (out, a)."""
    _check_dtype(dtype)
    code = UNARY.index(op)
    lane = _LAYOUTS[dtype].element
    shape_, lane_strides, units, extents = _lay_out(shape, strides, (lane, lane))
    if not extents[0]:
        return _EMPTY
    meta = np.array([*units, code, _LAYOUTS[dtype].fmt], dtype=np.int64)
    args = (*_tokens((lane,)), meta, lane_strides, shape_)
    cheap = dtype not in _REDUCED and not dtype.is_complex
    return _prepared("unary", 2, args, extents, _threshold(shape_, cheap))


def prepare_where(
    dtype: torch.dtype,
    shape: tuple[int, ...],
    strides: tuple[tuple[int, ...], ...],
) -> Prepared | None:
    """``where``'s set-up: a bool condition, ``a`` / ``b`` / out of ``dtype`` (moved as
    lanes of its width, bits kept); byte ``strides`` (out, cond, a, b). None for a plan
    large enough to run in parallel: ``where`` runs it."""
    lane = _MOVE_LANES[dtype.itemsize]
    cond_lane = _LAYOUTS[torch.bool].element
    shape_, lane_strides, units, extents = _lay_out(shape, strides, (lane, cond_lane, lane, lane))
    if not extents[0]:
        return _EMPTY_WHERE
    if int(np.prod(shape_)) >= _threshold(shape_, True)[1]:
        return None
    args = (
        _TOKENS[lane],
        _TOKENS[cond_lane],
        np.array(units, dtype=np.int64),
        lane_strides,
        shape_,
    )
    return Prepared(_entry(_load().where_at, 4, args), args, extents, "where")


def binary(
    op: str,
    out: Operand,
    a: Operand,
    b: Operand,
    shape: tuple[int, ...],
    *,
    alpha: bool | int | float | complex = 1,
    scalar_other: float | None = None,
) -> None:
    """``out = op(a, b)`` for ``op`` in ``ARITHMETIC`` or ``THRESHOLDS``; one dtype for all.

    ``add`` computes ``a + alpha * b`` (``sub`` is ``add`` with ``-alpha``); ``alpha`` converts
    to the compute type as ``Scalar::to`` does (the caller checks overflow). Floats use one
    fused multiply-add, as torch's CPU loops do; float16/bfloat16 round the product and the
    sum. ``scalar_other`` replaces ``b`` by one float32 value and computes in float32 with a
    single rounding: torch's ``opmath`` loop for a float16/bfloat16 op whose second operand
    is a scalar (``mul``, ``div`` and its modes). Raises ``ZeroDivisionError`` when an integer
    ``div_trunc``/``div_floor`` meets a zero divisor (elements before it may be written).
    """
    _check_same_dtype(out.dtype, a, b)
    if scalar_other is not None:
        value = np.array([scalar_other], dtype=np.float32).view(np.uint8)
        b = Operand(value, 0, torch.float32, (0,) * len(shape))
    prepared = prepare_binary(
        op,
        out.dtype,
        shape,
        (out.strides, a.strides, b.strides),
        alpha=alpha,
        scalar_other=scalar_other is not None,
    )
    if _run(prepared, out, a, b):
        raise ZeroDivisionError("integer division by zero")


def compare(op: str, out: Operand, a: Operand, b: Operand, shape: tuple[int, ...]) -> None:
    """``out = op(a, b)`` for ``op`` in ``COMPARISONS``: ``a``, ``b`` of one dtype, bool out.

    Values compare in their compute type (float16/bfloat16 widened exactly to float32); NaN
    compares unequal to everything; complex values support only ``eq``/``ne``.
    """
    if out.dtype != torch.bool:
        raise ValueError(f"compare writes a bool output, got {out.dtype}")
    _check_same_dtype(a.dtype, b)
    _run(prepare_compare(op, a.dtype, shape, (out.strides, a.strides, b.strides)), out, a, b)


def unary(op: str, out: Operand, a: Operand, shape: tuple[int, ...]) -> None:
    """``out = op(a)`` for ``op`` in ``UNARY``, one dtype (complex ``abs`` writes ``|a| + 0j``)."""
    _check_same_dtype(out.dtype, a)
    _run(prepare_unary(op, a.dtype, shape, (out.strides, a.strides)), out, a)


def where(out: Operand, cond: Operand, a: Operand, b: Operand, shape: tuple[int, ...]) -> None:
    """``out = a if cond else b``: ``cond`` bool, ``a``/``b``/``out`` of one dtype, bits kept."""
    loops = _load()
    if cond.dtype != torch.bool:
        raise ValueError(f"where needs a bool condition, got {cond.dtype}")
    _check_same_dtype(out.dtype, a, b)
    if math.prod(shape) == 0:
        return
    lane = _MOVE_LANES[out.dtype.itemsize]
    shape_, base, strides, (o, c, x, y) = _lay_out_arrays(
        shape, out, cond, a, b, lanes=(lane, None, lane, lane)
    )
    large = math.prod(shape) >= _threshold(shape_, True)[1]
    if not (large and _run_parallel("where", (o, c, x, y), base, strides, shape_)):
        loops.where_kernel(o, c, x, y, base, strides, shape_)


def fill(out: Operand, value: np.ndarray, shape: tuple[int, ...]) -> None:
    """Write ``value`` (the bytes of one element of ``out.dtype``) into every element."""
    loops = _load()
    if value.nbytes != out.dtype.itemsize:
        raise ValueError(
            f"fill value has {value.nbytes} bytes, {out.dtype} needs {out.dtype.itemsize}"
        )
    if math.prod(shape) == 0:
        return
    lane = _MOVE_LANES[out.dtype.itemsize]
    shape_, base, strides, (o,) = _lay_out_arrays(shape, out, lanes=(lane,))
    v = np.ascontiguousarray(value).view(lane)
    large = math.prod(shape) >= _threshold(shape_, True)[1]
    if not (large and _run_parallel("fill", (o,), base, strides, shape_, v)):
        loops.fill_kernel(o, v, base, strides, shape_)


# ---- helpers ---------------------------------------------------------------------------------


def _check_dtype(dtype: torch.dtype) -> None:
    if dtype not in _LAYOUTS:
        raise TypeError(f"mydev elementwise kernels do not support dtype {dtype}")


def _check_same_dtype(dtype: torch.dtype, *operands: Operand) -> None:
    _check_dtype(dtype)
    for op in operands:
        if op.dtype != dtype:
            raise ValueError(f"operands must share one dtype, got {op.dtype} and {dtype}")


def _lay_out(
    shape: tuple[int, ...],
    strides: tuple[tuple[int, ...], ...],
    lanes: tuple[np.dtype, ...],
) -> tuple[np.ndarray, np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """The loops' view of a plan: shape (at least one dim), strides in lanes, and each
    operand's extent in lanes and in bytes (all 0 when the iteration is empty).

    ``strides[i]`` are operand ``i``'s byte strides, ``lanes[i]`` its lane type.
    """
    shape = tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"negative size in shape {shape}")
    ndim = max(len(shape), 1)
    lane_strides = np.zeros((len(strides), ndim), dtype=np.int64)
    empty = math.prod(shape) == 0
    units, extents = [], []
    for k, (op_strides, lane) in enumerate(zip(strides, lanes, strict=True)):
        size = lane.itemsize
        if len(op_strides) != len(shape):
            raise ValueError(f"strides {op_strides} do not match shape {shape}")
        if any(s % size for s in op_strides):
            raise ValueError(f"strides {op_strides} not in whole elements of {size} bytes")
        if any(s < 0 for s in op_strides):
            raise ValueError(f"negative stride in {op_strides}")
        reach = (
            0 if empty else sum((n - 1) * s for n, s in zip(shape, op_strides, strict=True)) + size
        )
        units.append(reach // size)
        extents.append(reach)
        lane_strides[k, : len(shape)] = [s // size for s in op_strides]
    return np.array(shape or (1,), dtype=np.int64), lane_strides, tuple(units), tuple(extents)


def _run(prepared: Prepared, *operands: Operand) -> int:
    """Run ``prepared`` over Operand buffers: check each extent, pass the addresses."""
    if not prepared.extents[0]:
        return 0
    keep = []  # aligned copies of misaligned inputs, alive until the kernel returns
    addresses = []
    for k, (op, extent) in enumerate(zip(operands, prepared.extents, strict=True)):
        if not (
            isinstance(op.data, np.ndarray) and op.data.dtype == np.uint8 and op.data.ndim == 1
        ):
            raise TypeError("operand data must be a 1-D numpy uint8 array")
        if op.offset < 0:
            raise ValueError(f"negative offset {op.offset}")
        if op.offset + extent > op.data.shape[0]:
            raise IndexError(
                f"the plan reaches byte {op.offset + extent} of a {op.data.shape[0]}-byte buffer"
            )
        address = op.data.ctypes.data + op.offset
        layout = _LAYOUTS.get(op.dtype)
        if address % (1 if layout is None else layout.element.itemsize):
            if k == 0:
                raise ValueError("the output is not aligned to its element size")
            aligned = np.empty(max(extent, 1), dtype=np.complex128).view(np.uint8)[:extent]
            aligned[:] = op.data[op.offset : op.offset + extent]
            keep.append(aligned)
            address = aligned.ctypes.data
        addresses.append(address)
    return prepared.kernel(*addresses, *prepared.args)


def _tokens(lanes: tuple[np.dtype, ...]) -> tuple[np.ndarray, ...]:
    return tuple(_TOKENS[lane] for lane in lanes)


def _entry(dispatcher, addresses: int, args: tuple) -> Callable:
    from torch_mydev.kernels.jit._entry import entry_point

    return entry_point(dispatcher, *((0,) * addresses), *args)


def _threshold(shape: np.ndarray, cheap: bool) -> tuple[int, int]:
    """The plan's element count and the count from which it runs in parallel.

    ``PARALLEL_MIN_NUMEL``, as for copies; ``PARALLEL_STREAM_MIN_NUMEL`` for a one-dim plan
    (contiguous or evenly strided operands) of a ``cheap`` op -- about one load per input
    and one store per element, no float16/bfloat16 conversion, no division, no complex
    arithmetic -- whose serial loop streams almost as fast as two threads until the
    operands outgrow the cache. Measured here (medians, serial / parallel, the machine
    shared at a load of about 3): contiguous float32 add 33 / 31 us at 256K elements,
    137 / 83 us at 1M, 0.93 / 0.55 ms at 4M; a float16 division gains from 64K (104 /
    66 us). A parallel launch that waits for a busy core costs milliseconds, so a cheap op
    goes parallel only where the gain is large.
    """
    numel = int(np.prod(shape))
    if cheap and shape.shape[0] == 1:
        return numel, PARALLEL_STREAM_MIN_NUMEL
    return numel, PARALLEL_MIN_NUMEL


def _prepared(
    kind: str,
    addresses: int,
    args: tuple,
    extents: tuple[int, ...],
    size: tuple[int, int],
    tile: int = 0,
) -> Prepared:
    """The serial entry point of ``<kind>_at``, or from ``size`` = (elements, threshold,
    see ``_threshold``) a ``ParallelKernel`` that runs it over parts of the plan on threads
    (walked in tiles of ``tile`` when not 0)."""
    serial = _entry(getattr(_load(), kind + "_at"), addresses, args)
    numel, threshold = size
    if numel < threshold:
        return Prepared(serial, args, extents, kind)
    return Prepared(ParallelKernel(kind, serial, numel, tile), args, extents, kind)


def _tile_of(lane_strides: np.ndarray, shape: np.ndarray) -> int:
    """``BINARY_TILE`` when a large binary plan is better walked in tiles, else 0 (linear).

    Tiles (runs along dim 1 inside ``BINARY_TILE`` x ``BINARY_TILE`` blocks of dims 0 and 1)
    when the plan is a transpose -- an input runs contiguously along dim 1 and not along
    dim 0, another operand contiguously along dim 0, both dims at least ``TILE_MIN_SIDE``
    long -- and dim 0's longest stride is longer than dim 1's. A channels_last tensor plus
    a contiguous one is such a plan: along dim 0 (channels) the contiguous input jumps a
    whole H x W plane per element, a multiple of 4 KiB, so a run's elements all fall in one
    cache set; along dim 1 the others step only C elements. Measured for [16, 64, 128, 128]
    float32, two threads: 29 ms linear, 12 ms tiled. A square transpose (equal longest
    strides) is faster walked linearly: 52 ms against 71 ms tiled for 4096 x 4096.
    """
    if shape.shape[0] < 2 or min(shape[0], shape[1]) < TILE_MIN_SIDE:
        return 0
    along0 = any(lane_strides[k, 0] == 1 for k in range(3))
    along1 = any(lane_strides[k, 1] == 1 and lane_strides[k, 0] != 1 for k in (1, 2))
    longer = lane_strides[:, 0].max() > lane_strides[:, 1].max()
    return BINARY_TILE if along0 and along1 and longer else 0


def _run_parallel(kind: str, arrays: tuple, base: np.ndarray, strides: np.ndarray,
                  shape: np.ndarray, value: np.ndarray | None = None) -> bool:  # fmt: skip
    """Run ``<kind>_kernel`` (``where``, ``fill``) over runs on numba's threads
    (``elementwise.parallel.run_moves``) when a parallel region may run; False when it did
    not run."""
    if not parallel_allowed(PARALLEL_MIN_NUMEL):
        return False
    return run_moves(kind, arrays, base, strides, shape, value)


def _nothing(*args: object) -> int:
    return 0


_EMPTY = Prepared(_nothing, (), (0, 0, 0))
_EMPTY_WHERE = Prepared(_nothing, (), (0, 0, 0, 0))
# One array of each lane type: the loops over addresses read their lane type from it.
_TOKENS = {
    lane: np.zeros(1, lane)
    for lane in {
        *(layout.element for layout in _LAYOUTS.values()),
        *_MOVE_LANES.values(),
        np.dtype(np.float32),
    }
}


def _lay_out_arrays(
    shape: tuple[int, ...], *operands: Operand, lanes: tuple[np.dtype | None, ...] = ()
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[np.ndarray, ...]]:
    """Lane arrays, start offsets and strides (in lanes) of ``operands`` over ``shape``.

    ``lanes[i]`` overrides operand ``i``'s lane type (None keeps its dtype's lane). A 0-dim
    iteration becomes one dim of size 1.
    """
    shape = tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"negative size in shape {shape}")
    ndim = max(len(shape), 1)
    arrays = []
    base = np.zeros(len(operands), dtype=np.int64)
    strides = np.zeros((len(operands), ndim), dtype=np.int64)
    for k, op in enumerate(operands):
        lane = lanes[k] if k < len(lanes) and lanes[k] is not None else _LAYOUTS[op.dtype].element
        if len(op.strides) != len(shape):
            raise ValueError(f"strides {op.strides} do not match shape {shape}")
        if not (
            isinstance(op.data, np.ndarray) and op.data.dtype == np.uint8 and op.data.ndim == 1
        ):
            raise TypeError("operand data must be a 1-D numpy uint8 array")
        size = lane.itemsize
        if op.offset % size or any(s % size for s in op.strides):
            raise ValueError(f"offset {op.offset} / strides {op.strides} not in whole elements")
        if op.offset < 0 or any(s < 0 for s in op.strides):
            raise ValueError(f"negative offset or stride ({op.offset}, {op.strides})")
        last = op.offset + sum((n - 1) * s for n, s in zip(shape, op.strides, strict=True)) + size
        if last > op.data.shape[0]:
            raise IndexError(f"the plan reaches byte {last} of a {op.data.shape[0]}-byte buffer")
        usable = op.data.shape[0] - op.data.shape[0] % size
        arrays.append(op.data[:usable].view(lane))
        base[k] = op.offset // size
        strides[k, : len(shape)] = [s // size for s in op.strides]
    return np.array(shape or (1,), dtype=np.int64), base, strides, tuple(arrays)
