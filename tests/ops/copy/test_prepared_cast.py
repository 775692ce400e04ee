"""Small contiguous casts run their prepared form (``kernels.copy.prepared_cast``), and the
stub replays those between float16, bfloat16, float32 and float64 into a new tensor.

Truth: torch CPU's cast of the same bytes, bit for bit, for every pair of dtypes CPU casts;
the path is checked too (the copy's cached entry holds a ``PreparedCast``; a replayed call
never enters Python), so a change that quietly sent these casts back to ``copy_strided``
or to Python would show.
"""

from __future__ import annotations

import math
import threading

import pytest
import torch

from tests.support.dtypes import COPY_DTYPES, FLOATS
from tests.support.tensors import same_bits, values
from torch_mydev import _C
from torch_mydev.kernels.copy.prepared_cast import SERIAL_CAST_MAX, PreparedCast
from torch_mydev.kernels.dtypes import layout_of
from torch_mydev.kernels.parallel import threads
from torch_mydev.ops import replay
from torch_mydev.ops.copy import conversions
from torch_mydev.ops.copy.aten import copy_entry

UNSIGNED = (torch.uint8, torch.uint16, torch.uint32, torch.uint64)
# Float values whose casts between float types are defined (C++ leaves a float out of an
# integer's range undefined, and CPU's loops disagree there: ``values`` stays in range).
SPECIALS = (math.nan, math.inf, -math.inf, -0.0, 1e-40, 65520.0, 3.4e38, 1e300, 1 / 3)


def _source(src: torch.dtype, dst: torch.dtype) -> torch.Tensor:
    """40 CPU values of ``src`` for a cast to ``dst``: in range for an integer ``dst``; with
    NaN, infinities, a subnormal and overflowing values when both are float types."""
    low = 0.0 if dst in UNSIGNED else -100.0
    x = values(40, src, seed=COPY_DTYPES.index(src), low=low)
    floats = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    if src in floats and (dst in floats or dst.is_complex):
        x[1 : 1 + len(SPECIALS)] = torch.tensor(SPECIALS, dtype=torch.float64).to(src)
    return x


def _same(got: torch.Tensor, expected: torch.Tensor) -> bool:
    """Bit-exact, except a NaN's sign and payload (docs/ops.md: torch's own vector and
    scalar bfloat16 conversions write different NaNs); which elements are NaN must agree."""
    if not (expected.is_floating_point() or expected.is_complex()) or expected.itemsize == 1:
        return same_bits(got, expected)
    nan = expected.isnan()
    if not torch.equal(got.isnan(), nan):
        return False
    zero = torch.zeros((), dtype=expected.dtype)
    return same_bits(torch.where(nan, zero, got), torch.where(nan, zero, expected))


@pytest.mark.parametrize("src_dtype", COPY_DTYPES, ids=str)
def test_small_contiguous_casts_equal_cpu(src_dtype) -> None:
    for dst_dtype in COPY_DTYPES:
        if dst_dtype == src_dtype:
            continue
        source = _source(src_dtype, dst_dtype)
        on_mydev = source.to("mydev")
        # one with a storage offset, made on mydev itself
        for cpu, mine in ((source.view(8, 5), on_mydev.view(8, 5)), (source[3:], on_mydev[3:])):
            expected = cpu.to(dst_dtype)
            got = mine.to(dst_dtype)
            assert got.dtype == dst_dtype and got.stride() == expected.stride()
            assert _same(got.cpu(), expected), (src_dtype, dst_dtype)
            out = torch.empty_like(mine, dtype=dst_dtype)
            assert _same(out.copy_(mine).cpu(), expected), (src_dtype, dst_dtype)
            prepared = copy_entry(out, mine).prepared
            if layout_of(src_dtype).kind in ("bool", "int", "reduced", "float", "complex"):
                assert isinstance(prepared, PreparedCast), (src_dtype, dst_dtype)


def test_threads_cast_at_once_with_their_own_buffers() -> None:
    """Eight threads released together cast through one prepared entry (its converters'
    scratch buffers are per thread): each gets CPU's bits."""
    cpu = torch.randn(4000, dtype=torch.float64) * 1e5
    mine = cpu.to("mydev")
    expected = cpu.to(torch.float16)
    mine.half()
    barrier = threading.Barrier(8)
    results: list[bool] = []

    def run() -> None:
        barrier.wait()
        results.extend(same_bits(mine.half().cpu(), expected) for _ in range(30))

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 240 and all(results)


# ---- the stub's replay of _to_copy (ops/replay.py ``record_to_copy``) ----------------------

# Layouts whose cast is one contiguous run on both sides: contiguous, with a storage offset,
# and dense but not contiguous (channels_last, kept by preserve_format).
RUN_LAYOUTS = (
    lambda t: t.view(8, 5),
    lambda t: t[3:],
    lambda t: t[:36].view(1, 4, 3, 3).contiguous(memory_format=torch.channels_last),
)


@pytest.mark.parametrize(
    "src_dtype", (*FLOATS, torch.bool, torch.uint8, torch.int32, torch.int64), ids=str
)
def test_casts_to_floats_replayed_in_the_stub_equal_cpu(src_dtype, monkeypatch) -> None:
    """The third ``.to(dtype)`` of a layout to a float type runs in the stub, never in
    Python, with CPU's layout and bits (NaN payloads aside, as above), NaN, infinities, a
    subnormal and values out of float16's range among them."""
    replay.clear()
    cases = []
    for dst_dtype in FLOATS:
        if dst_dtype == src_dtype:
            continue
        source = _source(src_dtype, dst_dtype)
        on_mydev = source.to("mydev")
        for layout in RUN_LAYOUTS:
            for _ in range(2):  # the second call records
                layout(on_mydev).to(dst_dtype)
            cases.append((layout(source), layout(on_mydev), dst_dtype))
    assert _C._native_replay_size("_to_copy") == len(cases)

    def refuse(*args, **kwargs):
        raise AssertionError("the Python path ran for a recorded _to_copy")

    monkeypatch.setattr(conversions, "_signature", refuse)
    pairs = [(cpu.to(dtype), mine.to(dtype)) for cpu, mine, dtype in cases]
    monkeypatch.undo()  # .cpu() below is a _to_copy to CPU, which Python runs
    for expected, got in pairs:
        assert got.device.type == "mydev" and got.dtype == expected.dtype
        assert got.shape == expected.shape and got.stride() == expected.stride()
        assert _same(got.cpu(), expected), (src_dtype, expected.dtype)


def test_a_to_copy_the_stub_does_not_replay_runs_in_python() -> None:
    """Another device, a layout that is no one run, a cast to an integer type: Python
    serves them (and equals CPU); the key holds the dtype and the memory format."""
    replay.clear()
    cpu = torch.randn(6, 4, dtype=torch.float64) * 100
    mine = cpu.to("mydev")
    for _ in range(3):
        to_cpu = mine.to("cpu", torch.float32)
        sliced = mine[:, ::2].to(torch.float32)  # not dense: a contiguous result
        ints = mine.to(torch.int32)
    assert _C._native_replay_size("_to_copy") == 0
    assert to_cpu.device.type == "cpu" and same_bits(to_cpu, cpu.to(torch.float32))
    assert same_bits(sliced.cpu(), cpu[:, ::2].to(torch.float32))
    assert same_bits(ints.cpu(), cpu.to(torch.int32))
    nhwc = cpu.view(1, 2, 3, 4).contiguous(memory_format=torch.channels_last)
    mine = nhwc.to("mydev")
    for dtype, memory_format in [(torch.float32, torch.preserve_format),
                                 (torch.float16, torch.preserve_format),
                                 (torch.float32, torch.contiguous_format)]:  # fmt: skip
        for _ in range(3):
            got = mine.to(dtype, memory_format=memory_format)
        expected = nhwc.to(dtype, memory_format=memory_format)
        assert got.stride() == expected.stride() and same_bits(got.cpu(), expected)
    # contiguous_format is no one run here (the strides change): two records, not three
    assert _C._native_replay_size("_to_copy") == 2


LONG_CASTS = (
    (torch.float16, torch.float32),
    (torch.float32, torch.bfloat16),
    (torch.bool, torch.float16),
    (torch.int64, torch.float64),
    (torch.float64, torch.complex64),  # prepared, not replayed
)


@pytest.mark.parametrize(("src_dtype", "dst_dtype"), LONG_CASTS, ids=str)
def test_casts_of_many_chunks_equal_cpu(src_dtype, dst_dtype, monkeypatch) -> None:
    """A run past one chunk (``CAST_CHUNK`` in Python, ``REPLAY_CAST_CHUNK`` in the stub's
    entry) and past ``PARALLEL_MIN_NUMEL``, up to ``SERIAL_CAST_MAX``: the prepared form
    and the replay cast it chunk by chunk, with CPU's bits."""
    replay.clear()
    numel = 100_003  # an odd tail in every chunking
    cpu = _source(src_dtype, dst_dtype).repeat(numel // 40 + 1)[:numel]  # specials throughout
    mine = cpu.to("mydev")
    expected = cpu.to(dst_dtype)
    out = torch.empty(numel, dtype=dst_dtype, device="mydev")
    assert isinstance(copy_entry(out, mine).prepared, PreparedCast)
    for _ in range(2):  # the second call records (a float destination)
        assert _same(mine.to(dst_dtype).cpu(), expected)
    replayed = _C._native_replay_size("_to_copy") == 1
    assert replayed == (not dst_dtype.is_complex)

    def refuse(*args, **kwargs):
        raise AssertionError("the Python path ran for a recorded _to_copy")

    if replayed:
        monkeypatch.setattr(conversions, "_signature", refuse)
    got = mine.to(dst_dtype)
    monkeypatch.undo()
    assert _same(got.cpu(), expected)


@pytest.mark.parametrize(("src_dtype", "dst_dtype"), LONG_CASTS[:3], ids=str)
def test_casts_past_the_serial_size_run_on_numbas_threads(src_dtype, dst_dtype) -> None:
    """Past ``SERIAL_CAST_MAX`` a cast with a C entry runs it over runs of its elements on
    numba's threads (one parallel region), with CPU's bits."""
    numel = SERIAL_CAST_MAX + 12_345
    cpu = _source(src_dtype, dst_dtype).repeat(numel // 40 + 1)[:numel]
    mine = cpu.to("mydev")
    out = torch.empty(numel, dtype=dst_dtype, device="mydev")
    assert isinstance(copy_entry(out, mine).prepared, PreparedCast)
    before = threads.regions()
    got = mine.to(dst_dtype)
    if threads.count() >= 2:  # one thread: the serial chunks run it (the same bytes)
        assert threads.regions() == before + 1
    assert _same(got.cpu(), cpu.to(dst_dtype))
