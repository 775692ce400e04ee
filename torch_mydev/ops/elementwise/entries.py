"""Decides what a repeated elementwise call signature reuses: one cached ``Entry`` per layout.

add/sub/mul/div (functional and in-place), the functional comparisons, neg and abs look
their call signature up here first (``fast_binary``, ``fast_unary``): a hit allocates the
output and calls the prepared loop, with no planning. A first call runs the general path
(``elementwise.general``) and then makes the entry, or marks the signature ``GENERAL`` when
the general path must run every time (a cast temporary, a CPU scalar, ...).
"""

from __future__ import annotations

import torch

from torch_mydev import _C
from torch_mydev.kernels.elementwise import kernel as kernels
from torch_mydev.ops import replay
from torch_mydev.ops.elementwise import general
from torch_mydev.ops.elementwise.checks import Arg
from torch_mydev.ops.elementwise.plan import kernel_op, make_plan, opmath_scalar
from torch_mydev.ops.per_call import GENERAL, Entry, serve, serve_one
from torch_mydev_rules.iterator.cache import LRUCache
from torch_mydev_rules.iterator.families import iterator_config
from torch_mydev_rules.iterator.numbers import NUMBER_DTYPES, Number, number_key

_FAST_DTYPES = frozenset(kernels.SUPPORTED_DTYPES)


# The inputs each loop kind reads (``per_call.Entry.inputs``); binary and compare read two.
_INPUTS = {"unary": 1, "where": 3}


def entry_of(
    prepared: kernels.Prepared,
    sizes: tuple[int, ...],
    strides: tuple[int, ...],
    dtype: torch.dtype,
    device: int,
    number: Number | None = None,
    constant_dtype: torch.dtype | None = None,
) -> Entry:
    """The ``per_call.Entry`` of a prepared elementwise loop (``kernels.prepare_binary``,
    ``prepare_compare``, ``prepare_unary`` or ``prepare_where``): kept per (op, rounding
    mode, the tensors' ``_C._signature`` key, the Python number operand, alpha, in-place or
    not, default dtype) for calls the general path finishes with no cast temporary and no
    resize, all tensors on mydev. A Python ``number`` operand is read by the loop as one
    element of ``constant_dtype``, its bytes converted once per value (no plan depends on a
    number's value, only on its type)."""
    constant = None if constant_dtype is None else kernels.scalar_bytes(number, constant_dtype)
    return Entry(
        prepared.kernel,
        prepared.args,
        prepared.extents,
        _INPUTS.get(prepared.kind, 2),
        sizes,
        strides,
        dtype,
        device,
        prepared=prepared,
        constant=constant,
        constant_dtype=constant_dtype,
    )


# (op, rounding mode, signature key, number key, alpha key, in-place, default dtype) -> entry,
# or GENERAL. Unary ops key by (op, signature key, in-place).
ENTRY_CACHE_SIZE = 4096
BINARY_CACHE_SIZE = ENTRY_CACHE_SIZE  # the former name
_entries: LRUCache[tuple, Entry | object] = LRUCache(ENTRY_CACHE_SIZE)
# The same entries of calls with a Python number, keyed by the number's type instead of its
# value: a value not seen before reuses the entry with its own conversion (into
# ``Entry.constant_dtype``) and adds nothing to ``_entries``.
_by_number_type: LRUCache[tuple, Entry | object] = LRUCache(ENTRY_CACHE_SIZE)
# _C._signature(t0[, t1]) returns None (not a strided host tensor with storage) or
# (key, lazy_bits, then per tensor: data address, storage address, storage bytes); the
# per-call paths unpack it into those names (cheaper than building a named tuple per call).
_signature = _C._signature
_empty_strided = _C._empty_strided


MEMORY = _entries
"""The elementwise families' per-signature memory (``per_call.serve``'s ``memory``)."""


def clear() -> None:
    """Forget every per-signature decision: the entries, their by-number-type index and the
    stub's records of them (the next call of any signature plans again)."""
    _entries.clear()
    _by_number_type.clear()
    replay.clear()


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
    signature marked ``GENERAL``, or per-call facts an entry cannot check (in place, an
    input sharing ``self``'s storage other than ``self`` itself, which each element reads
    before it writes it; a storage too small for the layout). A first call is answered by
    the general path here, and its entry made. One operand may be a Python number: the
    second (``x * 2.5``), or the first of a functional call (``1.0 - x`` reaches ``sub`` as
    ``rsub``); its bytes, converted once per value, are what the loop reads there.
    """
    if isinstance(self, torch.Tensor) and isinstance(other, torch.Tensor):
        number = None
        signature = _signature(self, other)
        if signature is None:
            return None
        key, lazy_bits, a_start, a_base, a_nbytes, b_start, b_base, b_nbytes = signature
        if inplace and b_base == a_base and other is not self:
            return None  # a view of self's storage: Copy.cpp's overlap rules, per call
        a_room, b_room = a_base + a_nbytes - a_start, b_base + b_nbytes - b_start
    else:
        if isinstance(self, torch.Tensor):
            tensor, number, number_first = self, other, False
        elif isinstance(other, torch.Tensor) and not inplace:
            tensor, number, number_first = other, self, True
        else:
            return None
        if type(number) not in NUMBER_DTYPES:
            return None
        signature = _signature(tensor)
        if signature is None:
            return None
        key, lazy_bits, start, base, nbytes = signature
        if number_first:  # the number's bytes are the loop's a, read at stride 0
            a_start, a_room, b_start, b_room = 0, _NO_STORAGE, start, base + nbytes - start
        else:
            a_start, a_room, b_start, b_room = start, base + nbytes - start, 0, None
    if lazy_bits:
        return None
    alpha_kind = type(alpha)
    if alpha_kind is int:  # the common case keys by the value itself (never equal to a tuple)
        alpha_key = alpha
    elif alpha_kind in NUMBER_DTYPES:
        alpha_key = number_key(alpha)
    else:
        return None
    record_in = None
    if mode is None and alpha_kind in (int, float):  # the stub writes alpha per call
        record_in = (
            replay.target(name, inplace)
            if number is None
            else replay.target(name, inplace, type(number), int(not number_first))
        )
        if record_in is not None and not (alpha_kind is int and alpha == 1):
            record_in = record_in._replace(python=None)  # _C._replay's tables: alpha 1 only
    if number is None:
        cache_key = (name, mode, key, None, alpha_key, inplace, None if name != "div" else
                     torch.get_default_dtype())  # fmt: skip
        entry = _entries.peek(cache_key)
    else:
        default = torch.get_default_dtype()
        cache_key = (name, mode, key, number_key(number), alpha_key, inplace, default, number_first)
        entry = _entries.peek(cache_key)
        constant = None
        if entry is None:
            # a number seen for the first time: the signature's entry for any number of its
            # type runs it with the value converted now (AdamW's bias corrections change
            # every step); it is not remembered under this value
            entry = _by_number_type.peek(_type_key(cache_key, number))
            if entry is not None and entry is not GENERAL:
                constant = kernels.scalar_bytes(number, entry.constant_dtype)
        if entry is not None and entry is not GENERAL:
            address = entry.constant_address if constant is None else constant.ctypes.data
            if number_first:
                a_start = address
            else:
                b_start = address
    target = self if inplace else None
    call = (cache_key, name, mode, self, other, alpha, inplace)
    return serve(
        _entries, cache_key, entry, _first_binary, call, target, record_in, key,
        a_start, a_room, b_start, b_room,
    )  # fmt: skip


# The room a number's bytes give the loop: it reads one element there, at stride 0.
_NO_STORAGE = 1 << 62


def _type_key(cache_key: tuple, number: Number) -> tuple:
    """``cache_key`` with the number's type where its value was (``_by_number_type``)."""
    return (*cache_key[:3], type(number), *cache_key[4:])


def _first_binary(cache_key: tuple, *call: object) -> tuple[torch.Tensor, Entry | object]:
    """Answer a call signature's first call with the general path, then make its entry;
    ``call`` is ``_binary_entry``'s arguments."""
    name, mode, self, other, alpha, inplace = call
    target = self if inplace else None
    if name in kernels.COMPARISONS:
        result = general.general_compare(name, self, other, out=target, inplace=inplace)
    else:
        result = general.general_arithmetic(
            name, self, other, alpha=alpha, rounding_mode=mode, out=target, inplace=inplace
        )
    entry = _binary_entry(*call)
    if cache_key[3] is not None:  # a number operand: its type's entry too
        number = other if isinstance(self, torch.Tensor) else self
        _by_number_type.put(_type_key(cache_key, number), entry)
    return result, entry


def _binary_entry(
    name: str,
    mode: str | None,
    self: torch.Tensor,
    other: Arg,
    alpha: Number,
    inplace: bool,
) -> Entry | object:
    """The entry of a call the general path has just answered, or ``GENERAL``."""
    if not isinstance(self, torch.Tensor):
        return _number_first_entry(name, mode, self, other, alpha)
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
    number = None if isinstance(other, torch.Tensor) else other
    if compare:
        prepared = kernels.prepare_compare(
            name, common, plan.coalesced_shape, plan.coalesced_stride_bytes
        )
        constant_dtype = None if number is None else common
        return entry_of(
            prepared, plan.shape, plan.output_strides[0], torch.bool, device, number, constant_dtype
        )
    op = kernel_op(name, mode)
    scalar_other = opmath_scalar(op, plan, other)
    if scalar_other is not None and isinstance(other, torch.Tensor):
        return GENERAL  # torch reads the tensor's value per call
    constant_dtype = None
    if scalar_other is not None:  # the number's float32 bytes: opmath_scalar's value
        constant_dtype = torch.float32
    elif number is not None:
        constant_dtype = common
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
    return entry_of(prepared, plan.shape, strides, out_dtype, device, number, constant_dtype)


def _number_first_entry(
    name: str, mode: str | None, number: Number, other: torch.Tensor, alpha: Number
) -> Entry | object:
    """The entry of ``number op other`` (``rsub``'s ``sub(number, x)``): the number's bytes
    in the common dtype are the loop's ``a``, read at stride 0. ``GENERAL`` for a
    comparison, a CPU tensor, a cast, or float16/bfloat16 (whose CPU loop treats only a
    second operand's number apart, ``opmath_scalar``)."""
    if other.device.type == "cpu" or name in kernels.COMPARISONS:
        return GENERAL
    config = iterator_config(name, rounding_mode=mode, default_dtype=torch.get_default_dtype())
    plan, _ = make_plan(None, [number, other], config)
    common = plan.common_dtype
    if plan.temporaries[0] or plan.temporaries[2] or common not in _FAST_DTYPES:
        return GENERAL
    if common in (torch.float16, torch.bfloat16):
        return GENERAL
    prepared = kernels.prepare_binary(
        kernel_op(name, mode),
        common,
        plan.coalesced_shape,
        plan.coalesced_stride_bytes,
        alpha=-alpha if name == "sub" else alpha,
    )
    return entry_of(
        prepared,
        plan.shape,
        plan.output_strides[0],
        plan.output_dtypes[0],
        other.get_device(),
        number,
        common,
    )


def fast_unary(name: str, self: torch.Tensor, inplace: bool) -> torch.Tensor | None:
    """neg and abs (functional or in-place) through a cached ``Entry`` (``serve_one``).
    None where the general path must run, as for ``fast_binary``; complex ``abs`` (a real
    result) always takes it."""
    target = self if inplace else None
    record_in = replay.target(name, inplace)
    return serve_one(
        _entries, (name, inplace), self, _first_unary, (name, self, inplace), target, record_in
    )


def _first_unary(
    name: str, self: torch.Tensor, inplace: bool
) -> tuple[torch.Tensor, Entry | object]:
    """Answer a unary signature's first call with the general path, then make its entry."""
    result = general.general_unary(name, self, out=self if inplace else None, inplace=inplace)
    return result, _unary_entry(name, self, inplace)


def _unary_entry(name: str, self: torch.Tensor, inplace: bool) -> Entry | object:
    """The entry of a unary call the general path has just answered, or ``GENERAL`` (a
    complex ``abs``, whose result is real, too)."""
    if self.device.type == "cpu" or self.dtype not in _FAST_DTYPES:
        return GENERAL
    if self.is_complex() and name == "abs":
        return GENERAL
    config = iterator_config(name)
    plan, _ = make_plan(self if inplace else None, [self], config, inplace=inplace)
    if any(plan.temporaries):
        return GENERAL
    device = self.get_device()
    prepared = kernels.prepare_unary(
        name, self.dtype, plan.coalesced_shape, plan.coalesced_stride_bytes
    )
    return entry_of(prepared, plan.shape, plan.output_strides[0], self.dtype, device)


def fast_where(condition: Arg, self: Arg, other: Arg) -> torch.Tensor | None:
    """The functional ``where`` of three tensors through a cached ``Entry`` (``serve``, the
    condition its ``a``, ``self`` its ``b``, ``other`` its ``c``); None where the general
    path must run (numbers, a signature marked ``GENERAL``, a storage too small)."""
    if not (
        isinstance(condition, torch.Tensor)
        and isinstance(self, torch.Tensor)
        and isinstance(other, torch.Tensor)
    ):
        return None
    signature = _signature(condition, self, other)
    if signature is None:
        return None
    (
        key,
        lazy_bits,
        c_start,
        c_base,
        c_nbytes,
        a_start,
        a_base,
        a_nbytes,
        b_start,
        b_base,
        b_nbytes,
    ) = signature
    if lazy_bits:
        return None
    cache_key = ("where", key)
    call = (condition, self, other)
    return serve(
        _entries, cache_key, _entries.peek(cache_key), _first_where, call, None, None, key,
        c_start, c_base + c_nbytes - c_start, a_start, a_base + a_nbytes - a_start,
        b_start, b_base + b_nbytes - b_start,
    )  # fmt: skip


def _first_where(
    condition: torch.Tensor, self: torch.Tensor, other: torch.Tensor
) -> tuple[torch.Tensor, Entry | object]:
    """A ``where`` signature's first call: the general path, then the entry of its plan
    when every operand is a mydev tensor of the result's dtype (the condition bool) and
    the plan is serial; else ``GENERAL`` (a conversion or a CPU scalar each call)."""
    from torch_mydev.ops.elementwise.aten import general_where

    result = general_where(condition, self, other, None)
    tensors = (condition, self, other)
    if any(t.device.type == "cpu" for t in tensors):
        return result, GENERAL
    if condition.dtype != torch.bool or not (self.dtype == other.dtype == result.dtype):
        return result, GENERAL
    plan, _ = make_plan(None, list(tensors), iterator_config("where"), dtype=result.dtype)
    if any(plan.temporaries):
        return result, GENERAL
    prepared = kernels.prepare_where(
        result.dtype, plan.coalesced_shape, plan.coalesced_stride_bytes
    )
    if prepared is None:
        return result, GENERAL
    entry = entry_of(
        prepared, plan.shape, plan.output_strides[0], result.dtype, result.get_device()
    )
    return result, entry
