"""Streams and events of ``torch.mydev``, named and behaving as ``torch.cuda``'s.

Every mydev kernel runs synchronously on the calling thread, in submission order
(docs/runtime.md): when a call returns, its work is done. A stream therefore only names an
ordering that already holds, and is always complete (``query()`` is True); waits and
synchronizations have nothing left to wait for. An event records the host time at which it
was recorded, so ``elapsed_time`` is the real time between two records. The stream and event
state (current stream per thread and device, stream ids, event timestamps) lives in the
stub's device guard (csrc_stub/runtime/guard.cpp), so ``torch.Stream``, ``torch.Event`` and
``torch.accelerator`` see the same streams as these classes.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import torch

from torch_mydev import _C
from torch_mydev.runtime.devices import DeviceLike, index_of

_DeviceLike = DeviceLike
_index = index_of


def _device(index: int) -> torch.device:
    return torch.device(torch._C._get_privateuse1_backend_name(), index)


class Stream(torch.Stream):
    """A mydev stream (``torch.cuda.Stream``): an in-order queue that is always complete.

    ``Stream(device=None, priority=0)`` makes a new stream on `device` (the current device
    by default); the priority is accepted and orders nothing, since kernels never wait.
    """

    def __new__(cls, device: _DeviceLike = None, priority: int = 0, **kwargs: Any) -> Stream:
        if "stream_id" in kwargs:  # wrapping an existing stream (current_stream, ...)
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=_device(_index(device)), priority=priority)

    def wait_event(self, event: torch.Event) -> None:
        """Make later work on this stream wait for `event`: it is complete already."""
        event.wait(self)

    def wait_stream(self, stream: torch.Stream) -> None:
        """Make later work on this stream wait for `stream`'s work: it is complete already."""
        self.wait_event(stream.record_event())

    def record_event(self, event: torch.Event | None = None) -> Event:
        """Record `event` (a new ``torch.mydev.Event`` when None) on this stream."""
        if event is None:
            event = Event()
        event.record(self)
        return event  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"<torch.mydev.Stream device={self.device} stream_id={self.stream_id}>"


class Event(torch.Event):
    """A mydev event (``torch.cuda.Event``): records the host time when it is recorded.

    ``elapsed_time`` needs ``enable_timing=True`` on both events and both recorded, and
    raises ``ValueError`` otherwise, as CUDA does. Interprocess events are not supported.
    """

    def __new__(
        cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> Event:
        if interprocess:
            raise NotImplementedError("mydev events cannot be shared between processes")
        return super().__new__(
            cls,
            device=_device(_C._current_device()),
            enable_timing=enable_timing,
            blocking=blocking,
        )

    def record(self, stream: torch.Stream | None = None) -> None:
        """Record the event on `stream` (the current stream by default)."""
        super().record(current_stream() if stream is None else stream)

    def wait(self, stream: torch.Stream | None = None) -> None:
        """Make `stream` (the current stream by default) wait for this event: a no-op."""
        super().wait(current_stream() if stream is None else stream)

    def elapsed_time(self, end_event: torch.Event) -> float:
        """Milliseconds from this event's record to `end_event`'s (``torch.cuda.Event``)."""
        return _C._event_elapsed_time(self, end_event)

    def __repr__(self) -> str:
        return f"<torch.mydev.Event device={self.device} event_id={self.event_id}>"


def _wrap(stream: torch.Stream) -> Stream:
    return Stream(
        stream_id=stream.stream_id,
        device_index=stream.device_index,
        device_type=stream.device_type,
    )


def current_stream(device: _DeviceLike = None) -> Stream:
    """The calling thread's current stream on `device` (``torch.cuda.current_stream``)."""
    return _wrap(torch.accelerator.current_stream(_index(device)))


def default_stream(device: _DeviceLike = None) -> Stream:
    """The default stream (id 0) of `device` (``torch.cuda.default_stream``)."""
    current = torch.accelerator.current_stream(_index(device))
    return Stream(stream_id=0, device_index=current.device_index, device_type=current.device_type)


def set_stream(stream: torch.Stream) -> None:
    """Make `stream` current on its device and its device current (``torch.cuda.set_stream``)."""
    if stream is None:
        return
    torch.accelerator.set_stream(stream)


def synchronize(device: _DeviceLike = None) -> None:
    """Wait for every kernel on `device`: they ran synchronously, so this only validates it."""
    torch.accelerator.synchronize(_index(device))


class StreamContext:
    """Context manager selecting a stream (``torch.cuda.StreamContext``).

    Inside it, `stream` is the current stream of its device and that device is current;
    on exit, the previous current streams of both devices and the previous device return.
    ``None`` selects nothing.
    """

    def __init__(self, stream: torch.Stream | None) -> None:
        self.stream = stream
        self.src_prev_stream: Stream | None = None
        self.dst_prev_stream: Stream | None = None

    def __enter__(self) -> None:
        if self.stream is None:
            return
        self.src_prev_stream = current_stream()
        if self.src_prev_stream.device != self.stream.device:
            self.dst_prev_stream = current_stream(self.stream.device)
        set_stream(self.stream)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.stream is None or self.src_prev_stream is None:
            return
        if self.dst_prev_stream is not None:
            set_stream(self.dst_prev_stream)
        set_stream(self.src_prev_stream)


def stream(stream: torch.Stream | None) -> StreamContext:
    """``with torch.mydev.stream(s):`` makes `s` current (``torch.cuda.stream``)."""
    return StreamContext(stream)


def record_stream(self: torch.Tensor, stream: torch.Stream) -> None:
    """``aten::record_stream``: nothing to record. CUDA's caching allocator must not reuse a
    block while another stream's queued work may still use it; mydev kernels run
    synchronously, so no work is ever queued when a block is freed (docs/runtime.md)."""
    if stream.device.type != self.device.type:
        raise RuntimeError(
            f"record_stream: expected a {self.device.type} stream, got one on {stream.device}"
        )
