"""The stub's replay of recorded elementwise call signatures (``_C._replay``, ops/replay.py).

Truth: torch CPU's result of the same call (values bit for bit, dtype, sizes, strides), and
the Python path's own answer where the replay must step aside (it returns None and the
Python path runs: a number, a lazy bit, a storage too small, an unknown signature).
"""

from __future__ import annotations

import pytest
import torch

from tests.support.tensors import same_bits
from torch_mydev import _C
from torch_mydev.ops import replay
from torch_mydev.ops.elementwise import aten as elementwise_aten
from torch_mydev.ops.elementwise import entries as elementwise_entries
from torch_mydev.ops.elementwise import relu as elementwise_relu


def _python_path_forbidden(monkeypatch):
    """Make every Python per-call path raise: a call that still works was replayed."""

    def refuse(*args, **kwargs):
        raise AssertionError("the Python path ran for a recorded call signature")

    monkeypatch.setattr(elementwise_entries, "_signature", refuse)
    from torch_mydev.ops.elementwise import relu as elementwise_relu

    monkeypatch.setattr(elementwise_relu, "_signature", refuse)


def _layouts(dtype: torch.dtype) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 10, generator=g, dtype=torch.float64) * 50
    other = torch.randn(6, 10, generator=g, dtype=torch.float64) * 50
    a, b = base.to(dtype), other.to(dtype)
    nchw_a = (torch.randn(2, 3, 4, 5, generator=g) * 9).to(dtype)
    nchw_b = (torch.randn(2, 3, 4, 5, generator=g) * 9).to(dtype)
    return [
        (a, b),  # contiguous
        (a.t(), b.t()),  # transposed
        (a, b[:1]),  # broadcast (stride 0)
        (a[1:, ::2], b[1:, 1::2]),  # sliced, with offsets and steps
        (nchw_a.contiguous(memory_format=torch.channels_last), nchw_b),  # mixed formats
    ]


BINARY = [
    ("add", lambda x, y: x + y),
    ("sub", lambda x, y: x - y),
    ("mul", lambda x, y: x * y),
    ("lt", lambda x, y: x < y),
    ("eq", lambda x, y: x == y),
    ("ge", lambda x, y: torch.ge(x, y)),
]
UNARY = [("neg", lambda x: -x), ("abs", torch.abs), ("relu", torch.relu)]
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int8]


@pytest.mark.parametrize("dtype", DTYPES)
def test_replayed_calls_equal_cpu(dtype, monkeypatch) -> None:
    """Every layout and op three times: the first call plans, the second records, the third
    is the replay alone."""
    replay.clear()
    cases = []
    for x, y in _layouts(dtype):
        dx, dy = x.to("mydev"), y.to("mydev")
        for name, call in BINARY:
            cases.append((name, lambda f=call, p=dx, q=dy: f(p, q), call(x, y)))
        for name, call in UNARY:
            if name == "neg" or dtype != torch.bool:
                cases.append((name, lambda f=call, p=dx: f(p), call(x)))
    firsts = [make() for _, make, _ in cases]
    for _, make, _ in cases:
        make()
    assert sum(len(t) for t in replay.TABLES.values()) > 0
    _python_path_forbidden(monkeypatch)
    for (name, make, expected), first in zip(cases, firsts, strict=True):
        got = make()
        assert got.device.type == "mydev", name
        assert got.dtype == expected.dtype and got.shape == expected.shape, name
        assert got.stride() == expected.stride(), name
        assert same_bits(got.cpu(), expected), name
        assert same_bits(first.cpu(), expected), name


def test_steps_aside_for_what_it_cannot_check(monkeypatch) -> None:
    """None (the Python path answers) for numbers, lazy bits, unknown signatures and a
    storage smaller than the recorded layout."""
    replay.clear()
    a = torch.arange(12.0).reshape(3, 4).to("mydev")
    b = torch.ones(3, 4, device="mydev")
    a + b
    a + b  # the second call records
    table = replay.TABLES["add"]
    assert replay.replay(table, a, b) is not None
    assert replay.replay(table, a, 2.0) is None  # a number
    assert replay.replay(table, a, b.neg()._neg_view()) is None  # a lazy bit
    assert replay.replay(table, a, b.t()) is None  # not recorded
    view = torch.empty(0, device="mydev")
    view.set_(a.untyped_storage(), 0, (3, 4), (4, 1))
    view.untyped_storage().resize_(16)  # now holds 4 of the 12 elements
    assert replay.replay(table, view, b) is None
    with pytest.raises((IndexError, RuntimeError)):
        view + b  # the Python path refuses to read past the storage


def test_the_stub_replays_before_any_python_kernel(monkeypatch) -> None:
    """A recorded call of a ``replay.NATIVE`` overload never reaches its Python kernel (on
    PrivateUse3, csrc_stub/replay/native_replay.cpp); any other call does."""
    replay.clear()
    x = torch.randn(4, 5).to("mydev")
    y = torch.randn(4, 5).to("mydev").t().contiguous().t()
    calls = {
        "add": lambda: x + y,
        "sub": lambda: x - y,
        "mul": lambda: x * y,
        "ge": lambda: x >= y,
        "neg": lambda: -x,
        "abs": lambda: x.abs(),
        "relu": lambda: x.relu(),
    }
    expected = {name: call() for name, call in calls.items()}
    for call in calls.values():
        call()  # the second call records
    assert {name: _C._native_replay_size(name) for name in calls} == dict.fromkeys(calls, 1)

    kernels = []

    def spy(table, *args):
        kernels.append(table)
        return None

    monkeypatch.setattr(elementwise_aten, "_replay", spy)
    monkeypatch.setattr(replay, "replay", spy)
    monkeypatch.setattr(elementwise_relu, "replay", replay)
    for name, call in calls.items():
        assert same_bits(call().cpu(), expected[name].cpu()), name
    assert kernels == []  # no Python kernel ran
    assert same_bits(torch.add(x, y, alpha=2).cpu(), torch.add(x.cpu(), y.cpu(), alpha=2))
    x + 1.5  # a wrapped Python number: Python's kernel, which tries its replay
    assert len(kernels) == 1
    x + y[:1]  # an unrecorded layout (broadcast)
    assert len(kernels) == 2
    replay.clear()
    assert _C._native_replay_size("add") == 0


def test_output_on_the_operands_device_and_tables_bounded(monkeypatch) -> None:
    replay.clear()
    a = torch.ones(4, device="mydev:1")
    a + a
    a + a
    again = replay.replay(replay.TABLES["add"], a, a)
    assert again.device == torch.device("mydev", 1)
    monkeypatch.setattr(replay, "TABLE_SIZE", 2)
    for n in range(1, 6):
        x = torch.ones(n, device="mydev")
        x * x
        x * x
        assert len(replay.TABLES["mul"]) <= 2


def test_integer_division_by_zero_and_large_layouts_are_not_recorded() -> None:
    replay.clear()
    a = torch.ones(4, dtype=torch.int64, device="mydev")
    torch.div(a, a, rounding_mode="floor")
    torch.div(a, a, rounding_mode="floor")  # div is not replayed: its key holds more
    big = torch.ones(1 << 22, device="mydev")
    big + big
    big + big  # a parallel loop: its cost is the loop, not the call
    assert len(replay.TABLES["add"]) == 0


def test_replay_rejects_a_bad_table() -> None:
    a = torch.ones(2, device="mydev")
    with pytest.raises(TypeError):
        _C._replay([], a, a)


def test_the_record_is_read_by_the_names_the_stub_defines() -> None:
    """The record's one definition is the stub's (``_C.REPLAY_RECORD_FIELDS``): a record
    Python made names every field the C++ reader reads, a record with another field moved
    changes what the stub does, and a tuple short of the fields raises TypeError."""
    assert replay.Record._fields == (*_C.REPLAY_RECORD_FIELDS, "keep")
    replay.clear()
    a = torch.arange(6.0, device="mydev")
    a + a
    a + a
    ((key, record),) = replay.TABLES["add"].items()
    assert isinstance(record, replay.Record) and record.unit == 1
    table = {key: record}
    assert torch.equal(replay.replay(table, a, a).cpu(), torch.arange(6.0) * 2)
    # the C++ reads sizes and strides at their named places: a record laid out as 2x3
    reshaped = record._replace(sizes=(2, 3), strides=(3, 1))
    assert replay.replay({key: reshaped}, a, a).shape == (2, 3)
    # extent0 is the first operand's: more bytes than its storage holds steps aside
    assert replay.replay({key: record._replace(extent0=a.nbytes + 1)}, a, a) is None
    with pytest.raises(TypeError, match="REPLAY_RECORD_FIELDS"):
        replay.replay({key: tuple(record)[:-2]}, a, a)
    with pytest.raises(TypeError, match=r"dtype must be a torch\.dtype"):
        replay.replay({key: record._replace(dtype="float32")}, a, a)


# ---- copies ------------------------------------------------------------------------------


def _copy_python_path_forbidden(monkeypatch):
    from torch_mydev.ops.copy import aten as copy
    from torch_mydev.ops.copy import conversions

    def refuse(*args, **kwargs):
        raise AssertionError("the Python path ran for a recorded copy")

    monkeypatch.setattr(copy, "_signature", refuse)
    monkeypatch.setattr(conversions, "_signature", refuse)


COPY_DTYPES = [torch.float32, torch.float64, torch.float16, torch.int8, torch.bool, torch.complex64]


def _sources(dtype: torch.dtype) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(2, 3, 16, 16, generator=g) * 20).to(dtype)
    return [
        x,  # contiguous: one byte range
        x.transpose(2, 3),  # a transpose
        x.contiguous(memory_format=torch.channels_last),  # a tiny channel dim (planes)
        x[:, 1:, ::2, 3:],  # sliced with steps and an offset
        x[:1, :1].expand(2, 3, 16, 16),  # expanded (stride 0)
    ]


@pytest.mark.parametrize("dtype", COPY_DTYPES)
def test_replayed_copies_equal_cpu(dtype, monkeypatch) -> None:
    """copy_ (mydev <- mydev, mydev <- CPU, CPU <- mydev) and clone / contiguous in both
    memory formats: the third call of each is the stub's replay alone, bit for bit CPU's."""
    replay.clear()
    cases = []
    for x in _sources(dtype):
        if x.stride()[0]:  # the same sizes, strides and values on mydev
            d = torch.empty_strided(x.shape, x.stride(), dtype=dtype, device="mydev").copy_(x)
        else:
            d = x[:1, :1].to("mydev").expand(x.shape)
        dst_dev = torch.empty(x.shape, dtype=dtype, device="mydev")
        dst_cpu = torch.empty(x.shape, dtype=dtype)
        cases += [
            (lambda a=dst_dev, b=d: a.copy_(b), x.contiguous()),
            (lambda a=dst_dev, b=x: a.copy_(b), x.contiguous()),
            (lambda a=dst_cpu, b=d: a.copy_(b), x.contiguous()),
            (lambda b=d: b.contiguous(), x.contiguous()),
            (lambda b=d: b.clone(), x.clone()),
            (
                lambda b=d: b.contiguous(memory_format=torch.channels_last),
                x.contiguous(memory_format=torch.channels_last),
            ),
        ]
    firsts = [make() for make, _ in cases]
    for make, _ in cases:
        make()
    firsts = [f.clone() if f.device.type == "cpu" else f.cpu() for f in firsts]
    assert replay.COPY and replay.NEW_COPY
    _copy_python_path_forbidden(monkeypatch)
    agains = [make() for make, _ in cases]
    monkeypatch.undo()  # .cpu() below is a copy of its own
    for (_, expected), first, got in zip(cases, firsts, agains, strict=True):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        assert got.stride() == expected.stride()
        assert same_bits(got.cpu(), expected) and same_bits(first, expected)


def test_copy_replay_steps_aside(monkeypatch) -> None:
    """One storage on both sides, a lazy bit, a storage too small or an address that is not
    a multiple of the recorded unit: None, and the Python path answers as CPU does."""
    replay.clear()
    x = torch.arange(64.0).reshape(8, 8)
    d = x.to("mydev")
    dst = torch.empty(8, 8, device="mydev")
    dst.copy_(d.t())
    dst.copy_(d.t())  # the second call records
    assert replay.replay_copy(replay.COPY, dst, d.t()) is dst
    assert replay.replay_copy(replay.COPY, d, d.t()) is None  # one storage
    z = torch.randn(8, 8, dtype=torch.complex64)
    dz, dzt = z.to("mydev"), torch.empty(8, 8, dtype=torch.complex64, device="mydev")
    dzt.copy_(dz)
    dzt.copy_(dz)
    assert replay.replay_copy(replay.COPY, dzt, dz.conj()) is None  # a lazy bit
    assert torch.equal(dzt.copy_(dz.conj()).cpu(), z.conj())
    # the same layout one element further on: same key, start no longer a multiple of 8
    pairs = torch.arange(2 * 64.0 + 1).to("mydev")
    src = pairs[:128].view(8, 8, 2).transpose(0, 1)  # 8-byte runs: unit 8
    out = torch.empty(8, 8, 2, device="mydev")
    out.copy_(src)
    out.copy_(src)
    record = replay.COPY.get(next(iter(replay.COPY)), None)
    assert record is not None
    shifted = pairs[1:].as_strided(src.shape, src.stride())
    expected = pairs.cpu()[1:].as_strided(src.shape, src.stride())
    got = replay.replay_copy(replay.COPY, out, shifted)
    assert got is None or torch.equal(out.cpu(), expected)
    assert torch.equal(out.copy_(shifted).cpu(), expected)
