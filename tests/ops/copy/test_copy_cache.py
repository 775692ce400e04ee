"""The per-layout caches of copy_, clone and _to_copy change nothing torch users can see.

Truth: torch CPU for values and errors; for memory, the allocator's own statistics
(``torch.mydev.max_memory_allocated``) against the output's storage bytes.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from tests.support.tensors import same_bits
from torch_mydev.ops import factories, replay
from torch_mydev.ops.copy import aten as copy_ops
from torch_mydev.ops.copy import conversions


def test_one_layout_many_storages():
    """The cache keys on sizes, strides and dtypes: new storages and offsets copy correctly."""
    for seed in range(4):
        g = torch.Generator().manual_seed(seed)
        base = torch.randn(5 + 40, generator=g)
        cpu = base[seed : seed + 40].view(5, 8).t()
        dev = base.to("mydev")[seed : seed + 40].view(5, 8).t()
        assert same_bits(dev.contiguous().cpu(), cpu.contiguous())
        out = torch.empty(8, 5, device="mydev")
        out.copy_(dev)
        assert same_bits(out.cpu(), cpu.contiguous())


@pytest.fixture
def warn_always():
    """Copy.cpp's complex -> real warning is ``TORCH_WARN_ONCE``: it repeats on every call
    while ``torch.set_warn_always(True)``, on CPU and on mydev."""
    torch.set_warn_always(True)
    yield
    torch.set_warn_always(False)


def test_errors_and_warnings_repeat_on_every_call(warn_always):
    """A cached layout still raises (internal, partial overlap) and warns every time."""
    expanded = torch.empty(3, device="mydev").expand(2, 3)
    storage = torch.arange(8.0).to("mydev")
    for _ in range(2):
        with pytest.raises(RuntimeError, match="more than one element"):
            expanded.copy_(torch.ones(2, 3))
        with pytest.raises(RuntimeError, match="some elements of the input"):
            storage[1:5].copy_(storage[0:4])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.empty(2, device="mydev").copy_(torch.ones(2, dtype=torch.complex64))
        assert any("imaginary part" in str(w.message) for w in caught)


def test_to_copy_casts_and_warns_through_the_cache(warn_always):
    src = (torch.arange(6.0) * (1 + 2j)).to(torch.complex64).reshape(2, 3).t()
    dev = src.to("mydev")
    for _ in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ours = dev.to(torch.float32)
        assert any("imaginary part" in str(w.message) for w in caught)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert same_bits(ours.cpu(), src.to(torch.float32))
        assert ours.stride() == src.to(torch.float32).stride()


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.randn(64, 48).t(),
        lambda: torch.randn(2, 3, 8, 8).contiguous(memory_format=torch.channels_last),
        lambda: torch.randn(300).expand(4, 300),
        lambda: torch.randn(4, 6)[:, ::2],
    ],
)
def test_clone_needs_only_its_output(make):
    """clone's peak extra memory is exactly the new storage: no temporaries on the device."""
    dev = make().to("mydev")
    base = torch.mydev.memory_allocated()
    torch.mydev.reset_peak_memory_stats()
    out = dev.clone()
    assert torch.mydev.max_memory_allocated() - base == out.untyped_storage().nbytes()
    assert same_bits(out.cpu(), dev.cpu().clone())


def test_huge_page_advice_changes_no_value_or_statistic():
    """A block above ``HUGE_PAGE_MIN_BYTES`` is advised; contents and counters are as ever."""
    n = (factories.HUGE_PAGE_MIN_BYTES // 4000 + 1) * 1000
    cpu = torch.randn(n)
    base = torch.mydev.memory_allocated()
    dev = cpu.to("mydev")
    assert torch.mydev.memory_allocated() - base == dev.untyped_storage().nbytes()
    assert dev.untyped_storage().data_ptr() % (2 << 20) == 0  # whole huge pages
    small = torch.empty(1000, device="mydev")
    assert small.untyped_storage().data_ptr() % 64 == 0
    assert same_bits(dev.clone().cpu(), cpu)
    wide = dev.view(-1, 1000).t().contiguous()
    assert same_bits(wide.cpu(), cpu.view(-1, 1000).t().contiguous())


def test_caches_stay_bounded():
    for cache, size in (
        (copy_ops._entries, copy_ops.COPY_CACHE_SIZE),
        (copy_ops._by_signature, copy_ops.COPY_CACHE_SIZE),
        (conversions._layouts, conversions.LAYOUT_CACHE_SIZE),
        (conversions._by_signature, conversions.LAYOUT_CACHE_SIZE),
        (replay.COPY, replay.TABLE_SIZE),
        *((table, replay.TABLE_SIZE) for table in replay.NEW_COPY.values()),
    ):
        assert len(cache) <= size


def test_a_repeated_call_makes_no_new_entry():
    """The second ``contiguous()`` / ``copy_`` of a layout is one lookup: no cache grows."""
    dev = torch.randn(3, 5).to("mydev")
    dst = torch.empty(5, 3, device="mydev")
    dev.t().contiguous()
    dst.copy_(dev.t())
    caches = (
        copy_ops._entries,
        copy_ops._by_signature,
        conversions._layouts,
        conversions._by_signature,
    )
    sizes = [len(c) for c in caches]
    misses = [c.misses for c in caches]
    dev.t().contiguous()
    dst.copy_(dev.t())
    assert [len(c) for c in caches] == sizes
    assert [c.misses for c in caches] == misses


@pytest.mark.parametrize(
    "call",
    [
        lambda d: d.to(torch.uint4),
        lambda d: d.to("cpu", dtype=torch.bits16),
        lambda d: torch.empty(3, dtype=torch.int2, device="mydev").clone(),
    ],
)
def test_new_tensor_paths_keep_copy_errors(call):
    """clone/_to_copy skip no check: a dtype CPU cannot copy raises copy_'s error each time."""
    for _ in range(2):
        with pytest.raises(NotImplementedError, match="not implemented for"):
            call(torch.randn(3).to("mydev"))


def test_new_tensor_paths_hand_lazy_bits_to_copy():
    """clone and to of a conjugate or negative view give what CPU gives, every time.

    The new-tensor path does not handle the bits itself: it hands such a source to copy_.
    """
    z = torch.randn(3, 4) + 1j * torch.randn(3, 4)
    x = torch.randn(3, 4)
    cases = (
        lambda t: t.conj().clone(),
        lambda t: t.conj().to(torch.complex128),
        lambda t: torch._neg_view(t.real).clone(),
        lambda t: torch._neg_view(t.real).to(torch.float64),
    )
    for call in cases:
        for _ in range(2):
            for base in (z, x + 0j):
                cpu, dev = call(base), call(base.to("mydev"))
                assert (dev.is_conj(), dev.is_neg()) == (cpu.is_conj(), cpu.is_neg())
                got = dev.cpu().resolve_conj().resolve_neg()
                assert same_bits(got, cpu.resolve_conj().resolve_neg())
