"""Decides nothing: hands the stub a record of each elementwise call signature Python answered.

The per-call path of a functional elementwise op (``a + b``, ``a < b``, ``-a``, ``relu(a)``)
repeats what the signature's ``Entry`` already decided: allocate the output, call the loop.
``_C._replay(table, a[, b])`` does that in one stub call, below Python's per-call cost: it
reads the tensors' layout key, finds the record, checks the storages hold the layout,
allocates, and calls the loop through a numba C entry point
(``kernels/elementwise/_replay.py``, ``_replay_copy.py``).
Records are made here from entries the Python path made (``record``), on a signature's
second call (a one-off call never loads the entry points), one table per op, for
the calls whose entry depends on nothing but the tensors' layouts: functional, every
operand a mydev tensor, ``alpha`` the default 1, a loop small enough to run serially. A
call the table does not know goes to the Python path, which raises, plans or records.
"""

from __future__ import annotations

import collections
import contextlib
import functools
from collections.abc import Callable

from torch_mydev import _C
from torch_mydev.kernels.jit.compiler import NotCompiled

__all__ = [
    "COPY",
    "NATIVE",
    "NEW_COPY",
    "TABLES",
    "TABLE_SIZE",
    "Record",
    "clear",
    "record",
    "record_copy",
    "replay",
    "replay_copy",
]

replay = _C._replay
replay_copy = _C._replay_copy
Record = collections.namedtuple("Record", (*_C.REPLAY_RECORD_FIELDS, "keep"))
"""One replay record, by the field names the stub defines (csrc_stub/replay.cpp); ``keep``
holds the parameters' block alive while the record lives."""
TABLE_SIZE = 4096  # records per op; a full table is emptied (records are remade on use)
# op -> {signature key: record}; add/sub/mul, the comparisons, neg, abs, relu.
TABLES: dict[str, dict[bytes, tuple]] = {
    name: {} for name in ("add", "sub", "mul", "eq", "ne", "lt", "le", "gt", "ge", "neg", "abs")
}
TABLES["relu"] = {}
# copy_: {signature of (dst, src): record}; clone: memory format -> {signature of src: record}
COPY: dict[bytes, tuple] = {}
NEW_COPY: dict[object, dict[bytes, tuple]] = {}
_TABLE_NAMES = {id(table): name for name, table in TABLES.items()}

# The overloads the stub replays before Python (csrc_stub/native_replay.cpp): overload ->
# (table, tensor operands, whether an ``alpha`` argument must be 1). Their Python kernels are
# registered for PrivateUse3, where the stub's kernel sends every call it does not replay.
NATIVE: dict[str, tuple[str, int, bool]] = {
    "add.Tensor": ("add", 2, True),
    "sub.Tensor": ("sub", 2, True),
    "mul.Tensor": ("mul", 2, False),
    **{f"{name}.Tensor": (name, 2, False) for name in ("eq", "ne", "lt", "le", "gt", "ge")},
    "neg": ("neg", 1, False),
    "abs": ("abs", 1, False),
    "relu": ("relu", 1, False),
}


def _unless_compiling(make: Callable[..., None]) -> Callable[..., None]:
    """``make``, skipped while the C entry it needs compiles in the background: the call
    runs through Python, and a later call records it."""

    @functools.wraps(make)
    def maybe(*args: object) -> None:
        with contextlib.suppress(NotCompiled):
            make(*args)

    return maybe


@_unless_compiling
def record(table: dict[bytes, tuple], key: bytes, entry) -> None:
    """Record ``entry`` (an ``elementwise.entries.Entry``) under the signature ``key``, in
    the stub's table of the same op too; a loop the stub does not replay (parallel, or of
    nothing) is not recorded. The kernel gives its C entry and parameter block
    (``Prepared.replay_block``): nothing here reads a kernel's arguments."""
    block = entry.prepared.replay_block()
    if block is None:
        return
    address, params = block
    extents = entry.prepared.extents
    name = _TABLE_NAMES.get(id(table))
    if name is not None:
        _C._native_replay_put(
            name,
            key,
            entry.sizes,
            entry.strides,
            entry.dtype,
            entry.device,
            address,
            params.tobytes(),
            extents[1],
            extents[2] if len(extents) > 2 else 0,
        )
    _put(
        table,
        key,
        Record(
            sizes=entry.sizes,
            strides=entry.strides,
            dtype=entry.dtype,
            device=entry.device,
            entry=address,
            params=params.ctypes.data,
            extent0=extents[1],
            extent1=extents[2] if len(extents) > 2 else 0,
            unit=1,
            keep=params,
        ),
    )


@_unless_compiling
def record_copy(table: dict[bytes, tuple], key: bytes, prepared, layout: tuple = ()) -> None:
    """Record a same-dtype copy set up as ``prepared`` (a ``kernels.PreparedCopy``) under
    ``key``; ``layout`` is ``(sizes, strides, dtype, device index)`` of the new tensor a
    clone makes (empty for ``copy_``). A copy the stub does not replay (of nothing, or
    parallel) is not recorded; the kernel gives its C entry and parameter block
    (``PreparedCopy.replay_block``)."""
    block = None if prepared is None else prepared.replay_block()
    if block is None:
        return
    address, params = block
    sizes, strides, dtype, index = layout or (None, None, None, -1)
    _put(
        table,
        key,
        Record(
            sizes=sizes,
            strides=strides,
            dtype=dtype,
            device=index,
            entry=address,
            params=params.ctypes.data,
            extent0=prepared.dst_extent,
            extent1=prepared.src_extent,
            unit=prepared.unit,
            keep=params,
        ),
    )


def _put(table: dict[bytes, tuple], key: bytes, record: Record) -> None:
    """``table[key] = record``, emptying a full table first (``TABLE_SIZE``)."""
    if len(table) >= TABLE_SIZE:
        table.clear()
    table[key] = record


def clear() -> None:
    """Forget every record (the tests' way to start from the Python path)."""
    for table in (*TABLES.values(), COPY, *NEW_COPY.values()):
        table.clear()
    _C._native_replay_clear()
