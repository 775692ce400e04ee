"""Decides nothing: hands the stub a record of each elementwise call signature Python answered.

The per-call path of a functional elementwise op (``a + b``, ``a < b``, ``-a``, ``relu(a)``)
repeats what the signature's ``Entry`` already decided: allocate the output, call the loop.
``_C._replay(table, a[, b])`` does that in one stub call, below Python's per-call cost: it
reads the tensors' layout key, finds the record, checks the storages hold the layout,
allocates, and calls the loop through a numba C entry point
(``kernels/_replay_elementwise.py``, ``_replay_copy.py``).
Records are made here from entries the Python path made (``record``), on a signature's
second call (a one-off call never loads the entry points), one table per op, for
the calls whose entry depends on nothing but the tensors' layouts: functional, every
operand a mydev tensor, ``alpha`` the default 1, a loop small enough to run serially. A
call the table does not know goes to the Python path, which raises, plans or records.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable

import numpy as np

from torch_mydev import _C
from torch_mydev.kernels.compiler import NotCompiled

__all__ = [
    "COPY",
    "NEW_COPY",
    "TABLES",
    "TABLE_SIZE",
    "clear",
    "record",
    "record_copy",
    "replay",
    "replay_copy",
]

replay = _C._replay
replay_copy = _C._replay_copy
TABLE_SIZE = 4096  # records per op; a full table is emptied (records are remade on use)
# op -> {signature key: record}; add/sub/mul, the comparisons, neg, abs, relu.
TABLES: dict[str, dict[bytes, tuple]] = {
    name: {} for name in ("add", "sub", "mul", "eq", "ne", "lt", "le", "gt", "ge", "neg", "abs")
}
TABLES["relu"] = {}
# copy_: {signature of (dst, src): record}; clone: memory format -> {signature of src: record}
COPY: dict[bytes, tuple] = {}
NEW_COPY: dict[object, dict[bytes, tuple]] = {}
_META_WORDS = 8


def _unless_compiling(make: Callable[..., None]) -> Callable[..., None]:
    """``make``, skipped while the C entry it needs compiles in the background: the call
    runs through Python, and a later call records it."""

    @functools.wraps(make)
    def maybe(*args: object) -> None:
        with contextlib.suppress(NotCompiled):
            make(*args)

    return maybe


@_unless_compiling
def record(table: dict[bytes, tuple], key: bytes, kind: str, entry) -> None:
    """Record ``entry`` (an ``elementwise_entries.Entry`` whose loop is ``kind``:
    ``"binary"``, ``"compare"`` or ``"unary"``) under the signature ``key``; a parallel loop
    (a large layout: its cost is the loop, not the call) is not recorded."""
    from torch_mydev.kernels import _replay_elementwise as loops
    from torch_mydev.kernels.elementwise import ParallelKernel

    if isinstance(entry.kernel, ParallelKernel) or not entry.extents[0]:
        return
    args = entry.args
    if kind == "binary":
        out_t, a_t, b_t, meta, strides, shape, value = args
        address = loops.binary_entry(out_t.dtype.type, a_t.dtype.type, b_t.dtype.type, type(value))
        params = _pack(meta, strides, shape, value)
    elif kind == "compare":
        out_t, a_t, meta, strides, shape = args
        address = loops.compare_entry(out_t.dtype.type, a_t.dtype.type)
        params = _pack(meta, strides, shape)
    else:
        lane, meta, strides, shape = args
        address = loops.unary_entry(lane.dtype.type)
        params = _pack(meta, strides, shape)
    extents = entry.extents
    _put(
        table,
        key,
        entry.sizes,
        entry.strides,
        entry.dtype,
        entry.device,
        address,
        params.ctypes.data,
        extents[1],
        extents[2] if len(extents) > 2 else 0,
        params,  # keeps the block alive
    )


@_unless_compiling
def record_copy(table: dict[bytes, tuple], key: bytes, prepared, layout: tuple = ()) -> None:
    """Record a same-dtype copy set up as ``prepared`` (a ``kernels.PreparedCopy`` whose
    serial loop runs it) under ``key``; ``layout`` is ``(sizes, strides, dtype, device
    index)`` of the new tensor a clone makes (empty for ``copy_``). A copy of nothing or a
    parallel one is not recorded."""
    from torch_mydev.kernels import _replay_copy as loops

    if prepared is None or not prepared.numel:
        return
    prepared.load()  # a layout copied again runs its loop from now on (numba loads if need be)
    if prepared.serial is None:  # a parallel copy
        return
    if prepared.loop is None:  # one byte range
        address = loops.move_entry()
        params = np.array([prepared.nbytes], dtype=np.int64)
    else:
        loop = prepared.loop
        kind = "planes" if loop.blocks else "tiles" if loop.tiles else "range"
        dst_units, src_units, dst_strides, src_strides, shape, width, lane, *tail = (
            prepared.serial_args
        )
        tail = (*tail, 0)[:3]
        address = loops.strided_entry(kind, lane.dtype.type)
        params = np.array(
            [
                shape.shape[0],
                dst_units,
                src_units,
                width,
                *tail,
                *shape,
                *dst_strides,
                *src_strides,
            ],
            dtype=np.int64,
        )
    sizes, strides, dtype, index = layout or (None, None, None, -1)
    extents = (prepared.dst_extent, prepared.src_extent)
    record = (sizes, strides, dtype, index, prepared.unit, *extents, address, params.ctypes.data)
    _put(table, key, *record, params)


def _put(table: dict[bytes, tuple], key: bytes, *record: object) -> None:
    """``table[key] = record``, emptying a full table first (``TABLE_SIZE``)."""
    if len(table) >= TABLE_SIZE:
        table.clear()
    table[key] = record


def _pack(meta: np.ndarray, strides: np.ndarray, shape: np.ndarray, value=None) -> np.ndarray:
    """The parameter block ``_replay_elementwise`` reads: ndim, meta (8 words), shape, strides,
    then the compute value's bytes."""
    ndim = shape.shape[0]
    head = 1 + _META_WORDS + ndim + strides.size
    params = np.zeros(head + 2, dtype=np.int64)
    params[0] = ndim
    params[1 : 1 + meta.shape[0]] = meta
    params[1 + _META_WORDS : 1 + _META_WORDS + ndim] = shape
    params[1 + _META_WORDS + ndim : head] = strides.reshape(-1)
    if value is not None:
        raw = np.frombuffer(np.asarray(value).tobytes(), dtype=np.uint8)
        params.view(np.uint8)[8 * head : 8 * head + raw.size] = raw
    return params


def clear() -> None:
    """Forget every record (the tests' way to start from the Python path)."""
    for table in (*TABLES.values(), COPY, *NEW_COPY.values()):
        table.clear()
