"""Deterministic mode fills uninitialised memory on mydev as it does on CPU.

Under ``torch.use_deterministic_algorithms(True)`` with
``torch.utils.deterministic.fill_uninitialized_memory`` (its default), ATen's ``empty``,
``empty_strided`` and ``empty_like`` fill new tensors with NaN (floating and complex dtypes)
or the dtype's largest value (integers; True for bool): ``fill_empty_deterministic_`` in
native/TensorFactories.h. ``resize_`` fills the bytes it adds to the storage
(``fill_resize_deterministic_``, native/ResizeCommon.h). Every check compares bits with CPU;
with either setting off nothing is written.
"""

from __future__ import annotations

import gc
import sys
import types
from collections.abc import Callable

import pytest
import torch

from torch_mydev import _C

DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.complex64,
    torch.complex128,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
]
# Dtypes the native kernels lack (copies and fill_ go through CPU): CPU fills them too.
OTHER_DTYPES = [torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn, torch.complex32]


@pytest.fixture
def deterministic():
    """Deterministic algorithms on, with filling; the caller's settings restored after."""
    algorithms = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(algorithms, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The bytes of every element of ``t`` (in its logical order), on CPU; read through a CPU
    alias, which any dtype can be."""
    cpu = _C._cpu_alias(t) if t.device.type == "mydev" else t
    return cpu.contiguous().reshape(-1).view(torch.uint8)


def _assert_same_bits(mydev: torch.Tensor, cpu: torch.Tensor) -> None:
    assert mydev.device.type == "mydev" and cpu.device.type == "cpu"
    assert (mydev.shape, mydev.stride(), mydev.dtype) == (cpu.shape, cpu.stride(), cpu.dtype)
    assert torch.equal(_bits(mydev), _bits(cpu))


def _garbage(like: torch.Tensor) -> None:
    """Leave a freed block of 3s as large as ``like``'s storage in the allocator's cache, for
    the next mydev tensor: bytes that are neither fill value."""
    nbytes = max(like.untyped_storage().nbytes(), 1)
    block = torch.full((nbytes,), 3, dtype=torch.uint8, device="mydev")
    del block


FACTORIES: dict[str, Callable[[str, torch.dtype], torch.Tensor]] = {
    "empty": lambda d, dt: torch.empty(2, 3, dtype=dt, device=d),
    "empty_0d": lambda d, dt: torch.empty((), dtype=dt, device=d),
    "empty_channels_last": lambda d, dt: torch.empty(
        2, 3, 2, 2, dtype=dt, device=d, memory_format=torch.channels_last
    ),
    "empty_strided_gaps": lambda d, dt: torch.empty_strided((2, 3), (1, 4), dtype=dt, device=d),
    "empty_strided_expanded": lambda d, dt: torch.empty_strided((3, 4), (0, 1), dtype=dt, device=d),
    "new_empty": lambda d, dt: torch.empty(1, dtype=dt, device=d).new_empty((4, 2)),
    "new_empty_strided": lambda d, dt: torch.empty(1, dtype=dt, device=d).new_empty_strided(
        (2, 2), (1, 2)
    ),
}


@pytest.mark.parametrize("dtype", DTYPES + OTHER_DTYPES, ids=str)
@pytest.mark.parametrize("factory", list(FACTORIES), ids=str)
def test_factories_fill_as_cpu(deterministic, factory, dtype):
    make = FACTORIES[factory]
    cpu = make("cpu", dtype)
    _garbage(cpu)
    _assert_same_bits(make("mydev", dtype), cpu)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(
    "memory_format",
    [None, torch.preserve_format, torch.contiguous_format, torch.channels_last],
    ids=str,
)
def test_empty_like_fills_as_cpu(deterministic, memory_format, dtype):
    source = torch.zeros(2, 4, 3, 3, dtype=dtype).permute(0, 2, 3, 1)  # channels_last order
    on_mydev = source.to("mydev")
    kwargs = {} if memory_format is None else {"memory_format": memory_format}
    cpu = torch.empty_like(source, **kwargs)
    _garbage(cpu)
    _assert_same_bits(torch.empty_like(on_mydev, **kwargs), cpu)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=str)
def test_empty_like_with_other_options_fills_as_cpu(deterministic, dtype):
    source = torch.zeros(3, 5, dtype=torch.float16)
    on_mydev = source.to("mydev")
    cpu = torch.empty_like(source, dtype=dtype)
    _garbage(cpu)
    _assert_same_bits(torch.empty_like(on_mydev, dtype=dtype), cpu)
    _garbage(cpu)  # from CPU onto mydev
    _assert_same_bits(torch.empty_like(source, dtype=dtype, device="mydev"), cpu)
    onto_cpu = torch.empty_like(source.to("mydev"), dtype=dtype, device="cpu")
    assert torch.equal(_bits(onto_cpu), _bits(torch.empty_like(source, dtype=dtype)))


@pytest.mark.parametrize("dtype", DTYPES + OTHER_DTYPES, ids=str)
def test_resize_fills_only_the_new_bytes(deterministic, dtype):
    cpu = torch.arange(5, dtype=torch.uint8).view(torch.int8).to(dtype)
    mydev = torch.empty(5, dtype=dtype, device="mydev")
    _C._cpu_alias(mydev).copy_(cpu)
    _garbage(torch.empty(64, dtype=dtype))
    for size in [(3,), (4, 4), (2,), (20,)]:  # shrinking keeps the storage: nothing new
        mydev.resize_(size)
        cpu.resize_(size)
        _assert_same_bits(mydev, cpu)
        assert mydev.untyped_storage().nbytes() == cpu.untyped_storage().nbytes()


# Blocks this large are kept by the allocator for the next request of their size
# (csrc_stub/runtime/allocator.cpp): a new tensor of that size starts on a freed block's bytes.
CACHED = _C.HUGE_PAGE_MIN_BYTES


def _holders(block: torch.Tensor) -> list[str]:
    """What refers to ``block`` besides the caller's frame, and what holds each tuple of them
    (for the message of a failed reuse)."""
    found = []
    for ref in gc.get_referrers(block):
        if isinstance(ref, tuple):
            outer = [type(o).__name__ for o in gc.get_referrers(ref)]
            found.append(f"tuple of {[type(x).__name__ for x in ref]} held by {outer}")
        elif not isinstance(ref, types.FrameType):
            found.append(type(ref).__name__)
    return found


def _reused(make: Callable[[], torch.Tensor], numel: int) -> torch.Tensor:
    """A tensor from ``make`` over the block a freed tensor of 7s just gave back.

    The allocator's cache is emptied first: a cache that earlier tests of the process had
    filled to its limit keeps no more blocks, and another kept block of the size could be
    handed out instead. The cyclic collector runs first, so that no earlier test's tensor it
    frees later puts a block of that size first in the cache."""
    gc.collect()
    torch.mydev.empty_cache()
    block = torch.empty(numel, dtype=torch.uint8, device="mydev").fill_(7)
    address = block.data_ptr()
    held = torch.mydev.memory_stats()
    holders = _holders(block) if sys.getrefcount(block) > 2 else []
    del block
    # A call that caught an exception inside (a loop still compiling, served on CPU) can
    # leave its frame in a reference cycle with the traceback, and the frame holds its
    # arguments: the block then lives until the collector runs (seen in one worker order,
    # the fill_'s arguments held by a frame). Collect before asking for the block again.
    gc.collect()
    freed = torch.mydev.memory_stats()
    t = make()
    keys = ("allocated_bytes.all.current", "reserved_bytes.all.current")
    facts = {k: (held[k], freed[k]) for k in keys} | {"holders": holders}
    assert t.data_ptr() == address, f"the allocator should hand the freed block back: {facts}"
    return t


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.empty(CACHED, dtype=torch.uint8, device="mydev"),
        lambda: torch.empty_strided(
            (CACHED // 8, 8), (1, CACHED // 8), dtype=torch.uint8, device="mydev"
        ),
        lambda: torch.empty_like(torch.zeros(CACHED, dtype=torch.uint8), device="mydev"),
    ],
    ids=["empty", "empty_strided", "empty_like"],
)
@pytest.mark.parametrize("setting", ["off", "fill_off"])
def test_nothing_is_written_when_filling_is_off(deterministic, setting, make):
    if setting == "off":
        torch.use_deterministic_algorithms(False)
    else:
        torch.utils.deterministic.fill_uninitialized_memory = False
    t = _reused(make, CACHED)
    assert bool((t.cpu() == 7).all())


def test_nothing_is_written_by_resize_when_filling_is_off(deterministic):
    torch.use_deterministic_algorithms(False)
    grow = lambda: torch.empty(0, dtype=torch.uint8, device="mydev").resize_(CACHED)  # noqa: E731
    t = _reused(grow, CACHED)
    assert bool((t.cpu() == 7).all())
