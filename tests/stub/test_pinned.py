"""Pinned host memory: pin_memory() copies into the mydev host allocator (its own
statistics), is_pinned() finds those blocks, DataLoader pins batches, and non_blocking copies
from pinned memory give the same bytes."""

import gc
import warnings

import pytest
import torch


def host_allocated() -> int:
    return torch.mydev.host_memory_stats()["allocated_bytes.current"]


def test_pin_memory_is_pinned_cpu_memory_with_its_own_statistics():
    gc.collect()
    x = torch.randn(4, 5)
    before, device_before = host_allocated(), torch.mydev.memory_allocated()
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned()
    assert p.device == torch.device("cpu")
    assert torch.equal(p, x) and p.stride() == x.stride()
    assert p.data_ptr() != x.data_ptr()
    assert host_allocated() == before + x.nbytes
    assert torch.mydev.memory_allocated() == device_before  # not device memory
    assert p.pin_memory() is p  # already pinned: returned as is, as torch does
    del p
    assert host_allocated() == before


def test_views_into_pinned_memory_are_pinned():
    p = torch.arange(24.0).reshape(4, 6).pin_memory()
    assert p[1:].is_pinned() and p.t().is_pinned() and p[2, 3:].is_pinned()
    assert p.untyped_storage().is_pinned()


def test_other_memory_is_not_pinned():
    assert not torch.empty(16).is_pinned()
    assert not torch.empty(16, device="mydev").is_pinned()
    assert not torch.empty(0).is_pinned()


def test_pin_memory_with_mydev_device_argument():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch deprecates the argument
        p = torch.arange(5).pin_memory("mydev")
        assert p.is_pinned("mydev")
    assert p.is_pinned() and p.tolist() == [0, 1, 2, 3, 4]


def test_factories_can_allocate_pinned_memory():
    before = torch.mydev.host_memory_stats()["allocations.allocated"]
    t = torch.empty(8, pin_memory=True)
    assert t.is_pinned()
    assert torch.mydev.host_memory_stats()["allocations.allocated"] == before + 1
    assert torch.zeros(3, pin_memory=True).is_pinned()


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.complex64])
def test_non_blocking_copies_from_pinned_memory(dtype):
    x = torch.randn(3, 7).to(dtype)
    p = x.pin_memory()
    for target in ("mydev:0", "mydev:1"):
        d = p.to(target, non_blocking=True)
        assert d.device == torch.device(target)
        assert torch.equal(d.cpu(), x)
    d = torch.empty(3, 7, dtype=dtype, device="mydev")
    d.copy_(p.t().contiguous().t(), non_blocking=True)
    assert torch.equal(d.cpu(), x)
    back = torch.empty_like(x).pin_memory()
    back.copy_(d, non_blocking=True)
    assert torch.equal(back, x)


def test_dataloader_returns_pinned_batches():
    data = torch.utils.data.TensorDataset(torch.arange(10.0), torch.arange(10))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # pin_memory_device is deprecated
        loader = torch.utils.data.DataLoader(
            data, batch_size=4, pin_memory=True, pin_memory_device="mydev"
        )
        batches = list(loader)
    assert len(batches) == 3
    for features, labels in batches:
        assert features.is_pinned() and labels.is_pinned()
        moved = features.to("mydev", non_blocking=True)
        assert torch.equal(moved.cpu(), features)
    assert all(t.is_pinned() for b in torch.utils.data.DataLoader(data, pin_memory=True) for t in b)


def test_host_statistics_peak_reset_and_empty_host_cache():
    gc.collect()
    torch.mydev.reset_peak_host_memory_stats()
    base = host_allocated()
    p = torch.empty(1000, dtype=torch.uint8).pin_memory()
    del p
    stats = torch.mydev.host_memory_stats()
    assert stats["allocated_bytes.peak"] == base + 1000
    assert stats["allocated_bytes.current"] == base
    assert stats["num_host_alloc"] >= 1 and stats["num_host_free"] >= 1
    torch.mydev.reset_peak_host_memory_stats()
    assert torch.mydev.host_memory_stats()["allocated_bytes.peak"] == base
    torch.accelerator.empty_host_cache()  # nothing is kept: a no-op that must not fail
    assert host_allocated() == base


def test_non_blocking_copy_to_cpu_lands_in_pinned_memory():
    """ATen's ``pin_out``: a non-blocking D2H copy of an accelerator tensor is pinned (CUDA)."""
    x = torch.arange(12.0).reshape(3, 4).t().to("mydev")
    for kwargs in ({}, {"dtype": torch.float64}, {"memory_format": torch.contiguous_format}):
        pinned = x.to("cpu", non_blocking=True, **kwargs)
        expected = x.to("cpu", **kwargs)  # the blocking copy (checked against CPU elsewhere)
        assert pinned.is_pinned() and pinned.device.type == "cpu"
        assert torch.equal(pinned, expected) and pinned.stride() == expected.stride()
    assert not x.to("cpu").is_pinned()
