"""Decides nothing: the one per-call protocol of the native families' repeated calls.

A call signature is what ``_C._signature`` reads of the tensors (sizes, strides, dtype,
device, lazy bits) plus the call's own arguments (op, dims, a number's type, ...). The first
call of a signature runs the family's general path, which decides everything (checks,
plan, layout, loop) and leaves an ``Entry`` of what a repeat needs, or ``GENERAL`` when a
repeat must take the general path again (a cast temporary, a CPU scalar, a fallback). A
repeat only checks what can differ between two calls of one signature (the storages'
sizes), allocates the output and runs the loop (``serve``). Elementwise ops
(``elementwise.entries``, ``elementwise.relu``) and reductions (``reduction.entries``) run
through it; a functional elementwise repeat is also recorded for the stub, which replays
later calls without Python (``ops/replay.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from torch_mydev import _C
from torch_mydev.ops import replay
from torch_mydev_rules.iterator.cache import LRUCache

__all__ = ["GENERAL", "Entry", "serve", "serve_one"]

_empty_strided = _C._empty_strided
_signature = _C._signature


class _General:
    """The type of ``GENERAL``: a call signature the general path must take every time."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "GENERAL"


GENERAL = _General()


class Entry:
    """What a repeat of one call signature runs: a loop and its new output's layout.

    ``kernel(out, a[, b[, c]], *args)`` is the loop, called with the addresses of element
    0 of the output and of its ``inputs`` (1, 2 or 3); ``extents`` the bytes from element 0
    that the output and each input must hold. ``sizes`` /
    ``strides`` / ``dtype`` / ``device`` (an index) describe the new output of a functional
    call. ``prepared`` is the kernel's own set-up when the stub may replay it (its
    ``replay_block``), ``constant`` the bytes of a Python number operand the loop reads at
    ``constant_address``, one element of ``constant_dtype`` (another number of the same
    type is converted there).
    """

    __slots__ = (
        "args",
        "constant",
        "constant_address",
        "constant_dtype",
        "device",
        "dtype",
        "extents",
        "inputs",
        "kernel",
        "prepared",
        "sizes",
        "strides",
    )

    def __init__(
        self,
        kernel: Callable[..., object],
        args: tuple,
        extents: tuple[int, ...],
        inputs: int,
        sizes: tuple[int, ...],
        strides: tuple[int, ...],
        dtype: torch.dtype,
        device: int,
        *,
        prepared: object = None,
        constant: object = None,
        constant_dtype: torch.dtype | None = None,
    ) -> None:
        self.kernel = kernel
        self.args = args
        self.extents = extents
        self.inputs = inputs
        self.sizes = sizes
        self.strides = strides
        self.dtype = dtype
        self.device = device
        self.prepared = prepared
        self.constant = constant
        self.constant_address = 0 if constant is None else constant.ctypes.data
        self.constant_dtype = constant_dtype


def serve(
    memory: LRUCache,
    cache_key: tuple,
    entry: Entry | _General | None,
    first: Callable[..., tuple[torch.Tensor, Entry | _General]],
    call: tuple,
    target: torch.Tensor | None,
    record_in: replay.Target | None,
    key: bytes,
    a_start: int,
    a_room: int,
    b_start: int,
    b_room: int | None,
    c_start: int = 0,
    c_room: int | None = None,
) -> torch.Tensor | None:
    """One call of a signature through what its first call decided, step by step.

    1. First call (``entry`` None, looked up in ``memory`` under ``cache_key``):
       ``first(*call)`` runs the general path and returns its result with an ``Entry`` or
       ``GENERAL``, remembered under ``cache_key``. A call that raises leaves nothing.
    2. ``GENERAL``: None, and the caller runs the general path.
    3. The storages: ``a_room`` (``b_room``) is how many bytes ``a``'s (``b``'s) storage
       holds from its element 0 at ``a_start`` (``b_start``, and ``c`` for a third input),
       and must cover the entry's extent; else None, and the general path raises.
       ``b_room`` None: ``b`` is no tensor's (a number's bytes the entry holds, or ``a``
       read twice).
    4. The record: ``record_in`` (a ``replay.Target``) names the stub's table when the
       call is one it may replay (``alpha`` 1, no rounding mode); the signature's repeat is
       recorded there under ``key`` (its ``_C._signature`` key), and the stub runs the
       calls after it without Python.
    5. The output, ``target`` (in place) or a new tensor of the entry's layout, and the
       loop; an integer division by zero raises as CPU's does.
    """
    if entry is None:
        result, entry = first(*call)
        memory.put(cache_key, entry)
        return result
    if entry is GENERAL:
        return None
    extents = entry.extents
    if a_room < extents[1] or (b_room is not None and b_room < extents[2]):
        return None
    if c_room is not None and c_room < extents[3]:
        return None
    if record_in is not None and (record_in.python is None or key not in record_in.python):
        replay.record(record_in, key, entry)
    if target is None:
        out = _empty_strided(entry.sizes, entry.strides, entry.dtype, entry.device)
        out_start = out.data_ptr()
    else:
        out, out_start = target, a_start
    inputs = entry.inputs
    if inputs == 2:
        if entry.kernel(out_start, a_start, b_start, *entry.args):
            raise RuntimeError("ZeroDivisionError")
    elif inputs == 1:
        entry.kernel(out_start, a_start, *entry.args)
    else:
        entry.kernel(out_start, a_start, b_start, c_start, *entry.args)
    return out


def serve_one(
    memory: LRUCache,
    head: tuple,
    self: torch.Tensor,
    first: Callable[..., tuple[torch.Tensor, Entry | _General]],
    call: tuple,
    target: torch.Tensor | None,
    record_in: replay.Target | None,
) -> torch.Tensor | None:
    """``serve`` for a call whose one tensor operand is ``self`` (unary ops, relu, the
    reductions): its signature is read here and the cache key is ``(head, signature key)``,
    ``head`` holding the call's own arguments. A loop that reads a second operand reads
    ``self`` again (relu's ``clamp_min`` loop). None, before any lookup, for a tensor
    without host storage or with a lazy conjugate/negative bit: the general path runs."""
    signature = _signature(self)
    if signature is None:
        return None
    key, lazy_bits, start, base, nbytes = signature
    if lazy_bits:
        return None
    cache_key = (head, key)
    entry = memory.peek(cache_key)
    room = base + nbytes - start
    return serve(
        memory, cache_key, entry, first, call, target, record_in, key, start, room, start, None
    )
