"""torch.accelerator on mydev: devices, synchronize, and the memory functions, which read the
registered c10::DeviceAllocator (its numbers must equal torch.mydev's, per device)."""

import gc

import pytest
import torch

from torch_mydev import _C


@pytest.fixture(autouse=True)
def back_to_device_zero():
    yield
    torch.mydev.set_device(0)


def test_mydev_is_the_current_accelerator():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("mydev")
    assert torch.accelerator.device_count() == torch.mydev.device_count()


def test_set_device_index_is_torch_mydev_current_device():
    assert torch.accelerator.current_device_index() == torch.mydev.current_device() == 0
    torch.accelerator.set_device_index(1)
    assert torch.mydev.current_device() == 1
    torch.mydev.set_device("mydev:0")
    assert torch.accelerator.current_device_index() == 0
    with torch.accelerator.device_index(1):
        assert torch.mydev.current_device() == 1
    assert torch.mydev.current_device() == 0


def test_bad_index_raises_runtime_error():
    count = torch.mydev.device_count()
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.accelerator.set_device_index(count)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.accelerator.synchronize(count)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.accelerator.memory_allocated(count)


def test_synchronize_returns_for_each_device():
    for index in range(torch.mydev.device_count()):
        torch.accelerator.synchronize(index)
        torch.mydev.synchronize(index)
    torch.accelerator.synchronize()


@pytest.mark.parametrize("index", [0, 1])
def test_memory_functions_equal_torch_mydev_and_follow_allocations(index):
    gc.collect()
    other = 1 - index
    before = torch.accelerator.memory_allocated(index)
    before_other = torch.accelerator.memory_stats(other)
    assert before == torch.mydev.memory_allocated(index)
    t = torch.empty(1000, dtype=torch.uint8, device=f"mydev:{index}")
    assert torch.accelerator.memory_allocated(index) == before + 1000
    assert torch.accelerator.memory_reserved(index) == torch.mydev.memory_reserved(index)
    assert torch.accelerator.max_memory_allocated(index) >= before + 1000
    assert torch.accelerator.memory_stats(index) == torch.mydev.memory_stats(index)
    stats = torch.accelerator.memory_stats(index)
    assert stats["allocated_bytes.small_pool.current"] >= 1000
    assert stats["allocation.all.current"] == (
        stats["allocation.small_pool.current"] + stats["allocation.large_pool.current"]
    )
    # the other device's counters did not move
    assert torch.accelerator.memory_stats(other) == before_other
    del t
    assert torch.accelerator.memory_allocated(index) == before


def test_peak_and_accumulated_resets_per_device():
    torch.accelerator.reset_peak_memory_stats(1)
    base = torch.accelerator.memory_allocated(1)
    t = torch.empty(4096, dtype=torch.uint8, device="mydev:1")
    del t
    assert torch.accelerator.max_memory_allocated(1) == base + 4096
    assert torch.mydev.max_memory_reserved(1) >= base + 4096
    torch.accelerator.reset_peak_memory_stats(1)
    assert torch.accelerator.max_memory_allocated(1) == base
    torch.accelerator.reset_accumulated_memory_stats(1)
    stats = torch.accelerator.memory_stats(1)
    assert stats["allocated_bytes.all.allocated"] == stats["allocated_bytes.all.freed"] == 0
    assert stats["num_device_alloc"] == stats["num_device_free"] == 0
    t = torch.empty(8, dtype=torch.uint8, device="mydev:1")
    assert torch.accelerator.memory_stats(1)["allocation.all.allocated"] == 1
    del t
    assert torch.accelerator.memory_stats(1)["allocation.all.freed"] == 1


def test_empty_cache_returns_kept_blocks_of_every_device():
    torch.accelerator.empty_cache()
    nbytes = _C.HUGE_PAGE_MIN_BYTES + 1
    bases = [torch.mydev.memory_reserved(i) for i in (0, 1)]
    blocks = [torch.UntypedStorage(nbytes, device=f"mydev:{i}") for i in (0, 1)]
    assert [b.device.index for b in blocks] == [0, 1]
    segments = torch.accelerator.memory_stats(1)["segment.large_pool.current"]
    del blocks
    for i in (0, 1):
        assert torch.mydev.memory_reserved(i) > bases[i]  # kept for reuse
    assert torch.accelerator.memory_stats(1)["segment.large_pool.current"] == segments
    torch.accelerator.empty_cache()
    assert [torch.mydev.memory_reserved(i) for i in (0, 1)] == bases
    assert torch.accelerator.memory_stats(1)["segment.large_pool.current"] == segments - 1


def _meminfo_bytes(field: str) -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(field)


def test_mem_get_info_is_host_memory():
    free, total = torch.mydev.mem_get_info()
    assert total == _meminfo_bytes("MemTotal")
    assert 0 < free <= total
    assert torch.accelerator.get_memory_info(1)[1] == total
    assert torch.mydev.mem_get_info("mydev:1")[1] == total
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.mydev.mem_get_info(torch.mydev.device_count())


def test_current_stream_is_the_default_stream():
    stream = torch.accelerator.current_stream()
    assert stream.device == torch.device("mydev:0") and stream.stream_id == 0
    assert torch.accelerator.current_stream(1).device == torch.device("mydev:1")


def test_device_capability_lists_the_dtypes_the_kernels_handle():
    from torch_mydev.kernels.dtypes import SUPPORTED_DTYPES

    for index in range(torch.mydev.device_count()):
        capability = torch.accelerator.get_device_capability(index)
        assert set(capability["supported_dtypes"]) == set(SUPPORTED_DTYPES)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.accelerator.get_device_capability(torch.mydev.device_count())
