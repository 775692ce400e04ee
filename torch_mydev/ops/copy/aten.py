"""``copy_`` on mydev (and between mydev and CPU): Copy.cpp's checks, our plan, a numba kernel.

The order of decisions is ``copy_impl``'s (aten/src/ATen/native/Copy.cpp): same tensor and
same-data early exits, internal overlap of the destination, partial overlap between the two,
then a TensorIterator plan (``torch_mydev_rules.iterator``) whose coalesced shape and byte strides
drive ``torch_mydev.kernels.copy.kernel``.

Everything decided from sizes, strides and dtypes alone -- the internal-overlap check, the
plan, the kernel's set-up (``kernels.copy.prepare_copy``) -- is made once per layout pair
and kept in a ``CopyEntry`` (an LRU cache wrapped around the rules); a call then does O(1)
Python work: the checks that depend on the tensors themselves, and the kernel.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from torch_mydev import _C
from torch_mydev._names import DEVICE
from torch_mydev.kernels.copy import kernel as kernels
from torch_mydev.kernels.dtypes import COPY_DTYPES, STORAGE_DTYPES, SUPPORTED_DTYPES
from torch_mydev.ops import replay
from torch_mydev.ops.buffers import byte_offset, storage_bytes, storage_span, writable
from torch_mydev_rules import layout
from torch_mydev_rules.iterator.cache import LRUCache, cached_build
from torch_mydev_rules.iterator.operands import OperandSpec, copy_config
from torch_mydev_rules.iterator.plan import Plan
from torch_mydev_rules.iterator.promotion import dtype_name

_INTERNAL_OVERLAP = (
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation."
)
_PARTIAL_OVERLAP = (
    "unsupported operation: some elements of the input tensor and the written-to tensor refer "
    "to a single memory location. Please clone() the tensor before performing the operation."
)
_COMPLEX_TO_REAL = "Casting complex values to real discards the imaginary part"
_HOST_DEVICES = ("cpu", DEVICE)
# The same devices as torch.device objects, every mydev ordinal (PrivateUse1 is mydev under
# any name): the common case of _check_copy_args is one set lookup per tensor.
_HOST = frozenset(
    (torch.device("cpu"), *(torch.device("privateuseone", i) for i in range(_C._device_count())))
)
# Dtypes copy_ casts between (CPU's copy_kernel), and those it only moves to their own dtype.
_CASTABLE = frozenset(COPY_DTYPES)
_MOVABLE = frozenset(STORAGE_DTYPES)
# Dtypes CPU's neg_kernel negates (a negative bit to resolve): not bool, unsigned or float8.
_NEGATABLE = frozenset(SUPPORTED_DTYPES) - {torch.bool} | {torch.complex32}


def _cpu_conjugates(dtype: torch.dtype) -> bool:
    """Whether CPU's conj kernel has a loop for complex ``dtype``, read from CPU once: torch
    2.14's bcomplex32 has none ("conj_cpu" not implemented for 'BComplex32')."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex32/bcomplex32 are "experimental"
        try:
            torch.zeros(1, dtype=dtype).conj().resolve_conj()
        except NotImplementedError:
            return False
    return True


# Dtypes CPU's conj kernel conjugates (a conjugate bit to resolve into them).
_CONJUGATABLE = frozenset(d for d in COPY_DTYPES if d.is_complex and _cpu_conjugates(d))
_COPY_CONFIG = copy_config()
_signature = _C._signature
_CONJ_NEG = _C.FLAG_CONJ | _C.FLAG_NEG
# Layout pairs remembered by copy_entry (each entry: a plan and a prepared kernel).
COPY_CACHE_SIZE = 4096
_entries: LRUCache[tuple, CopyEntry] = LRUCache(COPY_CACHE_SIZE)
# The same entries by the two tensors' ``_C._signature`` (copy_'s per-call lookup).
_by_signature: LRUCache[bytes, CopyEntry] = LRUCache(COPY_CACHE_SIZE)


_RECORDS = replay.COPY
_replay_copy = replay.replay_copy


def copy_(self: torch.Tensor, src: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """aten::copy_ for PrivateUse1: write ``src`` (broadcast, cast) into ``self``.

    ``non_blocking`` is accepted and has no effect: kernels run synchronously. Everything
    decided from sizes, strides and dtypes alone is looked up in a cache (``CopyEntry``),
    keyed by the two tensors' layout signature (``_C._signature``, one stub call that also
    reads the addresses); what is left per call is O(1) Python work on the two storages.
    """
    result = _replay_copy(_RECORDS, self, src)  # a recorded layout pair, in one stub call
    if result is not None:
        return result
    if self is src:
        return self
    if not isinstance(src, torch.Tensor):  # t.copy_(nan): torch wrapped a Python number
        src = wrapped_number(src)
    facts = _signature(self, src)
    if facts is None:  # not two strided host tensors with storage
        _check_copy_args(self, src)
        raise RuntimeError("mydev copy_: both tensors need a storage in host memory")
    key, lazy_bits, dst_start, dst_base, dst_nbytes, src_start, src_base, src_nbytes = facts
    if lazy_bits & _CONJ_NEG:  # a conjugate or negative bit on either side
        return _copy_lazy_bits(self, src)
    if lazy_bits:  # a copy-on-write storage on either side
        return _copy_cow(self, src)
    entry = _by_signature.peek(key)
    repeat = entry is not None
    if entry is None:
        _check_copy_args(self, src)
        entry = copy_entry(self, src)  # raises for a destination that overlaps itself
        _by_signature.put(key, entry)
    if dst_base == src_base:
        # One storage (or two empty ones): Copy.cpp's same-data and overlap rules apply.
        return _copy_shared(self, src, entry)
    # Different storages never overlap: no same-data exit, no partial overlap, no aliasing.
    if repeat and not entry.complex_to_real and key not in _RECORDS:
        replay.record_copy(_RECORDS, key, entry.prepared)  # the stub replays the third call
    entry.run(
        self,
        dst_start,
        dst_base + dst_nbytes - dst_start,
        src,
        src_start,
        src_base + src_nbytes - src_start,
        stacklevel=3,
    )
    return self


# The dtype of ATen's ``scalar_to_tensor`` (ScalarOps.h) for each Python number type.
_NUMBER_DTYPES = {
    bool: torch.bool,
    int: torch.int64,
    float: torch.float64,
    complex: torch.complex128,
}


def wrapped_number(value: bool | int | float | complex) -> torch.Tensor:
    """The 0-dim CPU tensor torch makes of a Python number passed as a Tensor argument.

    ``t.copy_(float("nan"))`` reaches a Python kernel with the number itself: torch's
    argument parser wraps it (``scalar_to_tensor``: bool, int64, double or complex double;
    a wrapped number), and the dispatcher hands a wrapped number to Python as the number
    it holds. CPU copies from that tensor, so the casts (NaN's bits included) are CPU's.
    """
    dtype = _NUMBER_DTYPES.get(type(value))
    if dtype is None:
        raise TypeError(
            f"copy_(): argument 'src' must be a Tensor or a Python number, not "
            f"{type(value).__name__}"
        )
    return torch.tensor(value, dtype=dtype, device="cpu")


def copy_into_new(
    dst: torch.Tensor, src: torch.Tensor, entry: CopyEntry | None = None
) -> torch.Tensor:
    """``dst.copy_(src)`` for a ``dst`` just allocated for this copy (clone, ``_to_copy``).

    A new tensor is non-overlapping and dense and shares no memory with ``src``, so Copy.cpp's
    overlap checks cannot fire; the caller made it on a host device. What is left of copy_'s
    checks is done here, and any failure goes to copy_, which raises its own error.
    ``entry`` is ``copy_entry(dst, src)`` when the caller has it already.
    """
    if (
        src.layout != torch.strided
        or not copyable(dst.dtype, src.dtype)
        or src.is_conj()
        or src.is_neg()
    ):
        return copy_(dst, src)
    if entry is None:
        entry = copy_entry(dst, src)
    entry.run(dst, *_span(dst), src, *_span(src), stacklevel=3)
    return dst


@dataclass(frozen=True)
class CopyEntry:
    """What ``copy_`` decides from sizes, strides and dtypes alone, kept per layout pair.

    ``plan`` is the TensorIterator plan and ``numel`` its element count; ``complex_to_real``
    whether copy_ warns about a dropped imaginary part; ``prepared`` the same-dtype kernel
    set-up, or a small contiguous cast's (``PreparedCast``; None for any other cast, which
    runs ``copy_strided``). There is no entry for a
    destination that writes one location twice: making it raises, on every call.
    """

    plan: Plan
    numel: int
    complex_to_real: bool
    prepared: kernels.PreparedCopy | kernels.PreparedCast | None

    def run(
        self,
        dst: torch.Tensor,
        dst_start: int,
        dst_bytes: int,
        src: torch.Tensor,
        src_start: int,
        src_bytes: int,
        *,
        stacklevel: int,
    ) -> None:
        """Copy ``src`` into ``dst`` (two storages that cannot overlap): nothing for no
        elements, the complex-to-real warning, then the bytes: the prepared same-dtype
        kernel on raw memory, else ``copy_strided``.

        ``*_start`` is the address of element 0 of each tensor and ``*_bytes`` the bytes its
        storage holds from there, so the kernel can check the plan stays inside it.
        """
        if self.numel == 0:
            return
        if self.complex_to_real:
            warn_complex_to_real(stacklevel + 1)
        prepared = self.prepared
        if prepared is None or not prepared.run(dst_start, dst_bytes, src_start, src_bytes):
            run_plan(self.plan, dst, src)


_complex_to_real_warned = False


def warn_complex_to_real(stacklevel: int) -> None:
    """Copy.cpp's ``TORCH_WARN_ONCE``: the first complex -> real copy warns, later ones only
    while ``torch.set_warn_always(True)`` (``c10::WarningUtils::get_warnAlways``).

    ``stacklevel`` counts from the caller, as ``warnings.warn``'s does.
    """
    global _complex_to_real_warned
    if _complex_to_real_warned and not torch.is_warn_always_enabled():
        return
    _complex_to_real_warned = True
    warnings.warn(_COMPLEX_TO_REAL, stacklevel=stacklevel + 1)


def copy_entry(dst: torch.Tensor, src: torch.Tensor) -> CopyEntry:
    """The cached ``CopyEntry`` of ``dst.copy_(src)``."""
    return entry_for(dst.shape, dst.stride(), dst.dtype, src.shape, src.stride(), src.dtype)


def entry_for(
    dst_sizes: Sequence[int],
    dst_strides: Sequence[int],
    dst_dtype: torch.dtype,
    src_sizes: Sequence[int],
    src_strides: Sequence[int],
    src_dtype: torch.dtype,
) -> CopyEntry:
    """The ``CopyEntry`` of a copy between these layouts, made once per distinct key."""
    key = (dst_sizes, dst_strides, dst_dtype, src_sizes, src_strides, src_dtype)
    entry = _entries.get(key)
    return _new_entry(key) if entry is None else entry


def _new_entry(key: tuple) -> CopyEntry:
    """Make the entry of ``key`` (a cache miss) and remember it; errors are not remembered."""
    entry = _make_entry(key)
    _entries.put(key, entry)
    return entry


def _make_entry(key: tuple) -> CopyEntry:
    """The entry of ``entry_for``'s ``key`` (its six arguments)."""
    dst_sizes, dst_strides, dst_dtype, src_sizes, src_strides, src_dtype = key
    dst_sizes, dst_strides = tuple(dst_sizes), tuple(dst_strides)
    src_sizes, src_strides = tuple(src_sizes), tuple(src_strides)
    if layout.has_internal_overlap(dst_sizes, dst_strides) is layout.MemOverlap.YES:
        raise RuntimeError(_INTERNAL_OVERLAP)  # before the same-data exit, as copy_impl
    operands = (
        OperandSpec(dst_sizes, dst_strides, dst_dtype, is_output=True),
        OperandSpec(src_sizes, src_strides, src_dtype),
    )
    plan = cached_build(operands, _COPY_CONFIG)
    check_dtypes(dst_dtype, src_dtype)  # copy_stub's dispatch: after the iterator's checks
    prepared = None
    if dst_dtype == src_dtype and dst_dtype in _MOVABLE:
        prepared = kernels.prepare_copy(
            dst_dtype, plan.coalesced_shape, *plan.coalesced_stride_bytes
        )
    elif dst_dtype in _MOVABLE and src_dtype in _MOVABLE:
        prepared = kernels.prepare_cast(
            src_dtype, dst_dtype, plan.coalesced_shape, *plan.coalesced_stride_bytes
        )
    return CopyEntry(
        plan=plan,
        numel=plan.numel,
        # Copy.cpp: a bool destination reads both parts (nonzero), so it does not warn
        complex_to_real=src_dtype.is_complex
        and not (dst_dtype.is_complex or dst_dtype == torch.bool),
        prepared=prepared,
    )


def _copy_shared(self: torch.Tensor, src: torch.Tensor, entry: CopyEntry) -> torch.Tensor:
    """``copy_impl`` from its same-data exit on, for two tensors of one storage."""
    if _is_same_data(self, src):
        return self
    if entry.numel == 0:
        return self
    overlap = layout.get_overlap_status(_mem_range(self), _mem_range(src))
    if overlap is layout.MemOverlapStatus.PARTIAL:
        raise RuntimeError(_PARTIAL_OVERLAP)
    if overlap is layout.MemOverlapStatus.TOO_HARD:
        # torch allows it and reads whatever its loop order leaves; we read from a private
        # copy instead, so every element gets the value src had before the copy.
        src = src.clone()  # a new, dense tensor: clone's own copy cannot overlap
        entry = copy_entry(self, src)
    entry.run(self, *_span(self), src, *_span(src), stacklevel=3)
    return self


def run_plan(plan: Plan, dst: torch.Tensor, src: torch.Tensor) -> None:
    """Move the bytes ``plan`` describes from ``src`` into ``dst`` with the numba kernel."""
    dst_strides, src_strides = plan.coalesced_stride_bytes
    kernels.copy_strided(
        kernels.Operand(storage_bytes(dst), byte_offset(dst), dst.dtype, dst_strides),
        kernels.Operand(storage_bytes(src), byte_offset(src), src.dtype, src_strides),
        plan.coalesced_shape,
    )


def _span(t: torch.Tensor) -> tuple[int, int]:
    """The address of ``t``'s element 0 and the bytes its storage holds from there."""
    base, nbytes = storage_span(t)
    start = base + t.storage_offset() * t.element_size()
    return start, base + nbytes - start


def _copy_cow(self: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """copy_ where either storage is copy-on-write (``Tensor._lazy_clone``), as ``copy_impl``:
    the same-data exit compares storages (copy-on-write siblings share bytes, not a storage,
    so they copy), then the copy takes mutable access to ``self``, materialising it."""
    _check_copy_args(self, src)
    entry = copy_entry(self, src)  # raises for a destination that overlaps itself
    if self.untyped_storage()._cdata == src.untyped_storage()._cdata and _is_same_data(self, src):
        return self
    writable(self)
    if _shares_storage(self, src):
        return _copy_shared(self, src, entry)
    entry.run(self, *_span(self), src, *_span(src), stacklevel=4)
    return self


def _check_copy_args(self: torch.Tensor, src: torch.Tensor) -> None:
    if (
        self.device in _HOST
        and src.device in _HOST
        and self.layout == torch.strided
        and src.layout == torch.strided
    ):
        return  # the common case, in one expression; else find the first error in order
    for name, t in (("destination", self), ("source", src)):
        if t.device not in _HOST and t.device.type not in _HOST_DEVICES:
            raise RuntimeError(f"mydev copy_: cannot copy with a {name} on {t.device}")
        if t.layout != torch.strided:
            raise RuntimeError(f"mydev copy_: the {name} layout {t.layout} is not supported")


def copyable(dst_dtype: torch.dtype, src_dtype: torch.dtype) -> bool:
    """Whether torch CPU's ``copy_kernel`` (and so mydev's) copies ``src_dtype`` into
    ``dst_dtype``: a cast between two dtypes of ``COPY_DTYPES``, or a byte move between two
    tensors of one dtype of ``STORAGE_DTYPES`` (bits types and float4_e2m1fn_x2 only move)."""
    if dst_dtype == src_dtype:
        return dst_dtype in _MOVABLE
    return dst_dtype in _CASTABLE and src_dtype in _CASTABLE


def check_dtypes(dst_dtype: torch.dtype, src_dtype: torch.dtype) -> None:
    """Raise CPU's ``NotImplementedError`` where ``copy_kernel`` has no loop for the pair.

    ``AT_DISPATCH`` names the dtype it lacks: a same-dtype copy of a dtype CPU cannot move
    (uint1..uint7, int1..int7) fails in ``direct_copy_kernel`` ("copy_kernel"), a cast in
    ``copy_`` 's dispatch on the destination's dtype first, then the source's.
    """
    if copyable(dst_dtype, src_dtype):
        return
    if dst_dtype == src_dtype:
        kernel, missing = "copy_kernel", dst_dtype
    else:
        kernel, missing = "copy_", src_dtype if dst_dtype in _CASTABLE else dst_dtype
    raise NotImplementedError(
        f"mydev copy_: \"{kernel}\" not implemented for '{dtype_name(missing)}' (as on CPU)"
    )


def _copy_lazy_bits(self: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """copy_ where either side has a lazy conjugate or negative bit (``x.conj()``, ``.imag``).

    Copy.cpp's rule: ``self`` must read back as ``src`` reads. Copy the stored values (both
    sides seen without their bits, same checks as any copy), then conjugate / negate the
    written elements where the two sides' bits differ.
    """
    same_bits = self.is_conj() == src.is_conj() and self.is_neg() == src.is_neg()
    if same_bits and _is_same_data(self, src):
        return self
    conj = self.is_complex() and self.is_conj() != src.is_conj()
    neg = self.is_neg() != src.is_neg()
    if neg and self.dtype not in _NEGATABLE:  # CPU's neg_kernel has no loop for it
        raise NotImplementedError(f"\"neg_cpu\" not implemented for '{dtype_name(self.dtype)}'")
    if conj and self.dtype not in _CONJUGATABLE:  # nor its conj_kernel (bcomplex32)
        raise NotImplementedError(f"\"conj_cpu\" not implemented for '{dtype_name(self.dtype)}'")
    stored = _without_bits(self)
    copy_(stored, _without_bits(src))
    if conj or neg:
        writable(stored)  # the copy may have left it as it was (same data)
        _flip_signs(stored, conj=conj, neg=neg)
    return self


def _without_bits(t: torch.Tensor) -> torch.Tensor:
    """An alias of ``t`` that reads its stored values (no conjugate or negative bit)."""
    if not (t.is_conj() or t.is_neg()):
        return t
    alias = torch.ops.aten.alias(t)
    torch._C._set_conj(alias, False)
    torch._C._set_neg(alias, False)
    return alias


_SIGN_UNITS = {1: np.int8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _flip_signs(t: torch.Tensor, *, conj: bool, neg: bool) -> None:
    """Negate the imaginary parts (``conj``) and/or every value (``neg``) of ``t`` in place.

    Floating and complex values flip their sign bits, as IEEE negation does (NaN and -0.0
    included); integers are negated with two's-complement wrap-around.
    """
    if t.numel() == 0:
        return
    itemsize = t.element_size()
    parts = 2 if t.is_complex() else 1
    unit = itemsize // parts
    integer = not (t.is_floating_point() or t.is_complex())
    typed = storage_bytes(t).view(np.dtype(f"i{unit}") if integer else _SIGN_UNITS[unit])
    view = np.lib.stride_tricks.as_strided(
        typed[t.storage_offset() * parts :],
        shape=(*t.shape, parts),
        strides=(*(s * itemsize for s in t.stride()), unit),
    )
    if integer:
        np.negative(view, out=view)
        return
    sign = typed.dtype.type(1 << (8 * unit - 1))
    if neg:
        np.bitwise_xor(view, sign, out=view)
    if conj:
        np.bitwise_xor(view[..., 1], sign, out=view[..., 1])


def _shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    return storage_span(a)[0] == storage_span(b)[0]


def _is_same_data(self: torch.Tensor, src: torch.Tensor) -> bool:
    """Copy.cpp's early exit: the same elements of the same storage, same dtype."""
    return (
        _shares_storage(self, src)
        and self.storage_offset() == src.storage_offset()
        and self.stride() == src.stride()
        and self.shape == src.shape
        and self.dtype == src.dtype
    )


def _mem_range(t: torch.Tensor) -> layout.MemRange:
    return layout.MemRange.from_layout(
        storage_span(t)[0], t.shape, t.stride(), t.element_size(), t.storage_offset()
    )


def local_scalar_dense(self: torch.Tensor) -> bool | int | float | complex:
    """aten::_local_scalar_dense (``Tensor.item()``): element 0, read through a CPU copy.

    As ``_local_scalar_dense_cpu`` / ``_cuda`` (aten/src/ATen/native/Scalar.cpp, cuda/):
    an empty tensor raises "_local_scalar_dense: Empty tensor not supported", any other
    reads its first element (``Tensor.item()`` refuses all but one element before this).
    """
    if self.numel() == 0:
        raise RuntimeError("_local_scalar_dense: Empty tensor not supported")
    first = self.as_strided((), (), self.storage_offset())  # keeps conjugate/negative bits
    return copy_(torch.empty((), dtype=self.dtype), first).item()
