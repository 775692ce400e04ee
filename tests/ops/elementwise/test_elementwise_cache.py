"""The elementwise per-call path: a call signature seen before runs its cached entry.

``tests/ops/elementwise/test_elementwise.py`` checks values against CPU on a first and a
second call;
here: that the second call really skips the general path, and that what an entry cannot
know per call (storages shared in place, a storage shrunk under a view) sends the call back
to the general path.
"""

from __future__ import annotations

import pytest
import torch

from tests.support.tensors import same_bits
from torch_mydev.ops.elementwise import general as elementwise_general


def _general_path_forbidden(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the general path ran for a cached call signature")

    monkeypatch.setattr(elementwise_general, "general_arithmetic", refuse)
    monkeypatch.setattr(elementwise_general, "general_compare", refuse)
    monkeypatch.setattr(elementwise_general, "general_unary", refuse)


@pytest.mark.parametrize(
    "call",
    [
        lambda a, b: a + b,
        lambda a, b: a - b * 3,
        lambda a, b: torch.add(a, b, alpha=-0.25),
        lambda a, b: a * 2.5,
        lambda a, b: a / b,
        lambda a, b: torch.div(a, b, rounding_mode="floor"),
        lambda a, b: torch.floor_divide(a, b),
        lambda a, b: a.clone().add_(b, alpha=2),
        lambda a, b: a.clone().mul_(b.t()),
        lambda a, b: a.t() + b[:1],
        lambda a, b: a < b,
        lambda a, b: a.t() == b,
        lambda a, b: a >= 0.5,
        lambda a, b: -a.t(),
        lambda a, b: b.abs(),
        lambda a, b: a.clone().neg_(),
    ],
    ids=[
        "add",
        "sub-mul",
        "alpha",
        "mul-number",
        "div",
        "floor",
        "floor_divide",
        "add_",
        "mul_",
        "broadcast",
        "lt",
        "eq-transposed",
        "ge-number",
        "neg",
        "abs",
        "neg_",
    ],
)
def test_second_call_uses_the_entry(monkeypatch, call):
    cpu_a, cpu_b = torch.randn(8, 8), torch.randn(8, 8)
    a, b = cpu_a.to("mydev"), cpu_b.to("mydev")
    first = call(a, b)  # general path, then the entry is made
    with monkeypatch.context() as m:
        _general_path_forbidden(m)
        second = call(a, b)
    expected = call(cpu_a, cpu_b)
    for got in (first, second):
        assert got.stride() == expected.stride()
        assert same_bits(got.cpu(), expected)


def test_in_place_on_a_shared_storage_takes_the_general_path():
    """``a.add_(a[...])`` needs the overlap checks the entry does not make per call."""
    base = torch.arange(16.0)
    dev = base.to("mydev")
    x, y = dev[:8].clone(), dev[8:].clone()
    x.add_(y)
    x.add_(y)  # cached
    both = dev.clone()
    with pytest.raises(RuntimeError, match="single memory location"):
        both[1:9].add_(both[:8])  # partial overlap: refused as on CPU
    with pytest.raises(RuntimeError, match="single memory location"):
        both[1:9].add_(both[:8])
    cpu = base.clone()
    same = dev.clone()
    cpu[:8].add_(cpu[8:])
    same[:8].add_(same[8:])  # one storage, disjoint halves: allowed, general path
    assert same_bits(same.cpu(), cpu)


def test_a_shrunk_storage_raises_instead_of_reading_past_it():
    a = torch.randn(64, device="mydev")
    b = torch.randn(64, device="mydev")
    a + b
    a + b
    a.untyped_storage().resize_(16)
    with pytest.raises((IndexError, RuntimeError)):
        a + b
    with pytest.raises((IndexError, RuntimeError)):
        b + a


def test_a_number_is_part_of_the_signature():
    """Each Python number gets its own entry; the sign of a zero and NaN never match."""
    a = torch.tensor([-0.0, 1.0, -2.0], device="mydev")
    cpu = a.cpu()
    for value in (0.0, -0.0, 2, 2.0, True, float("nan"), 0.0, -0.0, 2, 2.0, True):
        for op in (torch.add, torch.mul, torch.div):
            assert same_bits(op(a, value).cpu(), op(cpu, value)), (op, value)


@pytest.mark.parametrize("index", [1, 0])
def test_entry_output_on_the_operands_device(index, monkeypatch) -> None:
    """An entry's new output goes to the device its signature was made on (the key holds
    the device): repeated calls on mydev:1 stay on mydev:1, and on mydev:0 on mydev:0."""
    device = torch.device("mydev", index)
    a = torch.arange(6.0).reshape(2, 3).to(device)
    b = torch.full((2, 3), 2.0).to(device)
    calls = (lambda: a + b, lambda: a * 3, lambda: a < b, lambda: -a, lambda: torch.relu(a - b))
    firsts = [call() for call in calls]
    _general_path_forbidden(monkeypatch)
    for call, first in zip(calls, firsts, strict=True):
        again = call()
        assert again.device == device == first.device
        assert same_bits(again.cpu(), first.cpu())


NUMBER_CALLS = [
    lambda t, v: t * v,
    lambda t, v: t / v,
    lambda t, v: t + v,
    lambda t, v: torch.sub(t, v, alpha=2),
    lambda t, v: t.clone().div_(v),
    lambda t, v: t.clone().mul_(v),
    lambda t, v: torch.div(t, v, rounding_mode="floor"),
    lambda t, v: t < v,
    lambda t, v: t == v,
]


@pytest.mark.parametrize(
    "dtype, values",
    [
        (torch.float32, [2.0, 0.999, -0.0, 3.5e38, float("nan"), 1e-45, 7.25]),
        (torch.float64, [1.0, 1 / 3, -2.5, float("inf")]),
        (torch.float16, [2.0, 0.999, 1 / 3, 70000.0]),  # opmath: float32 number, one rounding
        (torch.bfloat16, [3.0, 0.1, -1e-3]),
        (torch.int32, [2, -3, 7, 2**31 + 5]),  # ints wrap as c10::convert does
        (torch.complex64, [1 + 2j, 0.5j, -3.0 + 0j]),
    ],
)
@pytest.mark.parametrize("call", NUMBER_CALLS)
def test_a_new_number_reuses_its_types_entry(dtype, values, call, monkeypatch) -> None:
    """A Python number not seen before runs through the entry made for its type (its value
    converted per call, nothing stored), bit for bit as CPU computes that call."""
    from torch_mydev.ops.elementwise import entries as elementwise_entries

    x = torch.linspace(-3, 3, 24).reshape(4, 6)
    x = x.to(dtype) if not dtype.is_complex else (x + 1j * x.flip(0)).to(dtype)
    d = x.to("mydev")
    first = values[0]
    outcomes = []
    for v in values:
        try:
            outcomes.append(call(x, v))
        except Exception as error:  # complex ordering, integer division by zero...
            outcomes.append(type(error))
    if isinstance(outcomes[0], type):
        pytest.skip(f"CPU refuses this call for {dtype}: {outcomes[0].__name__}")
    known = set(elementwise_entries._entries._data)
    call(d, first)  # makes the entry of the signature (and of the number's type)
    entries = elementwise_entries._entries._data
    made = [entry for key, entry in entries.items() if key not in known]
    stored = len(elementwise_entries._entries)
    if any(e is not elementwise_entries.GENERAL for e in made):
        _general_path_forbidden(monkeypatch)  # (a call with a cast temporary stays general)
    for v, expected in zip(values, outcomes, strict=True):
        if isinstance(expected, type):
            continue
        got = call(d, v)
        assert got.dtype == expected.dtype and got.stride() == expected.stride()
        if expected.is_floating_point() and expected.isnan().any():
            # NaN payloads: floor division by NaN gives CPU's vector NaN, mydev the quiet
            # one (docs/ops.md); positions and every other element are compared
            nan = expected.isnan()
            assert torch.equal(got.cpu().isnan(), nan)
            assert same_bits(got.cpu()[~nan], expected[~nan]), v
            continue
        assert same_bits(got.cpu(), expected), (v, got.cpu(), expected)
    assert len(elementwise_entries._entries) == stored


_WHERE_DTYPES = [torch.float64, torch.float32, torch.bfloat16, torch.bool, torch.int8]


@pytest.mark.parametrize("dtype", _WHERE_DTYPES, ids=str)
@pytest.mark.parametrize(
    "layout",
    ["broadcast scalar", "transposed", "channels_last beside a slice"],
)
def test_a_repeated_where_runs_its_entry_like_cpu(dtype, layout, monkeypatch) -> None:
    """``where`` of three mydev tensors: the first call plans (``general_where``), the
    repeats run the signature's entry (the general path is forbidden then) with CPU's
    bits, sizes and strides. A masked attention score (a 0-dim mask value) is the case
    real models make every step."""
    from torch_mydev.ops.elementwise import aten as elementwise_aten

    g = torch.Generator().manual_seed(0)
    a = (torch.randn(2, 4, 8, 8, generator=g) * 5).to(dtype)
    mask = torch.randn(1, 1, 8, 8, generator=g) > 0
    if layout == "broadcast scalar":
        cond, x, y = mask, a, torch.full([], 3, dtype=dtype)
    elif layout == "transposed":
        cond, x, y = mask.expand(2, 4, 8, 8).transpose(2, 3), a.transpose(2, 3), a[0:1]
    else:
        cond, x, y = mask, a.contiguous(memory_format=torch.channels_last), a[:, :1]
    expected = torch.where(cond, x, y)
    on_mydev = [t.to("mydev") for t in (cond, x, y)]
    torch.where(*on_mydev)  # the first call: the general path, then the entry
    monkeypatch.setattr(elementwise_aten, "general_where", _refuse_where)
    for _ in range(2):
        got = torch.where(*on_mydev)
        assert got.device.type == "mydev"
        assert got.stride() == expected.stride() and got.dtype == expected.dtype
        assert same_bits(got.cpu(), expected)


def _refuse_where(*args, **kwargs):
    raise AssertionError("the general path ran for a cached where signature")


@pytest.mark.parametrize("op", ["add_", "mul_", "sub_"])
def test_self_with_itself_in_place_runs_its_entry_like_cpu(op, monkeypatch) -> None:
    """``x.add_(x, alpha=...)``: the other operand is ``self`` (full overlap, allowed), so a
    repeat runs the entry; a view of ``self``'s storage is still refused per call."""
    kwargs = {} if op == "mul_" else {"alpha": 0.5}
    cpu = torch.linspace(-2, 2, 48).reshape(6, 8)
    mydev = cpu.to("mydev")
    getattr(cpu, op)(cpu, **kwargs)
    getattr(mydev, op)(mydev, **kwargs)  # the first call: the general path
    _general_path_forbidden(monkeypatch)
    for _ in range(2):
        getattr(cpu, op)(cpu, **kwargs)
        getattr(mydev, op)(mydev, **kwargs)
        assert same_bits(mydev.cpu(), cpu)
    monkeypatch.undo()
    for t in (cpu, mydev):  # two contiguous views of one storage, partly overlapping
        flat = t.view(-1)
        with pytest.raises(RuntimeError, match="unsupported operation"):
            getattr(flat[1:], op)(flat[:-1], **kwargs)


_NUMBER_FIRST = {
    "1 - x (rsub)": lambda x, v: v - x,
    "sub alpha": lambda x, v: torch.sub(v, x, alpha=2),
    "add": lambda x, v: torch.add(v, x),
    "mul": lambda x, v: torch.mul(v, x),
    "div": lambda x, v: torch.div(v, x),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.int16,
                                   torch.complex64, torch.bfloat16], ids=str)  # fmt: skip
@pytest.mark.parametrize("call", list(_NUMBER_FIRST))
def test_a_number_first_repeats_through_its_entry_like_cpu(dtype, call, monkeypatch) -> None:
    """``1.0 - mask`` reaches ``sub`` with the number first (``rsub``): after the first
    call, repeats (the same value and new ones) run the signature's entry with CPU's bits;
    bfloat16 (CPU reads only a second operand's number apart) stays on the general path."""
    fn = _NUMBER_FIRST[call]
    x = torch.linspace(1, 7, 24).reshape(4, 6).to(dtype)
    values = [1, 3] if not (dtype.is_floating_point or dtype.is_complex) else [1.0, 2.5, -0.75]
    if call == "div" and not (dtype.is_floating_point or dtype.is_complex):
        values = [1.0, 2.5]  # true division of an integer tensor: a cast, the general path
    d = x.to("mydev")
    fn(d, values[0])  # the first call: the general path
    if dtype != torch.bfloat16 and not (call == "div" and not dtype.is_floating_point
                                        and not dtype.is_complex):  # fmt: skip
        _general_path_forbidden(monkeypatch)
    for v in values:
        expected, got = fn(x, v), fn(d, v)
        assert got.dtype == expected.dtype and got.stride() == expected.stride()
        assert same_bits(got.cpu(), expected), (v, got.cpu(), expected)
