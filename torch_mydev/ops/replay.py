"""Decides nothing: hands the stub a record of each elementwise call signature Python answered.

The per-call path of an elementwise op (``a + b``, ``a < b``, ``-a``, ``relu(a)``,
``x.mul_(beta)``, ``x * 0.5``), a fill, a reduction, a clone or an ``empty_like`` repeats
what the signature's ``Entry`` already decided:
allocate the output (or write ``self``), call the loop. The stub does that below Python's
per-call cost: its C++ kernels in front of the dispatcher (``NATIVE``,
csrc_stub/replay/native_replay.cpp) read the tensors' layout key, find the record, check the
storages hold the layout, convert a Python number operand's value, allocate, and call the
loop through a numba C entry point (``kernels/elementwise/_replay.py``, ``_replay_copy.py``);
``_C._replay(table, a[, b])`` does the same from Python for a functional call of tensors.
Records are made here from entries the Python path made (``record``), on a signature's
second call (a one-off call never loads the entry points), one table per op and form, for
the calls whose entry depends on nothing but the tensors' layouts and a number's type:
every tensor on mydev, a loop small enough to run serially. add's and sub's ``alpha`` (an
int, or a float for a floating dtype) is written per call into the stub's copy of the
parameters, so a new learning rate finds the record; ``_C._replay``'s Python tables take
``alpha`` 1 only. A call the table does not know goes to the Python path, which raises,
plans or records.
"""

from __future__ import annotations

import collections
import contextlib
import functools
from collections.abc import Callable
from typing import NamedTuple

import torch

from torch_mydev import _C
from torch_mydev.kernels.jit.compiler import NotCompiled
from torch_mydev_rules.iterator.numbers import NUMBER_DTYPES

__all__ = [
    "COPY",
    "NATIVE",
    "NEW_COPY",
    "TABLES",
    "TABLE_SIZE",
    "Record",
    "Target",
    "clear",
    "record",
    "record_clone",
    "record_copy",
    "record_empty_like",
    "record_fill",
    "record_to_copy",
    "reduction_target",
    "replay",
    "replay_copy",
    "target",
]

replay = _C._replay
replay_copy = _C._replay_copy
Record = collections.namedtuple("Record", (*_C.REPLAY_RECORD_FIELDS, "keep"))
"""One replay record, by the field names the stub defines (csrc_stub/replay/replay.cpp); ``keep``
holds the parameters' block alive while the record lives."""
TABLE_SIZE = 4096  # records per op; a full table is emptied (records are remade on use)
# op -> {signature key: record}; add/sub/mul, the comparisons, neg, abs, relu.
TABLES: dict[str, dict[bytes, tuple]] = {
    name: {}
    for name in ("add", "sub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge", "neg", "abs")
}
TABLES["relu"] = {}
# copy_: {signature of (dst, src): record}; clone: memory format -> {signature of src: record}
COPY: dict[bytes, tuple] = {}
NEW_COPY: dict[object, dict[bytes, tuple]] = {}

# What a stub kernel replays (csrc_stub/replay/native_replay.cpp ``Kind``).
ELEMENTWISE, FILL, REDUCE, CLONE, EMPTY_LIKE, TO_COPY = 0, 1, 2, 3, 4, 5

# The overloads the stub replays before Python (csrc_stub/replay/native_replay.cpp): overload ->
# (table, leading operands, an ``alpha`` argument: add's 1, sub's -1 (the loop adds
# ``-alpha``), 0 none; in place, kind). alpha's value is written per call (not keyed). Their
# Python kernels are registered for PrivateUse3, where the stub's kernel sends every call it
# does not replay. A number operand (``x * 0.5``, ``x.mul_(beta)``, ``x.fill_(1.0)``) is part
# of a call's key by its type and position, its value converted per call; a reduction's
# dims, keepdim, dtype= and thread count are part of its key.
NATIVE: dict[str, tuple[str, int, int, bool, int]] = {
    **{
        f"{name}{inplace}.{overload}": (
            name + inplace,
            2,
            {"add": 1, "sub": -1}.get(name, 0),
            bool(inplace),
            ELEMENTWISE,
        )
        for name in ("add", "sub", "mul", "div")
        for inplace in ("", "_")
        for overload in ("Tensor", "Scalar")
    },
    **{
        f"{name}.{overload}": (name, 2, 0, False, ELEMENTWISE)
        for name in ("eq", "ne", "lt", "le", "gt", "ge")
        for overload in ("Tensor", "Scalar")
    },
    **{
        f"{name}{inplace}": (name + inplace, 1, 0, bool(inplace), ELEMENTWISE)
        for name in ("neg", "abs", "relu")
        for inplace in ("", "_")
    },
    # a copy from the value's bytes (``record_fill``); zero_ is fill_ with the int 0
    "fill_.Scalar": ("fill_", 1, 0, True, FILL),
    "zero_": ("fill_", 1, 0, True, FILL),
    # the exact float replicas (``kernels.reduction.CascadeRun``); sum and mean of every dim
    # share their table with the dims overload (Python keys both by dims None)
    "sum.dim_IntList": ("r.sum", 1, 0, False, REDUCE),
    "sum": ("r.sum", 1, 0, False, REDUCE),
    "mean.dim": ("r.mean", 1, 0, False, REDUCE),
    "mean": ("r.mean", 1, 0, False, REDUCE),
    "amax": ("r.amax", 1, 0, False, REDUCE),
    "amin": ("r.amin", 1, 0, False, REDUCE),
    # a same-dtype copy into a new tensor (``record_clone``), its memory format in the key
    "clone": ("clone", 1, 0, False, CLONE),
    # the strides Python's rule gave (``record_empty_like``), its memory format in the key
    "empty_like": ("empty_like", 1, 0, False, EMPTY_LIKE),
    # a copy or a small float cast into a new tensor on self's device (``record_to_copy``),
    # the new dtype and the memory format in the key
    "_to_copy": ("_to_copy", 1, 0, False, TO_COPY),
}

# clone's memory format as the stub keys it: c10::MemoryFormat's value, None as preserve.
_FORMAT_WORD = {
    None: 1,
    torch.contiguous_format: 0,
    torch.preserve_format: 1,
    torch.channels_last: 2,
    torch.channels_last_3d: 3,
}


class Target(NamedTuple):
    """Where a repeat served in Python is recorded: the stub's table ``name`` (one of
    ``NATIVE``'s), ``python`` the table ``_C._replay`` reads (a functional call of tensors
    alone; else None), a Python number operand's dtype (bool, int64, float64 or
    complex128; None without one) and position, and a reduction's ``(dims or None,
    keepdim, dtype or None)``."""

    name: str
    python: dict | None
    number: torch.dtype | None
    position: int
    reduction: tuple | None = None


def reduction_target(
    op: str, dims: tuple[int, ...] | None, keepdim: bool, dtype: torch.dtype | None
) -> Target:
    """The ``Target`` of a functional ``sum``/``mean``/``amax``/``amin`` call (its dims as
    given: None or a tuple)."""
    return Target("r." + op, None, None, 0, (dims, keepdim, dtype))


_NATIVE_TABLES = frozenset(table for table, *_, kind in NATIVE.values() if kind == ELEMENTWISE)
_ALPHA_TABLES = frozenset(table for table, _, alpha, *_ in NATIVE.values() if alpha)
_TARGETS: dict[tuple, Target | None] = {}


def target(
    name: str, inplace: bool, number: type | None = None, position: int = 0
) -> Target | None:
    """The ``Target`` of ``name`` (``add``, ``lt``, ``neg`` ...) functional or in place, with
    a number of Python type ``number`` at ``position``; None when the stub replays no such
    call."""
    cache_key = (name, inplace, number, position)
    found = _TARGETS.get(cache_key, False)
    if found is not False:
        return found
    table = name + "_" if inplace else name
    found = None
    if table in _NATIVE_TABLES:
        python = TABLES.get(table) if number is None else None
        found = Target(table, python, None if number is None else NUMBER_DTYPES[number], position)
    _TARGETS[cache_key] = found
    return found


def _unless_compiling(make: Callable[..., object]) -> Callable[..., object]:
    """``make``, skipped (returning None) while the C entry it needs compiles in the
    background: the call runs through Python, and a later call records it."""

    @functools.wraps(make)
    def maybe(*args: object) -> object:
        with contextlib.suppress(NotCompiled):
            return make(*args)
        return None

    return maybe


@_unless_compiling
def record(where: Target, key: bytes, entry) -> None:
    """Record ``entry`` (an ``elementwise.entries.Entry``) under the signature ``key`` (its
    tensors' ``_C._signature`` key) in the stub's table ``where.name``, and in its Python
    table when it has one; a loop the stub does not replay (parallel, or of nothing) is not
    recorded, nor an entry without one (``prepared`` None: a reduction that is no exact
    replica). The kernel gives its C entry and parameter block (``Prepared.replay_block``):
    nothing here reads a kernel's arguments."""
    block = None if entry.prepared is None else entry.prepared.replay_block()
    if block is None:
        return
    address, params = block
    extents = entry.prepared.extents
    extent0, extent1 = extents[1], extents[2] if len(extents) > 2 else 0
    alpha_word, alpha_dtype = -1, None
    if where.name in _ALPHA_TABLES:  # add/sub: the stub writes each call's alpha there
        alpha_word, alpha_dtype = entry.prepared.replay_value_word(), entry.dtype
    _C._native_replay_put(
        where.name, key, entry.sizes, entry.strides, entry.dtype, entry.device, address,
        params.tobytes(), extent0, extent1, where.number, where.position, entry.constant_dtype,
        getattr(entry.prepared, "unit", 1), where.reduction, alpha_word, alpha_dtype,
    )  # fmt: skip
    if where.python is not None:
        _put(
            where.python,
            key,
            Record(
                sizes=entry.sizes,
                strides=entry.strides,
                dtype=entry.dtype,
                device=entry.device,
                entry=address,
                params=params.ctypes.data,
                extent0=extent0,
                extent1=extent1,
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


def record_clone(
    key: bytes, memory_format: torch.memory_format | None, prepared, layout: tuple
) -> None:
    """Record ``clone(self, memory_format=...)`` for the stub: ``key`` is ``self``'s
    ``_C._signature`` key, ``prepared`` the ``kernels.PreparedCopy`` of the copy into the
    new tensor, ``layout`` that tensor's ``(sizes, strides, dtype, device index)``. A copy
    the stub does not replay (of nothing, or parallel) is not recorded."""
    block = None if prepared is None else prepared.replay_block()
    if block is not None:
        _put_new_tensor("clone", key, block, prepared, layout, memory_format)


@_unless_compiling
def record_to_copy(
    key: bytes, dtype: torch.dtype, memory_format: torch.memory_format | None, prepared,
    layout: tuple,
) -> bool:  # fmt: skip
    """Record ``_to_copy(self, dtype=dtype, memory_format=...)`` onto ``self``'s device for
    the stub: ``key`` is ``self``'s ``_C._signature`` key, ``prepared`` the
    ``kernels.PreparedCopy`` or ``PreparedCast`` of the copy into the new tensor, ``layout``
    that tensor's ``(sizes, strides, dtype, device index)``. The key's last word holds
    ``dtype`` where a number operand's type would (``constant_dtype`` says the same) and the
    format where its position would. A copy the stub does not replay (of nothing, parallel,
    a cast to other than a float type) is not recorded. True once handled (recorded, or
    not to be); None while its C entry compiles."""
    block = None if prepared is None else prepared.new_tensor_block()
    if block is not None:
        _put_new_tensor("_to_copy", key, block, prepared, layout, memory_format, dtype)
    return True


def _put_new_tensor(
    table: str, key: bytes, block: tuple, prepared, layout: tuple,
    memory_format: torch.memory_format | None, dtype: torch.dtype | None = None,
) -> None:  # fmt: skip
    """The stub's record, in ``table``, of a copy (``block``: its C entry and parameters)
    into a new tensor laid out as ``layout``; the format stands where a number operand's
    position would, and ``dtype`` (a ``_to_copy``'s) where its type would."""
    address, params = block
    sizes, strides, new_dtype, index = layout
    _C._native_replay_put(
        table, key, sizes, strides, new_dtype, index, address, params.tobytes(),
        prepared.dst_extent, prepared.src_extent, dtype, _FORMAT_WORD[memory_format], dtype,
        prepared.unit,
    )  # fmt: skip


def record_empty_like(key: bytes, memory_format: torch.memory_format | None, layout: tuple) -> None:
    """Record ``empty_like(self, memory_format=...)`` (its options ``self``'s own) for the stub:
    ``key`` is ``self``'s ``_C._signature`` key, ``layout`` the new tensor's ``(sizes,
    strides, dtype, device index)`` as ``factories.like_strides`` decided them."""
    sizes, strides, dtype, index = layout
    _C._native_replay_put(
        "empty_like", key, sizes, strides, dtype, index, 0, b"", 0, 0, None,
        _FORMAT_WORD[memory_format], None,
    )  # fmt: skip


@_unless_compiling
def record_fill(key: bytes, number: type, prepared, dtype: torch.dtype) -> None:
    """Record ``fill_(self, number)`` for the stub: ``key`` is ``self``'s ``_C._signature``
    key, ``number`` the Python type of the value, ``prepared`` the ``kernels.PreparedCopy``
    of the copy from one element of ``dtype`` (read at stride 0) into ``self``; the stub
    converts each call's value into ``dtype`` with ``Scalar::to``'s overflow check and runs
    that copy. A copy it does not replay (of nothing, or parallel) is not recorded."""
    block = None if prepared is None else prepared.replay_block()
    if block is None:
        return
    address, params = block
    _C._native_replay_put(
        "fill_", key, (), (), None, -1, address, params.tobytes(), prepared.dst_extent, 0,
        NUMBER_DTYPES[number], 1, dtype, prepared.unit,
    )  # fmt: skip


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
