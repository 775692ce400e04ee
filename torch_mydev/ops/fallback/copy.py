"""Moving tensors between mydev and CPU for the fallback: copies, write-back and aliases.

Two ways to give a CPU kernel the mydev arguments:

- ``Aliases`` (the default): each mydev tensor becomes ``_C._cpu_alias`` of itself, a CPU
  tensor over the same bytes; tensors sharing a mydev storage share one CPU storage
  (``like=``), so CPU's overlap and aliasing checks see what they would see on CPU. Nothing
  is copied in, and in-place / ``out=`` writes land in mydev memory directly.
- ``Copies`` (``TORCH_MYDEV_FALLBACK_COPY=1``, for benchmarking and debugging): each mydev
  tensor is copied to CPU with its sizes and strides (tensors sharing a storage become views
  of one CPU copy of it), and written arguments are copied back afterwards.

Copy-on-write mydev tensors (``Tensor._lazy_clone``) stay lazy where CPU's would: the
arguments an op writes are materialised first (``materialize``), as a CPU kernel's mutable
access materialises them, and every other one is read through const access (a ``readonly``
alias is copy-on-write itself, ``csrc_stub/ops/alias.cpp``).

Either way, an output whose sizes, strides or storage the CPU op changed (``resize_output``,
``as_strided_``, ``set_``: ``out=`` of ``linalg_lstsq``) is given CPU's final sizes, strides
and storage offset on mydev (``write_back``), growing its mydev storage if needed. An alias
the CPU op had to grow (an empty ``out=``) is resizable on CPU's allocator (``growable``):
it moves to new CPU memory, and ``write_back`` copies what the op wrote there.
"""

from __future__ import annotations

import abc
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch

from torch_mydev import _C
from torch_mydev._names import DEVICE as DEVICE_TYPE
from torch_mydev.ops import quantized

__all__ = [
    "Aliases",
    "Copies",
    "materialize",
    "move",
    "to_mydev",
    "write_back",
]

_CPU = torch.device("cpu")


def is_mydev(value: Any) -> bool:
    """Whether ``value`` is a tensor on mydev."""
    return isinstance(value, torch.Tensor) and value.device.type == DEVICE_TYPE


def _storage_key(t: torch.Tensor) -> int | None:
    address, nbytes = _C._storage_span(t)
    return address if nbytes else None


def materialize(value: Any) -> None:
    """Take mutable access to the mydev tensor(s) an op writes (``Tensor(a!)``) before any
    argument is aliased: a copy-on-write storage gets its own bytes, as on CPU."""
    if isinstance(value, (list, tuple)):
        for item in value:
            materialize(item)
    elif is_mydev(value):
        value.data_ptr()


def _copy_storage(storage: torch.UntypedStorage, device: torch.device) -> torch.UntypedStorage:
    """A copy of all bytes of ``storage`` in a new storage on ``device``."""
    src = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
    return _raw_copy(src, device).untyped_storage()


def _raw_copy(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A contiguous byte-for-byte copy of a contiguous uint8 tensor on ``device``."""
    out = torch.empty(t.shape, dtype=t.dtype, device=device)
    _cpu_view(out).copy_(_cpu_view(t, readonly=True))
    return out


def _cpu_view(
    t: torch.Tensor, like: torch.Tensor | None = None, *, readonly: bool = False
) -> torch.Tensor:
    """``t`` itself when on CPU, else its CPU alias (mydev memory is host memory); a
    ``readonly`` alias leaves a copy-on-write tensor lazy."""
    return t if t.device.type == "cpu" else _C._cpu_alias(t, like, readonly)


def _over(storage: torch.UntypedStorage, like: torch.Tensor) -> torch.Tensor:
    """A tensor over ``storage`` with the dtype, offset, sizes and strides of ``like``."""
    out = torch.empty(0, dtype=like.dtype, device=storage.device)
    return out.set_(storage, like.storage_offset(), like.shape, like.stride())


def _needs_storage(t: torch.Tensor) -> bool:
    """Layouts a fresh ``empty_strided`` cannot take a copy of: overlapping, or maybe so.

    ATen's ``has_internal_overlap`` (0 is NO), the rule of ``layout.has_internal_overlap``.
    """
    return torch._debug_has_internal_overlap(t) != 0


def move(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A copy of ``t`` on ``device`` with its sizes, strides and conj/neg bits.

    A non-overlapping tensor is copied into ``empty_strided`` of its sizes and strides; one
    that overlaps itself (or may: ATen's "too hard") is rebuilt over a copy of its storage.
    The bytes move by CPU's ``copy_`` over CPU aliases, so every dtype moves bit-exactly.
    """
    if t.is_conj():
        return move(t.conj(), device).conj()
    if t.is_neg():
        return move(t._neg_view(), device)._neg_view()
    if _needs_storage(t):
        return _over(_copy_storage(t.untyped_storage(), device), t)
    out = torch.empty_strided(tuple(t.shape), t.stride(), dtype=t.dtype, device=device)
    _cpu_view(out).copy_(_cpu_view(t, readonly=True))
    return out


def to_mydev(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CPU result as a new mydev tensor with its sizes and strides (one copy).

    The common case skips the dispatcher's ``empty_strided``: the stub allocates
    (``_C._empty_strided``) and CPU's ``copy_`` fills the new memory through an alias.
    """
    if t.is_quantized:  # a QTensorImpl: no mydev tensor can hold its quantizer
        raise quantized.not_supported(f"a CPU kernel returned a {t.dtype} tensor for {device}")
    if t.is_conj() or t.is_neg() or _needs_storage(t):
        return move(t, device)
    index = device.index if device.index is not None else _C._current_device()
    out = _C._empty_strided(tuple(t.shape), t.stride(), t.dtype, index)
    _C._cpu_alias(out).copy_(t)
    return out


def write_back(original: Any, cpu: Any) -> None:
    """Make the mydev tensor(s) ``original`` hold what the CPU op left in ``cpu``.

    Sizes, strides and storage offset become CPU's when the op changed them (the storage
    grows first if CPU's layout needs more bytes); then the values are copied, unless
    ``cpu`` is still an alias of exactly ``original``'s bytes.
    """
    if isinstance(original, (list, tuple)):
        for o, c in zip(original, cpu, strict=True):
            write_back(o, c)
        return
    if not is_mydev(original):
        return  # None, or a CPU tensor the op wrote itself
    cpu_span, original_span = _C._storage_span(cpu), _C._storage_span(original)
    same_storage = cpu_span[0] == original_span[0]
    # A CPU copy starts at its own offset; only an alias is compared on offsets too.
    same_layout = (
        original.shape == cpu.shape
        and original.stride() == cpu.stride()
        and (not same_storage or original.storage_offset() == cpu.storage_offset())
    )
    if not same_layout:
        _restride(original, cpu)
    if same_storage and cpu_span[1] == original_span[1]:
        return  # an alias the op wrote in place
    _cpu_view(original).copy_(cpu)


def _restride(original: torch.Tensor, cpu: torch.Tensor) -> None:
    """Give ``original`` the sizes, strides and offset of ``cpu``, growing its storage."""
    numel = cpu.numel()
    extent = 0
    if numel:
        extent = 1 + sum((n - 1) * s for n, s in zip(cpu.shape, cpu.stride(), strict=True))
    need = (cpu.storage_offset() + extent) * cpu.element_size()
    storage = original.untyped_storage()
    if storage.nbytes() < need:
        storage.resize_(need)
    original.set_(storage, cpu.storage_offset(), cpu.shape, cpu.stride())


class ArgumentMap(abc.ABC):
    """The CPU value of each argument of one call: a mydev tensor by ``_mydev_tensor`` (once
    per tensor: ``_once``), another device's tensor as it is (in ``passed``), a list or
    tuple item by item, a mydev ``torch.device`` as CPU, anything else as it is.
    ``originals`` maps each CPU tensor made back to its mydev tensor."""

    originals: dict[int, torch.Tensor]
    passed: set[int]

    def __call__(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            self._check(value)
            if not is_mydev(value):
                self.passed.add(id(value))
                return value
            return self._mydev_tensor(value)
        if isinstance(value, (list, tuple)):
            return type(value)(self(item) for item in value)
        if isinstance(value, torch.device) and value.type == DEVICE_TYPE:
            return _CPU
        return value

    def _check(self, value: torch.Tensor) -> None:
        """Refuse a tensor this map cannot take (nothing, by default)."""
        return

    @abc.abstractmethod
    def _mydev_tensor(self, value: torch.Tensor) -> torch.Tensor:
        """The CPU tensor a mydev tensor argument becomes (a copy, an alias, ...)."""

    def _once(
        self,
        value: torch.Tensor,
        made: dict[int, torch.Tensor],
        make: Callable[[torch.Tensor], torch.Tensor],
    ) -> torch.Tensor:
        """``make(value)``, made once per tensor (kept in ``made``, by id)."""
        found = made.get(id(value))
        if found is None:
            found = make(value)
            made[id(value)] = found
            self.originals[id(found)] = value
        return found


class Copies(ArgumentMap):
    """CPU copies of the mydev tensors of one call, aliasing each other as they do.

    Each distinct tensor is copied once; tensors that share a mydev storage become views of
    one CPU copy of that storage, with their own offsets and strides.
    """

    copy_in = True

    def __init__(self, tensors: list[torch.Tensor]) -> None:
        distinct = {id(t): t for t in tensors if is_mydev(t)}
        keys = Counter(_storage_key(t) for t in distinct.values())
        self._shared = {key for key, n in keys.items() if key is not None and n > 1}
        self._storages: dict[int, torch.UntypedStorage] = {}
        self.cpu: dict[int, torch.Tensor] = {}  # id(mydev tensor) -> CPU tensor
        self.originals: dict[int, torch.Tensor] = {}  # id(CPU tensor) -> mydev tensor
        self.passed: set[int] = set()  # ids of the tensors passed as they are (CPU's)

    def _mydev_tensor(self, value: torch.Tensor) -> torch.Tensor:
        return self._once(value, self.cpu, self._make)

    def _make(self, t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key not in self._shared:
            return move(t, _CPU)
        if t.is_conj():
            return self._make(t.conj()).conj()
        if t.is_neg():
            return self._make(t._neg_view())._neg_view()
        if key not in self._storages:
            self._storages[key] = _copy_storage(t.untyped_storage(), _CPU)
        return _over(self._storages[key], t)


class Aliases(Copies):
    """CPU aliases of the mydev tensors of one call (``_C._cpu_alias``): no copy.

    Tensors over one mydev storage get aliases over one CPU storage (``like=``).
    """

    copy_in = False

    def __init__(self, tensors: list[torch.Tensor]) -> None:
        self._first: dict[tuple[int, int], torch.Tensor] = {}
        self.cpu = {}
        self.originals = {}
        self.passed = set()

    def _make(self, t: torch.Tensor) -> torch.Tensor:
        key = _C._storage_span(t)
        if not key[0]:  # no bytes: storages told apart by identity (an empty out= grows)
            key = (t.untyped_storage()._cdata, -1)
        like = self._first.get(key)
        # what the op writes was materialised first; an out= alias the op grows moves to
        # CPU memory, and ``write_back`` gives the mydev tensor CPU's layout and bytes
        alias = _C._cpu_alias(t, like, True, True)
        if like is None:
            self._first[key] = alias
        return alias
