"""Allocator: alignment, statistics, resizable storage, and memory back to baseline."""

import gc
import itertools

import pytest
import torch

SIZES = [0, 1, 7, 63, 64, 65, 4096, 1 << 20]


def stats():
    gc.collect()
    return torch.mydev.memory_stats()


@pytest.mark.parametrize("nbytes", SIZES)
def test_untyped_storage_allocates_and_returns_to_baseline(nbytes):
    before = torch.mydev.memory_allocated()
    storage = torch.UntypedStorage(nbytes, device="mydev")
    assert storage.nbytes() == nbytes
    assert storage.device == torch.device("mydev", 0)
    assert torch.mydev.memory_allocated() == before + nbytes
    if nbytes:
        assert storage.data_ptr() % 64 == 0
    else:
        assert storage.data_ptr() == 0
    del storage
    assert torch.mydev.memory_allocated() == before


# Every shape of rank 0..3 with sizes 0, 1, 2, 5, 9 (rank 4: a sample), in each dtype.
_SHAPES = [
    shape for rank in range(4) for shape in itertools.product((0, 1, 2, 5, 9), repeat=rank)
] + [(9, 0, 3, 2), (2, 3, 4, 5), (9, 9, 9, 9), (1, 1, 1, 1)]
_DTYPES = [torch.bool, torch.uint8, torch.int16, torch.float32, torch.complex128]


def test_tensors_return_memory_to_baseline():
    """Each tensor adds exactly its bytes and one block (none when empty) and gives them back
    when its last reference goes.

    Tensors hold no reference cycles, so reference counting frees them: the cyclic collector
    runs once before, then is paused, so nothing else it could free moves the counters (two
    full collections per case made this test a third of the suite).
    """
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        for dtype, sizes in itertools.product(_DTYPES, _SHAPES):
            before = torch.mydev.memory_stats()
            t = torch.empty(sizes, dtype=dtype, device="mydev")
            nbytes = t.numel() * t.element_size()
            after = torch.mydev.memory_stats()
            allocated = after["allocated_bytes.all.current"]
            assert allocated == before["allocated_bytes.all.current"] + nbytes, (sizes, dtype)
            blocks = before["allocation.all.allocated"] + (nbytes > 0)
            assert after["allocation.all.allocated"] == blocks, (sizes, dtype)
            del t
            final = torch.mydev.memory_stats()
            assert final["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
            assert final["allocation.all.current"] == before["allocation.all.current"]
    finally:
        if enabled:
            gc.enable()


def test_peak_counts_and_reset():
    torch.mydev.reset_peak_memory_stats()
    base = torch.mydev.memory_allocated()
    assert torch.mydev.max_memory_allocated() == base
    a = torch.empty(1000, dtype=torch.uint8, device="mydev")
    b = torch.empty(500, dtype=torch.uint8, device="mydev")
    blocks = torch.mydev.memory_stats()["allocation.all.current"]
    del a
    assert torch.mydev.max_memory_allocated() == base + 1500
    assert torch.mydev.memory_stats()["allocation.all.current"] == blocks - 1
    torch.mydev.reset_peak_memory_stats()
    assert torch.mydev.max_memory_allocated() == base + 500
    del b
    assert torch.mydev.memory_allocated() == base


def test_stats_use_torch_cuda_names():
    expected = {
        f"{kind}.{pool}.{counter}"
        for kind in ("allocated_bytes", "allocation", "reserved_bytes", "segment")
        for pool in ("all", "small_pool", "large_pool")
        for counter in ("current", "peak", "allocated", "freed")
    } | {"num_device_alloc", "num_device_free", "num_ooms", "num_alloc_retries"}
    assert expected <= set(torch.mydev.memory_stats())
    assert set(torch.mydev.memory_stats()) == set(torch.accelerator.memory_stats())


def test_tensor_resize_grows_storage_and_keeps_bytes():
    before = torch.mydev.memory_allocated()
    t = torch.empty(0, device="mydev")
    t.resize_(10)
    assert t.shape == (10,) and t.stride() == (1,)
    assert torch.mydev.memory_allocated() == before + 40
    ptr = t.untyped_storage().data_ptr()
    t.resize_(4, 5)
    assert t.stride() == (5, 1)
    assert t.untyped_storage().nbytes() == 80
    assert t.untyped_storage().data_ptr() != ptr
    assert torch.mydev.memory_allocated() == before + 80
    del t
    assert stats()["allocated_bytes.all.current"] == before


def test_storage_resize_through_hooks():
    before = torch.mydev.memory_allocated()
    storage = torch.UntypedStorage(16, device="mydev")
    storage.resize_(100)
    assert storage.nbytes() == 100
    assert torch.mydev.memory_allocated() == before + 100
    storage.resize_(0)
    assert torch.mydev.memory_allocated() == before
    del storage


def test_resize_as_follows_cpu():
    cpu = torch.empty(2, 3).resize_as_(torch.empty(4, 5).t())
    dev = torch.empty(2, 3, device="mydev").resize_as_(torch.empty(4, 5, device="mydev").t())
    assert dev.shape == cpu.shape and dev.stride() == cpu.stride()


def test_large_freed_blocks_are_kept_for_reuse_and_returned_by_empty_cache():
    """Blocks from HUGE_PAGE_MIN_BYTES are kept after free (as CUDA's caching allocator keeps
    them): "allocated" drops at once, "reserved" until ``empty_cache``."""
    from torch_mydev import _C

    torch.mydev.empty_cache()
    base = torch.mydev.memory_allocated()
    assert torch.mydev.memory_reserved() == base
    nbytes = _C.HUGE_PAGE_MIN_BYTES + 12345
    block = torch.UntypedStorage(nbytes, device="mydev")
    address = block.data_ptr()
    assert address % (2 << 20) == 0
    del block
    assert torch.mydev.memory_allocated() == base
    assert torch.mydev.memory_reserved() >= base + nbytes
    again = torch.UntypedStorage(nbytes - 100, device="mydev")  # same rounded block size
    assert again.data_ptr() == address
    assert torch.mydev.memory_allocated() == base + nbytes - 100
    other = torch.UntypedStorage(nbytes + (4 << 20), device="mydev")  # another size: new
    assert other.data_ptr() != address
    del again, other
    torch.mydev.empty_cache()
    assert torch.mydev.memory_reserved() == torch.mydev.memory_allocated() == base


def test_small_blocks_are_not_kept():
    torch.mydev.empty_cache()
    reserved = torch.mydev.memory_reserved()
    t = torch.empty(1000, device="mydev")
    del t
    assert torch.mydev.memory_reserved() == reserved
