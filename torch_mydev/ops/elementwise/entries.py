"""Decides what a repeated elementwise call signature reuses: one cached ``Entry`` per layout.

add/sub/mul/div (functional and in-place), the functional comparisons, neg and abs look
their call signature up here first (``fast_binary``, ``fast_unary``): a hit allocates the
output and calls the prepared loop, with no planning. A first call runs the general path
(``elementwise.general``) and then makes the entry, or marks the signature ``GENERAL`` when
the general path must run every time (a cast temporary, a CPU scalar, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import torch

from torch_mydev import _C
from torch_mydev.kernels.elementwise import kernel as kernels
from torch_mydev.ops import replay
from torch_mydev.ops.elementwise import general
from torch_mydev.ops.elementwise.checks import Arg
from torch_mydev.ops.elementwise.plan import kernel_op, make_plan, opmath_scalar
from torch_mydev_rules.iterator.cache import LRUCache
from torch_mydev_rules.iterator.families import iterator_config
from torch_mydev_rules.iterator.numbers import NUMBER_DTYPES, Number, number_key

_FAST_DTYPES = frozenset(kernels.SUPPORTED_DTYPES)


class Entry:
    """What the general path (``elementwise.general``) decides from layouts and numbers alone,
    for one call signature of a binary, comparison, unary or relu-family op.

    Kept per (op, rounding mode, the tensors' ``_C._signature`` key, the Python number
    operand, alpha, in-place or not, default dtype) for calls the general path would finish
    with no cast temporary and no resize: all tensors on mydev, ``other`` a mydev tensor or a
    Python number. ``prepared`` is the prepared loop (``kernels.prepare_binary``,
    ``prepare_compare`` or ``prepare_unary``; ``kernel`` / ``args`` / ``extents`` are its
    fields, read on every call); ``binary`` whether its loop reads a ``b`` address.
    ``constant`` holds a Python number's converted bytes (the kernel reads its address),
    ``sizes`` / ``strides`` / ``dtype`` / ``device`` (an index: the signature key holds the
    device) the functional form's new output. ``convert`` turns another Python number of
    the same type into the bytes the kernel reads in place of ``constant`` (the conversion
    made ``constant``; no plan depends on a number's value, only on its type).
    """

    __slots__ = (
        "args",
        "binary",
        "constant",
        "constant_address",
        "convert",
        "device",
        "dtype",
        "extents",
        "kernel",
        "prepared",
        "sizes",
        "strides",
    )

    def __init__(
        self,
        prepared: kernels.Prepared,
        constant: np.ndarray | None,
        sizes: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: torch.dtype,
        device: int,
        convert: Callable[[Number], np.ndarray] | None = None,
    ) -> None:
        self.prepared = prepared
        self.kernel = prepared.kernel
        self.binary = prepared.kind != "unary"
        self.convert = convert
        self.args = prepared.args
        self.extents = prepared.extents
        self.constant = constant
        self.constant_address = 0 if constant is None else constant.ctypes.data
        self.sizes = sizes
        self.strides = strides
        self.dtype = dtype
        self.device = device


class _General:
    """The type of ``GENERAL``: a call signature the general path must take every time."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "GENERAL"


GENERAL = _General()

# (op, rounding mode, signature key, number key, alpha key, in-place, default dtype) -> entry,
# or GENERAL. Unary ops key by (op, signature key, in-place).
ENTRY_CACHE_SIZE = 4096
BINARY_CACHE_SIZE = ENTRY_CACHE_SIZE  # the former name
_entries: LRUCache[tuple, Entry | _General] = LRUCache(ENTRY_CACHE_SIZE)
# The same entries of calls with a Python number, keyed by the number's type instead of its
# value: a value not seen before reuses the entry with its own conversion (``Entry.convert``)
# and adds nothing to ``_entries``.
_by_number_type: LRUCache[tuple, Entry | _General] = LRUCache(ENTRY_CACHE_SIZE)
# _C._signature(t0[, t1]) returns None (not a strided host tensor with storage) or
# (key, lazy_bits, then per tensor: data address, storage address, storage bytes); the
# per-call paths unpack it into those names (cheaper than building a named tuple per call).
_signature = _C._signature
_empty_strided = _C._empty_strided


lookup = _entries.peek
"""The entry (or ``GENERAL``) remembered under a cache key, or None."""


def clear() -> None:
    """Forget every per-signature decision: the entries, their by-number-type index and the
    stub's records of them (the next call of any signature plans again)."""
    _entries.clear()
    _by_number_type.clear()
    replay.clear()


def serve(
    cache_key: tuple,
    entry: Entry | _General | None,
    first: Callable[..., tuple[torch.Tensor, Entry | _General]],
    call: tuple,
    target: torch.Tensor | None,
    record_in: dict | None,
    key: bytes,
    a_start: int,
    a_room: int,
    b_start: int,
    b_room: int | None,
) -> torch.Tensor | None:
    """One call of a signature through its entry: the per-call protocol of every native
    elementwise op (arithmetic, comparisons, neg/abs, the relu family), step by step.

    1. First call (``entry`` None): ``first(*call)`` runs the general path and returns its
       result with what it decided (an ``Entry`` or ``GENERAL``), remembered under
       ``cache_key``.
    2. ``GENERAL``: None, and the caller runs the general path.
    3. The storages: ``a_room`` (``b_room``) is how many bytes ``a``'s (``b``'s) storage
       holds from its element 0 at ``a_start`` (``b_start``), and must cover the entry's
       extent; else None, and the general path raises. ``b_room`` None: ``b`` is no
       tensor's (a number's bytes the entry holds, or ``a`` read twice).
    4. The record: ``record_in`` is the stub's replay table when the call is one it may
       replay (functional, every operand a tensor, ``alpha`` 1); the signature's repeat is
       recorded there, and the stub runs the calls after it (``ops/replay.py``).
    5. The output, ``target`` (in place) or a new tensor of the entry's layout, and the
       loop; an integer division by zero raises as CPU's does.
    """
    if entry is None:
        result, entry = first(*call)
        _entries.put(cache_key, entry)
        return result
    if entry is GENERAL:
        return None
    extents = entry.extents
    if a_room < extents[1] or (b_room is not None and b_room < extents[2]):
        return None
    if record_in is not None and key not in record_in:
        replay.record(record_in, key, entry)
    if target is None:
        out = _empty_strided(entry.sizes, entry.strides, entry.dtype, entry.device)
        out_start = out.data_ptr()
    else:
        out, out_start = target, a_start
    if entry.binary:
        if entry.kernel(out_start, a_start, b_start, *entry.args):
            raise RuntimeError("ZeroDivisionError")
    else:
        entry.kernel(out_start, a_start, *entry.args)
    return out


def fast_binary(
    name: str,
    mode: str | None,
    self: Arg,
    other: Arg,
    alpha: Number,
    inplace: bool,
) -> torch.Tensor | None:
    """add/sub/mul/div (functional or in-place) and the functional comparisons through a
    cached ``Entry`` (``serve``).

    Returns None where the general path must run: arguments it alone handles, a call
    signature marked ``GENERAL``, or per-call facts an entry cannot check (an input sharing
    ``self``'s storage in place, a storage too small for the layout). A first call is
    answered by the general path here, and its entry made.
    """
    if not isinstance(self, torch.Tensor):
        return None
    if isinstance(other, torch.Tensor):
        number = None
        signature = _signature(self, other)
        if signature is None:
            return None
        key, lazy_bits, a_start, a_base, a_nbytes, b_start, b_base, b_nbytes = signature
        if inplace and b_base == a_base:
            return None
        b_room = b_base + b_nbytes - b_start
    else:
        if type(other) not in NUMBER_DTYPES:
            return None
        number = number_key(other)
        signature = _signature(self)
        if signature is None:
            return None
        key, lazy_bits, a_start, a_base, a_nbytes = signature
        b_room = None
    if lazy_bits:
        return None
    alpha_kind = type(alpha)
    if alpha_kind is int:  # the common case keys by the value itself (never equal to a tuple)
        alpha_key = alpha
    elif alpha_kind in NUMBER_DTYPES:
        alpha_key = number_key(alpha)
    else:
        return None
    default = torch.get_default_dtype() if number is not None or name == "div" else None
    cache_key = (name, mode, key, number, alpha_key, inplace, default)
    entry = _entries.peek(cache_key)
    constant = None
    if number is not None:
        if entry is None:
            # a number seen for the first time: the signature's entry for any number of its
            # type runs it with the value converted now (AdamW's bias corrections change
            # every step); it is not remembered under this value
            entry = _by_number_type.peek(_type_key(cache_key, other))
            if entry is not None and entry is not GENERAL:
                constant = entry.convert(other)
        b_start = 0
        if entry is not None and entry is not GENERAL:
            b_start = entry.constant_address if constant is None else constant.ctypes.data
    record_in = None
    if number is None and not inplace and mode is None and alpha_kind is int and alpha == 1:
        record_in = replay.TABLES.get(name)
    target = self if inplace else None
    call = (cache_key, name, mode, self, other, alpha, inplace)
    return serve(
        cache_key, entry, _first_binary, call, target, record_in, key,
        a_start, a_base + a_nbytes - a_start, b_start, b_room,
    )  # fmt: skip


def _type_key(cache_key: tuple, number: Number) -> tuple:
    """``cache_key`` with the number's type where its value was (``_by_number_type``)."""
    return (*cache_key[:3], type(number), *cache_key[4:])


def _first_binary(
    cache_key: tuple,
    name: str,
    mode: str | None,
    self: torch.Tensor,
    other: Arg,
    alpha: Number,
    inplace: bool,
) -> tuple[torch.Tensor, Entry | _General]:
    """Answer a call signature's first call with the general path, then make its entry."""
    target = self if inplace else None
    if name in kernels.COMPARISONS:
        result = general.general_compare(name, self, other, out=target, inplace=inplace)
    else:
        result = general.general_arithmetic(
            name, self, other, alpha=alpha, rounding_mode=mode, out=target, inplace=inplace
        )
    entry = _binary_entry(name, mode, self, other, alpha, inplace)
    if not isinstance(other, torch.Tensor):
        _by_number_type.put(_type_key(cache_key, other), entry)
    return result, entry


def _binary_entry(
    name: str,
    mode: str | None,
    self: torch.Tensor,
    other: Arg,
    alpha: Number,
    inplace: bool,
) -> Entry | _General:
    """The entry of a call the general path has just answered, or ``GENERAL``."""
    tensors = [self, other] if isinstance(other, torch.Tensor) else [self]
    if any(t.device.type == "cpu" for t in tensors):
        return GENERAL  # a CPU scalar beside mydev tensors: moved per call
    device = self.get_device()
    compare = name in kernels.COMPARISONS
    if compare and inplace:
        return GENERAL  # the bool result is cast into self through a temporary
    config = iterator_config(name, rounding_mode=mode, default_dtype=torch.get_default_dtype())
    plan, _ = make_plan(self if inplace else None, [self, other], config, inplace=inplace)
    common = plan.common_dtype
    # A number is converted into the entry once; a tensor of another dtype needs a
    # temporary per call, and so does an output of another dtype.
    casts = (
        plan.temporaries[0]
        or plan.temporaries[1]
        or (plan.temporaries[2] and isinstance(other, torch.Tensor))
    )
    if casts or common not in _FAST_DTYPES:
        return GENERAL
    number = not isinstance(other, torch.Tensor)
    if compare:
        constant = kernels.scalar_bytes(other, common) if number else None
        prepared = kernels.prepare_compare(
            name, common, plan.coalesced_shape, plan.coalesced_stride_bytes
        )
        convert = partial(kernels.scalar_bytes, dtype=common) if number else None
        return Entry(
            prepared, constant, plan.shape, plan.output_strides[0], torch.bool, device, convert
        )
    op = kernel_op(name, mode)
    scalar_other = opmath_scalar(op, plan, other)
    if scalar_other is not None and isinstance(other, torch.Tensor):
        return GENERAL  # torch reads the tensor's value per call
    constant = convert = None
    if scalar_other is not None:  # float32 bytes of the number: opmath_scalar's value
        constant = np.array([scalar_other], dtype=np.float32)
        convert = partial(kernels.scalar_bytes, dtype=torch.float32)
    elif number:
        constant = kernels.scalar_bytes(other, common)
        convert = partial(kernels.scalar_bytes, dtype=common)
    prepared = kernels.prepare_binary(
        op,
        common,
        plan.coalesced_shape,
        plan.coalesced_stride_bytes,
        alpha=-alpha if name == "sub" else alpha,
        scalar_other=scalar_other is not None,
    )
    out_dtype = plan.output_dtypes[0]
    strides = plan.output_strides[0]
    return Entry(prepared, constant, plan.shape, strides, out_dtype, device, convert)


def fast_unary(name: str, self: torch.Tensor, inplace: bool) -> torch.Tensor | None:
    """neg and abs (functional or in-place) through a cached ``Entry`` (``serve``, no
    ``b``). None where the general path must run, as for ``fast_binary``; complex ``abs``
    (a real result) always takes it."""
    signature = _signature(self)
    if signature is None:
        return None
    key, lazy_bits, a_start, a_base, a_nbytes = signature
    if lazy_bits:
        return None
    cache_key = (name, key, inplace)
    entry = _entries.peek(cache_key)
    if entry is None and self.is_complex() and name == "abs":
        return None
    target = self if inplace else None
    record_in = None if inplace else replay.TABLES[name]
    call = (name, self, inplace)
    return serve(
        cache_key, entry, _first_unary, call, target, record_in, key,
        a_start, a_base + a_nbytes - a_start, 0, None,
    )  # fmt: skip


def _first_unary(
    name: str, self: torch.Tensor, inplace: bool
) -> tuple[torch.Tensor, Entry | _General]:
    """Answer a unary signature's first call with the general path, then make its entry."""
    result = general.general_unary(name, self, out=self if inplace else None, inplace=inplace)
    return result, _unary_entry(name, self, inplace)


def _unary_entry(name: str, self: torch.Tensor, inplace: bool) -> Entry | _General:
    """The entry of a unary call the general path has just answered, or ``GENERAL``."""
    if self.device.type == "cpu" or self.dtype not in _FAST_DTYPES:
        return GENERAL
    config = iterator_config(name)
    plan, _ = make_plan(self if inplace else None, [self], config, inplace=inplace)
    if any(plan.temporaries):
        return GENERAL
    device = self.get_device()
    prepared = kernels.prepare_unary(
        name, self.dtype, plan.coalesced_shape, plan.coalesced_stride_bytes
    )
    return Entry(prepared, None, plan.shape, plan.output_strides[0], self.dtype, device)
