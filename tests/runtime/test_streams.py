"""Streams and events (docs/runtime.md): kernels run synchronously, so streams are always
complete; the current stream is per thread and device; events time real host intervals and
raise as CUDA's do."""

import threading
import time

import pytest
import torch

import torch_mydev


@pytest.fixture(autouse=True)
def back_to_device_zero():
    yield
    torch.mydev.set_device(0)


def test_torch_stream_on_mydev():
    s = torch.Stream(device="mydev")
    assert s.device == torch.device("mydev:0") and s.stream_id != 0
    assert s.query()
    s.synchronize()
    assert torch.Stream(device="mydev:1").device == torch.device("mydev:1")


def test_mydev_stream_class():
    s = torch.mydev.Stream()
    t = torch.mydev.Stream(device=1, priority=-1)
    assert isinstance(s, torch.Stream)
    assert s.device == torch.device("mydev:0") and t.device == torch.device("mydev:1")
    assert s != t and s.stream_id != torch.mydev.Stream().stream_id
    assert s.query()
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.mydev.Stream(device=torch.mydev.device_count())


def test_current_and_default_stream():
    current = torch.mydev.current_stream()
    assert isinstance(current, torch.mydev.Stream)
    assert current == torch.mydev.default_stream() and current.stream_id == 0
    assert torch.mydev.default_stream(1).device == torch.device("mydev:1")


def test_stream_context_switches_current_stream_and_restores_it():
    s, inner = torch.mydev.Stream(), torch.mydev.Stream()
    with torch.mydev.stream(s):
        assert torch.mydev.current_stream() == s
        assert torch.accelerator.current_stream() == s
        with torch.mydev.stream(inner):
            assert torch.mydev.current_stream() == inner
        assert torch.mydev.current_stream() == s
        with torch.mydev.stream(None):
            assert torch.mydev.current_stream() == s
    assert torch.mydev.current_stream() == torch.mydev.default_stream()
    with s:  # torch.Stream's own context manager
        assert torch.mydev.current_stream() == s
    assert torch.accelerator.current_stream().stream_id == 0


def test_stream_of_another_device_makes_it_current_for_the_block():
    s1 = torch.mydev.Stream(device=1)
    with torch.mydev.stream(s1):
        assert torch.mydev.current_device() == 1
        assert torch.mydev.current_stream() == s1
        assert torch.empty(2, device="mydev:1").device.index == 1
    assert torch.mydev.current_device() == 0
    assert torch.mydev.current_stream(1).stream_id == 0


def test_set_stream():
    s = torch.mydev.Stream()
    torch.mydev.set_stream(s)
    try:
        assert torch.mydev.current_stream() == s
    finally:
        torch.mydev.set_stream(torch.mydev.default_stream())
    assert torch.mydev.current_stream().stream_id == 0


def test_current_stream_is_per_thread():
    s = torch.mydev.Stream()
    seen = []
    with torch.mydev.stream(s):
        thread = threading.Thread(target=lambda: seen.append(torch.mydev.current_stream()))
        thread.start()
        thread.join()
    assert seen == [torch.mydev.default_stream()]


def test_work_on_a_stream_is_complete_when_the_call_returns():
    x = torch.arange(1 << 16, dtype=torch.float32)
    s = torch.mydev.Stream()
    with torch.mydev.stream(s):
        y = x.to("mydev", non_blocking=True) * 2
        event = s.record_event()
    assert s.query() and event.query()
    other = torch.mydev.Stream()
    other.wait_stream(s)
    other.wait_event(event)
    with torch.mydev.stream(other):
        assert torch.equal(y.cpu(), x * 2)


def test_event_elapsed_time_is_real_milliseconds():
    start = torch.mydev.Event(enable_timing=True)
    end = torch.mydev.Event(enable_timing=True)
    start.record()
    time.sleep(0.05)
    end.record()
    end.synchronize()
    elapsed = start.elapsed_time(end)
    assert elapsed >= 49.0
    assert end.elapsed_time(start) == pytest.approx(-elapsed)
    assert start.query() and end.query()


def test_torch_event_on_mydev_times_too():
    start = torch.Event(device="mydev", enable_timing=True)
    end = torch.Event(device="mydev", enable_timing=True)
    start.record()
    end.record()
    assert start.elapsed_time(end) >= 0
    mixed = torch.mydev.Event(enable_timing=True)
    mixed.record()
    assert mixed.elapsed_time(start) <= 0
    # torch.Event.elapsed_time itself takes exactly torch.Event (so for torch.xpu.Event too)
    with pytest.raises(RuntimeError, match=r"expected other to be a torch\.Event object"):
        start.elapsed_time(mixed)


def test_elapsed_time_errors_match_cuda():
    untimed = torch.mydev.Event()
    timed = torch.mydev.Event(enable_timing=True)
    untimed.record()
    timed.record()
    with pytest.raises(ValueError, match="enable_timing=True"):
        untimed.elapsed_time(timed)
    never = torch.mydev.Event(enable_timing=True)
    with pytest.raises(ValueError, match="must be recorded"):
        timed.elapsed_time(never)
    with pytest.raises(RuntimeError, match=r"torch\.Event"):
        timed.elapsed_time(3)


def test_event_on_another_device_and_waits():
    s1 = torch.mydev.Stream(device=1)
    event = torch.mydev.Event()
    assert event.query()  # not recorded: complete, as on CUDA
    event.record(s1)
    assert event.device == torch.device("mydev:1")
    event.wait(s1)
    event.wait()
    event.synchronize()
    assert isinstance(s1.record_event(), torch.mydev.Event)
    with pytest.raises(NotImplementedError):
        torch.mydev.Event(interprocess=True)


def test_synchronize():
    torch.mydev.synchronize()
    torch.mydev.synchronize("mydev:1")
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.mydev.synchronize(torch.mydev.device_count())


def test_record_stream_has_nothing_to_record_and_runs_natively():
    """FSDP calls ``record_stream``; kernels are synchronous, so there is nothing to record
    (docs/runtime.md). It runs as a mydev kernel, not through the CPU fallback (which has
    no CPU kernel for it)."""
    torch_mydev.reset_fallback_stats()
    t = torch.ones(3, device="mydev")
    t.record_stream(torch.mydev.current_stream())
    t.record_stream(torch.mydev.Stream())
    assert torch_mydev.fallback_stats() == {}
    assert torch.equal(t.cpu(), torch.ones(3))
