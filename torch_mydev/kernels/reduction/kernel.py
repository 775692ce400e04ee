"""Decides which reduction loop runs a planned reduction, on how many threads, and with what.

``prepare(op, plan, out_dtype, in_dtype, count)`` turns a ``ReductionPlan``
(``torch_mydev_rules.iterator.reduction``) into a ``PreparedReduction``: the plan's walk
split into kept and reduced dims (strides in lanes), the loop (``reduction._loops``) and its
compiled entry point. ``run(prepared, out, inp)`` checks the operands' extents against their
``Buffer`` s and calls it on their addresses (``prepare_cascade`` / ``run_cascade``: the
exact float sum). Nothing here knows torch dispatch: bytes and a plan in, bytes out.

The walk: ``outer`` when the input's fastest kept dim is faster than its fastest reduced dim
(``sum(0)`` of a contiguous matrix: rows of accumulators, contiguous loads), else ``inner``
(each output over its own span). From ``PARALLEL_MIN_NUMEL`` input elements a parallel form
runs on numba's threads (``threads.parallel_calls``, through the walks' C entries in
``parallel._entries``): the same walk over runs of its outputs (``inner``) or of chunks of the
fastest kept dim (``outer``), or, for a single output, ``SPLIT_PARTS`` chunks of its span
reduced apart and combined in order (``split``), so a float sum's bits do not depend on
the thread count.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from types import ModuleType
from typing import NamedTuple

import numpy as np
import torch

from torch_mydev.kernels import numba_module
from torch_mydev.kernels.copy.loops import PARALLEL_MIN_NUMEL, parallel_allowed
from torch_mydev.kernels.dtypes import layout_of
from torch_mydev.kernels.operand import Operand
from torch_mydev.kernels.parallel import threads
from torch_mydev.kernels.reduction._modes import HALVES, PLAIN
from torch_mydev_rules.iterator.reduction import ReductionPlan

__all__ = [
    "OPS",
    "Buffer",
    "PreparedCascade",
    "PreparedReduction",
    "exact_float_sum",
    "prepare",
    "prepare_cascade",
    "prepare_extreme",
    "run",
    "run_cascade",
]

OPS = {"sum": 0, "mean": 1, "amax": 2, "amin": 3}
# Chunks one output's span is cut in when it is reduced on threads (fixed, so a float sum
# does not depend on the thread count).
SPLIT_PARTS = 16
# ``outer`` needs at least this many outputs along the input's fastest dim.
OUTER_MIN_WIDTH = 4

_entries: dict[tuple, Callable] = {}
_tokens: dict[np.dtype, np.ndarray] = {}


def _load() -> ModuleType:
    """Import the numba loops on first use (importing the package must not import numba)."""
    return numba_module("reduction._loops")


class PreparedReduction(NamedTuple):
    """One reduction over one plan, set up once.

    ``serial`` / ``parallel`` are (loop name, arguments after the lanes); ``parallel`` is
    None below the threshold, the serial walk when its outputs are cut in runs for threads,
    or ``("split", (..., partial))`` for one output whose span is. ``extents`` are the bytes
    from element ``[0, ..., 0]`` each of output and input must hold; ``lanes`` their lane
    types.
    """

    serial: tuple[str, tuple]
    parallel: tuple[str, tuple] | None
    extents: tuple[int, int]
    lanes: tuple[np.dtype, np.dtype]
    tables: dict  # (walk, parts) -> the parallel runs' call table (``_table``), made on use


def _lanes(dtype: torch.dtype) -> tuple[np.dtype, int]:
    layout = layout_of(dtype)
    if layout.kind == "complex":
        raise TypeError(f"mydev reduction kernels do not support dtype {dtype}")
    return layout.lane, layout.fmt


def _array(values: list[int]) -> np.ndarray:
    return np.array(values or [1], dtype=np.int64)


def prepare(
    op: str, plan: ReductionPlan, out_dtype: torch.dtype, in_dtype: torch.dtype, count: int
) -> PreparedReduction:
    """The loop and arguments of ``op`` (``"sum"``, ``"mean"``, ``"amax"``, ``"amin"``) over a
    non-empty ``plan``; ``count`` is a mean's divisor (elements per output)."""
    out_lane, out_fmt = _lanes(out_dtype)
    in_lane, in_fmt = _lanes(in_dtype)
    out_size, in_size = out_lane.itemsize, in_lane.itemsize
    out_bytes, in_bytes = plan.stride_bytes
    kshape, kout, kin, rshape, rin = [], [], [], [], []
    for n, so, si, reduced in zip(plan.shape, out_bytes, in_bytes, plan.reduced, strict=True):
        if reduced:
            rshape.append(n)
            rin.append(si // in_size)
        elif n > 1:
            kshape.append(n)
            kout.append(so // out_size)
            kin.append(si // in_size)
    if any(s < 0 for s in kout + kin + rin):
        raise ValueError("negative strides are not supported")
    numel = math.prod(plan.shape)
    if numel == 0:
        raise ValueError("an empty reduction has no loop (fill the result instead)")
    extents = (
        sum((n - 1) * s for n, s in zip(kshape, kout, strict=True)) * out_size + out_size,
        sum((n - 1) * s for n, s in zip(plan.shape, in_bytes, strict=True)) + in_size,
    )
    nout = math.prod(kshape)
    arrays = (_array(kshape), _array(kout), _array(kin), _array(rshape), _array(rin))
    if not rin:  # nothing to reduce: a span of one element
        arrays = (*arrays[:3], _array([1]), _array([0]))
    common = (0, 0, *arrays, in_fmt, out_fmt, OPS[op], float(count))
    outer = bool(kshape and rshape and kin[0] < rin[0] and kshape[0] >= OUTER_MIN_WIDTH)
    walk = "outer" if outer else "inner"
    span = (0, kshape[0]) if outer else (0, nout)
    serial = (walk, (*common, *span))
    parallel = None
    if numel >= PARALLEL_MIN_NUMEL:
        if outer or nout > 1:
            parallel = serial
        else:
            parts = min(SPLIT_PARTS, max(1, numel // 4096))
            parallel = ("split", (*common, np.zeros(parts, _accumulator(in_lane))))
    return PreparedReduction(serial, parallel, extents, (out_lane, in_lane), {})


def _units(extent: int, lane: np.dtype) -> int:
    return extent // lane.itemsize


def _entry(name: str, lanes: tuple[np.dtype, np.dtype], args: tuple) -> Callable:
    key = (name, lanes)
    entry = _entries.get(key)
    if entry is None:
        from torch_mydev.kernels.jit._entry import entry_point

        tokens = tuple(_token(lane) for lane in lanes)
        entry = entry_point(getattr(_load(), name + "_at"), 0, 0, 0, 0, *tokens, *args)
        _entries[key] = entry
    return entry


def _token(lane: np.dtype) -> np.ndarray:
    token = _tokens.get(lane)
    if token is None:
        token = _tokens[lane] = np.zeros(1, dtype=lane)
    return token


class Buffer(NamedTuple):
    """An operand as a kernel reaches it: the address of element ``[0, ..., 0]`` and how
    many bytes from there its storage holds."""

    address: int
    size: int

    @classmethod
    def of(cls, op: Operand) -> Buffer:
        """The buffer of an ``Operand`` (a numpy byte view of the storage, an offset)."""
        data = op.data
        if not (isinstance(data, np.ndarray) and data.dtype == np.uint8 and data.ndim == 1):
            raise TypeError("operand data must be a 1-D numpy uint8 array")
        if op.offset < 0:
            raise ValueError(f"negative offset {op.offset}")
        return cls(data.ctypes.data + op.offset, data.shape[0] - op.offset)


def _address(address: int, size: int, extent: int, lane: np.dtype) -> int:
    """``address`` after checking that ``extent`` bytes fit in the ``size`` bytes there and
    that it suits ``lane``."""
    if extent > size:
        raise IndexError(f"the plan reaches byte {extent} of a {size}-byte buffer")
    if address % lane.itemsize:
        raise ValueError("operand not aligned to its element size")
    return address


def run(prepared: PreparedReduction, out: Buffer, inp: Buffer) -> None:
    """Run ``prepared``: check both extents and alignment, pass the addresses."""
    out_lane, in_lane = prepared.lanes
    out_address = _address(*out, prepared.extents[0], out_lane)
    in_address = _address(*inp, prepared.extents[1], in_lane)
    head = (
        out_address,
        in_address,
        _units(prepared.extents[0], out_lane),
        _units(prepared.extents[1], in_lane),
        _token(out_lane),
        _token(in_lane),
    )
    if prepared.parallel is not None:
        _run_parallel(prepared, head)
        return
    name, args = prepared.serial
    _entry(name, prepared.lanes, args)(*head, *args)


def _run_parallel(prepared: PreparedReduction, head: tuple) -> None:
    """``prepared.parallel`` over runs of its range: the walk's outputs (``inner``), its
    chunks of ``OUTER_CHUNK`` along the fastest kept dim (``outer``), or the chunks of one
    output's span (``split``, then their combination in order). The runs go to numba's
    threads through the walk's C entry (``threads.parallel_calls``); where that cannot run
    (one thread, the entry compiling in the background, another region running) they run
    here one after another, which writes the same bytes."""
    name, args = prepared.parallel
    if name == "split":
        *common, partial = args
        partial = np.zeros_like(partial)  # one per call: calls may run on several threads
        _run_parts(prepared, head, "split_part", common, 0, partial.shape[0], 1, partial)
        _entry("split_store", prepared.lanes, args)(*head, *common, partial)
        return
    *common, begin, end = args
    step = _load().OUTER_CHUNK if name == "outer" else 1
    _run_parts(prepared, head, name, common, begin, end, step)


def _run_parts(
    prepared: PreparedReduction,
    head: tuple,
    name: str,
    common: list,
    begin: int,
    end: int,
    step: int,
    partial: np.ndarray | None = None,
) -> None:
    """``<name>_at`` over ``begin .. end`` cut in ``threads.count()`` runs of whole
    ``step`` s, on numba's threads, or in one call here."""
    tail = () if partial is None else (partial,)
    chunks = -(-(end - begin) // step)
    if parallel_allowed(PARALLEL_MIN_NUMEL) and chunks > 1:
        runs = [
            (begin + c0 * step, min(end, begin + c1 * step))
            for c0, c1 in threads.split(chunks, threads.count())
        ]
        table = _table(prepared, name, tuple(common), head[2:4], runs, partial)
        if table is not None:
            calls, starts, blocks = table
            calls = calls.copy()
            calls[:, 1], calls[:, 2] = head[0], head[1]
            if partial is not None:  # each call its own partial results
                blocks = [block.copy() for block in blocks]
                for block in blocks:
                    block[12] = partial.ctypes.data
                calls[:, 4] = [block.ctypes.data for block in blocks]
            if threads.run_calls(calls, starts) is not None:
                return
    _entry(name, prepared.lanes, (*common, *tail, begin, end))(*head, *common, *tail, begin, end)


def _table(
    prepared: PreparedReduction,
    name: str,
    common: tuple,
    units: tuple[int, int],
    runs: list[tuple[int, int]],
    partial: np.ndarray | None,
) -> tuple | None:
    """The call table of ``<name>_at`` over ``runs`` (addresses left 0) and the parameter
    blocks it points at, made once per prepared reduction and run count; None while the
    walk's C entry compiles in the background."""
    key = (name, len(runs))
    table = prepared.tables.get(key)
    if table is not None:
        return table
    from torch_mydev.kernels.jit.compiler import NotCompiled
    from torch_mydev.kernels.parallel import _entries as entries

    out_lane, in_lane = prepared.lanes
    acc = np.float64 if partial is None else partial.dtype.type  # only a split reads it
    try:
        entry = entries.walk_entry(name, out_lane.type, in_lane.type, acc)
    except NotCompiled:
        return None
    blocks = [entries.pack_walk(common, begin, end, units, partial) for begin, end in runs]
    calls, starts = threads.call_table([[(entry, 0, 0, 0, block.ctypes.data)] for block in blocks])
    prepared.tables[key] = table = (calls, starts, blocks)
    return table


def _accumulator(lane: np.dtype) -> type:
    """The type ``reduction._loops.widen`` accumulates ``lane`` in."""
    return np.float64 if lane == np.uint16 or lane.kind == "f" else np.int64


def runner(prepared: PreparedReduction) -> Callable[[int, int, int], None]:
    """``run`` for a repeated call whose output is a new tensor the plan fits exactly:
    ``run(out address, input address, bytes the input's storage holds from there)``, with
    the entry point resolved once. The input's extent and alignment are still checked per
    call (a view may sit nearer its storage's end); a plan that may run in parallel keeps
    ``run``."""
    if prepared.parallel is not None:
        return lambda out, inp, available: run(
            prepared, Buffer(out, prepared.extents[0]), Buffer(inp, available)
        )
    out_lane, in_lane = prepared.lanes
    name, args = prepared.serial
    entry = _entry(name, prepared.lanes, args)
    out_units = _units(prepared.extents[0], out_lane)
    in_units = _units(prepared.extents[1], in_lane)
    tokens = (_token(out_lane), _token(in_lane))
    extent = prepared.extents[1]

    def run_serial(out: int, inp: int, available: int) -> None:
        entry(out, _address(inp, available, extent, in_lane), out_units, in_units, *tokens, *args)

    return run_serial


# ---- the exact replica of CPU's serial float sum (``reduction._cascade``) ------------------------

# Below this many elements torch CPU sums on one thread (``at::internal::GRAIN_SIZE``).
GRAIN_SIZE = 32768
# ``Vectorized<T>`` bytes of the kernel torch CPU runs for ``sum`` on x86 (AVX2 or default).
VECTOR_BYTES = 32


class PreparedCascade(NamedTuple):
    """A serial replica's arguments after the addresses and lanes, both byte extents, and
    the replica: ``cascade_at`` of ``reduction._cascade`` (sums) or ``extreme_at`` of
    ``reduction._extreme`` (amax/amin); both take a trailing int (the mean's divisor)."""

    args: tuple
    extents: tuple[int, int]
    lane: np.dtype
    module: str = "reduction._cascade"
    loop: str = "cascade_at"


# The CPU capabilities whose amax/amin kernel ``reduction._extreme`` replays: AVX2's ``maximum``
# (AVX512 machines run the AVX2 kernel). The generic ``Vectorized`` (``DEFAULT``, other
# architectures) keeps a NaN's own bits and breaks ties its own way.
_EXTREME_CAPABILITIES = frozenset({"AVX2", "AVX512"})


@functools.cache
def _cpu_capability() -> str:
    """The kernel set torch CPU dispatches to (read once: it is fixed at start-up)."""
    return torch.backends.cpu.get_cpu_capability()


def exact_float_extreme(dtype: torch.dtype, numel: int) -> bool:
    """Whether torch CPU reduces ``numel`` elements of float32/float64 ``dtype`` to their
    amax/amin serially with the AVX2 kernel (so ``reduction._extreme`` gives its bits): below
    ``GRAIN_SIZE``, or on one thread, on x86 with AVX2."""
    if dtype not in (torch.float32, torch.float64):
        return False
    if _cpu_capability() not in _EXTREME_CAPABILITIES:
        return False
    return numel < GRAIN_SIZE or torch.get_num_threads() == 1


def prepare_extreme(plan: ReductionPlan, dtype: torch.dtype, is_max: bool) -> PreparedCascade:
    """``extreme_at``'s set-up for a non-empty ``plan`` of float32/float64 ``dtype``: strides
    in elements, ``Vectorized<T>::size()`` and the dtype's all-ones and quiet NaNs."""
    lane = np.dtype(np.float32 if dtype == torch.float32 else np.float64)
    size = lane.itemsize
    bits = np.uint32 if size == 4 else np.uint64
    quiet = 0x7FC00000 if size == 4 else 0x7FF8000000000000
    nans = np.array([np.iinfo(bits).max, quiet], dtype=bits).view(lane)
    shape, out_bytes, in_bytes, extents = _walk(plan, size)
    args = (
        np.array(shape, dtype=np.int64),
        np.array([s // size for s in out_bytes], dtype=np.int64),
        np.array([s // size for s in in_bytes], dtype=np.int64),
        VECTOR_BYTES // size,
        is_max,
        nans,
    )
    return PreparedCascade(args, extents, lane, "reduction._extreme", "extreme_at")


def _walk(
    plan: ReductionPlan, size: int
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, int]]:
    """The plan's walk (at least one dim), its output and input byte strides, and the bytes
    each operand spans from element 0 (elements of ``size`` bytes)."""
    shape = plan.shape or (1,)
    out_bytes = plan.stride_bytes[0] or (0,)
    in_bytes = plan.stride_bytes[1] or (0,)
    extents = tuple(
        sum((n - 1) * s for n, s in zip(shape, strides, strict=True)) + size
        for strides in (out_bytes, in_bytes)
    )
    return shape, out_bytes, in_bytes, (extents[0], extents[1])


def exact_float_sum(dtype: torch.dtype, numel: int) -> bool:
    """Whether torch CPU sums ``numel`` elements of float ``dtype`` serially (so the cascade
    replica gives its bits): below ``GRAIN_SIZE``, or on one thread."""
    if not dtype.is_floating_point:
        return False
    return numel < GRAIN_SIZE or torch.get_num_threads() == 1


def prepare_cascade(plan: ReductionPlan, dtype: torch.dtype) -> PreparedCascade:
    """``cascade_sum``'s set-up for a non-empty ``plan`` whose output and input are ``dtype``:
    strides in elements, and the widths of the ``Vectorized`` types torch's kernel uses."""
    lane, fmt = _lanes(dtype)
    size = lane.itemsize
    # 32-byte vectors: ``sum_stub`` is registered with REGISTER_DISPATCH, which leaves its
    # AVX512 slot empty (DispatchStub.h), so an AVX512 machine runs the AVX2 kernel.
    width = VECTOR_BYTES
    vec = width // dtype.itemsize
    accumulator = np.float64 if dtype == torch.float64 else np.float32
    lanes = width // np.dtype(accumulator).itemsize
    mode = HALVES if dtype in (torch.float16, torch.bfloat16) else PLAIN
    shape, out_bytes, in_bytes, extents = _walk(plan, size)
    args = (
        np.array(shape, dtype=np.int64),
        np.array([s // size for s in out_bytes], dtype=np.int64),
        np.array([s // size for s in in_bytes], dtype=np.int64),
        fmt,
        vec,
        lanes,
        mode,
        np.zeros(1, dtype=accumulator),
    )
    return PreparedCascade(args, extents, lane)


def _cascade_entry(prepared: PreparedCascade) -> Callable:
    """The replica's compiled entry point for ``prepared``'s argument types (loaded once)."""
    module = numba_module(prepared.module)
    token = _token(prepared.lane)
    key = (prepared.loop, prepared.lane, prepared.args[-1].dtype)
    entry = _entries.get(key)
    if entry is None:
        from torch_mydev.kernels.jit._entry import entry_point

        loop = getattr(module, prepared.loop)
        entry = entry_point(loop, 0, 0, 0, 0, token, token, *prepared.args, 0)
        _entries[key] = entry
    return entry


class CascadeRun:
    """``run_cascade`` for a repeated call whose output is a new tensor the plan fits
    exactly, as ``runner``: ``run(out address, input address, bytes the input's storage
    holds from there)``, the entry point resolved once, the input checked per call.
    ``extents`` are the bytes output and input span; ``replay_block`` gives the stub the
    same replica as one C entry and its parameter block."""

    __slots__ = ("_args", "_entry", "_in_units", "_out_units", "_token", "divisor", "extents",
                 "prepared", "unit")  # fmt: skip

    def __init__(self, prepared: PreparedCascade, divisor: int) -> None:
        lane = prepared.lane
        self.prepared = prepared
        self.divisor = divisor
        self.extents = prepared.extents
        self.unit = lane.itemsize  # what the input's address must be a multiple of
        self._entry = _cascade_entry(prepared)
        self._token = _token(lane)
        self._out_units = prepared.extents[0] // lane.itemsize
        self._in_units = prepared.extents[1] // lane.itemsize
        self._args = prepared.args

    def __call__(self, out: int, inp: int, available: int) -> None:
        inp = _address(inp, available, self.extents[1], self.prepared.lane)
        token = self._token
        self._entry(out, inp, self._out_units, self._in_units, token, token, *self._args,
                    self.divisor)  # fmt: skip

    def replay_block(self) -> tuple[int, np.ndarray]:
        """The C entry (``reduction._replay``) and parameter block of this replica."""
        from torch_mydev.kernels.reduction import _replay

        prepared, lane = self.prepared, self.prepared.lane.type
        if prepared.loop == "cascade_at":
            shape, ostrides, istrides, fmt, vec, lanes, mode, token = prepared.args
            address = _replay.cascade_entry(lane, token.dtype.type)
            words, tail = (fmt, vec, lanes, mode), None
        else:
            shape, ostrides, istrides, vec, is_max, nans = prepared.args
            address = _replay.extreme_entry(lane)
            words, tail = (vec, int(is_max), 0, 0), nans
        params = _replay.pack(self._out_units, self._in_units, words, self.divisor, shape,
                              ostrides, istrides, tail)  # fmt: skip
        return address, params


def cascade_runner(prepared: PreparedCascade, divisor: int) -> CascadeRun:
    """The ``CascadeRun`` of ``prepared`` (a mean's ``divisor``, else 0)."""
    return CascadeRun(prepared, divisor)


def run_cascade(prepared: PreparedCascade, out: Buffer, inp: Buffer, divisor: int = 0) -> None:
    """Zero ``out``, sum into it exactly as CPU's serial ``cascade_sum``, then divide each
    result by ``divisor`` in its dtype when it is above 0 (a mean's ``div_``)."""
    lane = prepared.lane
    token = _token(lane)
    entry = _cascade_entry(prepared)
    entry(
        _address(*out, prepared.extents[0], lane),
        _address(*inp, prepared.extents[1], lane),
        prepared.extents[0] // lane.itemsize,
        prepared.extents[1] // lane.itemsize,
        token,
        token,
        *prepared.args,
        divisor,
    )
