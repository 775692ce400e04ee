"""The stub's C++ replay of in-place calls and calls with a Python number
(csrc_stub/replay/native_replay.cpp, ``ops/replay.py NATIVE``).

Truth: torch CPU's result of the same call (values bit for bit, dtype, sizes, strides), for
a number whose value changes between calls (the key holds its type, never its value), and
the Python path where the replay must step aside.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.ops.test_replay import _python_path_forbidden
from tests.support.dtypes import DEVICE_DTYPES
from tests.support.tensors import same_bits, same_bits_but_nan_bits
from torch_mydev import _C
from torch_mydev.kernels.elementwise import kernel as kernels
from torch_mydev.ops import replay

_INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
_NUMBERS = st.one_of(
    st.booleans(),
    _INT64,
    st.floats(allow_nan=True, allow_infinity=True),
    st.complex_numbers(allow_nan=True, allow_infinity=True),
)


@given(value=_NUMBERS, dtype=st.sampled_from(DEVICE_DTYPES))
def test_a_number_converts_as_python_converts_it(value, dtype) -> None:
    """The stub converts each call's number itself (``c10::convert``); its bytes are the
    ones Python's entries hold (``kernels.scalar_bytes``, checked against torch in
    tests/kernels/elementwise/test_scalar_bytes.py)."""
    assert _C._native_number_bytes(value, dtype) == kernels.scalar_bytes(value, dtype).tobytes()


def _operands(dtype: torch.dtype, device: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The operand pairs, as views made on ``device`` itself (``.to()`` of a view that is
    not dense would give a contiguous copy)."""
    g = torch.Generator().manual_seed(3)
    a = (torch.randn(6, 10, generator=g, dtype=torch.float64) * 20).to(dtype).to(device)
    b = (torch.randn(6, 10, generator=g, dtype=torch.float64) * 20 + 0.5).to(dtype).to(device)
    c = (torch.randn(2, 3, 4, 5, generator=g) * 9).to(dtype).to(device)
    return [
        (a, b),  # contiguous
        (a.t(), b.t()),  # transposed
        (a, b[:1]),  # broadcast (stride 0)
        (a[1:, ::2], b[1:, 1::2]),  # sliced, with offsets and steps
        (c.contiguous(memory_format=torch.channels_last), c.flip(1)),  # mixed formats
    ]


# (name, call on (x, y, number)); in-place calls write x, which each call gets afresh.
INPLACE = [
    ("add_", lambda x, y, n: x.add_(y)),
    ("sub_", lambda x, y, n: x.sub_(y)),
    ("mul_", lambda x, y, n: x.mul_(y)),
    ("div_", lambda x, y, n: x.div_(y)),
    ("add_", lambda x, y, n: x.add_(x)),
    ("mul_", lambda x, y, n: x.mul_(n)),
    ("add_", lambda x, y, n: x.add_(n)),
    ("div_", lambda x, y, n: x.div_(n)),
    ("relu_", lambda x, y, n: x.relu_()),
    ("neg_", lambda x, y, n: x.neg_()),
]
WITH_NUMBER = [
    ("mul", lambda x, y, n: x * n),
    ("add", lambda x, y, n: x + n),
    ("sub", lambda x, y, n: n - x),  # rsub: the number first
    ("div", lambda x, y, n: x / n),
    ("div", lambda x, y, n: x / y),
    ("lt", lambda x, y, n: x < n),
    ("eq", lambda x, y, n: torch.eq(x, n)),
    ("mul", lambda x, y, n: torch.mul(x, n)),
]
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64]


def _cases(dtype: torch.dtype, numbers: list) -> list:
    """(name, run on mydev, run on CPU) for every layout, op and number."""
    cases = []
    for (x, y), (dx, dy) in zip(_operands(dtype, "cpu"), _operands(dtype, "mydev"), strict=True):
        for name, call in INPLACE:
            if name == "relu_" and dtype.is_complex:
                continue
            for n in numbers:
                cases.append((
                    name,
                    lambda f=call, p=dx, q=dy, n=n: f(p.clone(), q, n),
                    lambda f=call, p=x, q=y, n=n: f(p.clone(), q, n),
                ))  # fmt: skip
        for name, call in WITH_NUMBER:
            if name == "lt" and dtype.is_complex:
                continue
            if name == "sub" and dtype in (torch.float16, torch.bfloat16):
                continue  # a first number in float16/bfloat16 takes the general path always
                # (CPU's loop treats only a second operand's number apart: entries.py)
            for n in numbers:
                cases.append((
                    name,
                    lambda f=call, p=dx, q=dy, n=n: f(p, q, n),
                    lambda f=call, p=x, q=y, n=n: f(p, q, n),
                ))  # fmt: skip
    return cases


@pytest.mark.parametrize("dtype", FLOATS)
def test_inplace_and_number_calls_replayed_equal_cpu(dtype, monkeypatch) -> None:
    """Each call twice with the number 0.75 (the second records), then with numbers never
    seen, with the Python path forbidden: the stub alone answers, and equals CPU."""
    replay.clear()
    cases = _cases(dtype, [0.75])
    for _, mine, _ in cases:
        mine()
        mine()
    _python_path_forbidden(monkeypatch)
    for number in (0.75, -3.0e5, 1 / 3, math.inf):
        for name, mine, cpu in _cases(dtype, [number]):
            got, expected = mine(), cpu()
            assert got.device.type == "mydev", name
            assert got.dtype == expected.dtype and got.shape == expected.shape, name
            assert got.stride() == expected.stride(), name
            if dtype.is_complex:  # docs/ops.md: zero signs, and mul/div's rounding, differ
                torch.testing.assert_close(got.cpu(), expected, rtol=4e-7, atol=0, equal_nan=True)
            else:
                assert same_bits(got.cpu(), expected), (name, number)


def test_inplace_returns_self_and_integer_numbers_keep_their_type(monkeypatch) -> None:
    """In place, the result is ``self`` itself; an int number on an int tensor stays in its
    dtype, wrapping as torch does."""
    replay.clear()
    x = torch.arange(-6, 6, dtype=torch.int8).to("mydev")
    for _ in range(2):
        y = x.clone()
        assert y.add_(3) is y
        x * 1000
    _python_path_forbidden(monkeypatch)
    y = x.clone()
    assert y.add_(127) is y
    assert same_bits(y.cpu(), x.cpu().add_(127))
    assert same_bits((x * 300).cpu(), x.cpu() * 300)


def test_the_default_dtype_is_part_of_the_key() -> None:
    """An integer tensor times a float gives the default dtype: nothing made under one
    default answers under another (the stub's key holds the default dtype)."""
    replay.clear()
    x = torch.arange(6).to("mydev")
    for _ in range(3):
        assert (x * 0.5).dtype == torch.float32
        assert (x / x).dtype == torch.float32
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        assert same_bits((x * 0.1).cpu(), torch.arange(6) * 0.1)
        assert same_bits((x / 7).cpu(), torch.arange(6) / 7)
        assert (x * 0.1).dtype == torch.float64
    finally:
        torch.set_default_dtype(previous)
    assert (x * 0.5).dtype == torch.float32


def test_steps_aside_for_operands_in_self() -> None:
    """An in-place operand that is another view of ``self``'s storage goes to the Python
    path: CPU's answers and errors."""
    replay.clear()
    base_cpu = torch.arange(12.0)
    base = base_cpu.to("mydev")
    for _ in range(3):
        a, b = base.clone(), base.clone()
        a[:6].add_(b[6:])
        a[:6].add_(a[6:])  # one storage, no overlap
    expected = base_cpu.clone()
    expected[:6].add_(base_cpu[6:])
    expected[:6].add_(expected[6:])
    assert same_bits(a.cpu(), expected)
    overlap = base.clone()
    with pytest.raises(RuntimeError, match="memory location"):
        overlap[:8].add_(overlap[4:])  # partial overlap: refused as CPU refuses it
    x = torch.ones(4, device="mydev")
    for alpha in (2, 3, 0.5):
        assert same_bits(x.clone().add_(x, alpha=alpha).cpu(), torch.ones(4).add_(1, alpha=alpha))


_ALPHA_CALLS = {
    "add": lambda x, y, alpha: torch.add(x, y, alpha=alpha),
    "sub": lambda x, y, alpha: torch.sub(x, y, alpha=alpha),
    "add_": lambda x, y, alpha: x.clone().add_(y, alpha=alpha),
    "sub_": lambda x, y, alpha: x.clone().sub_(y.t(), alpha=alpha),
}
_ALPHA_DTYPES = (*FLOATS, torch.complex128, torch.uint8, torch.int8, torch.int16, torch.int32,
                 torch.int64)  # fmt: skip


@given(
    dtype=st.sampled_from(_ALPHA_DTYPES),
    alpha=st.one_of(
        st.integers(-(1 << 63) + 1, (1 << 63) - 1),
        st.integers(-300, 300),
        st.floats(allow_nan=True, allow_infinity=True),
        st.floats(-1e-3, 1e-3),
        st.booleans(),
    ),
)
def test_alpha_is_written_per_call_and_equals_cpu(dtype, alpha) -> None:
    """add's and sub's ``alpha`` is not in the stub's key: a record made with alpha 1 answers
    every other int alpha, and float alpha of a floating dtype, writing its compute value per
    call (``alpha_bytes``: ``Scalar::to``, then widened) with the Python path forbidden, and
    equals CPU bit for bit, but for a NaN's sign and payload (docs/ops.md: a NaN alpha of a
    complex dtype comes out with the sign torch's scalar loop gives, where its vectorised
    product flips it). What CPU refuses (an alpha out of the dtype's range, a float alpha
    for integers, a bool alpha) the stub leaves to Python, which raises as CPU does."""
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(5, 5, generator=g, dtype=torch.float64) * 20).to(dtype)
    y = (torch.randn(5, 5, generator=g, dtype=torch.float64) * 20).to(dtype)
    dx, dy = x.to("mydev"), y.to("mydev")
    replay.clear()
    for call in _ALPHA_CALLS.values():
        call(dx, dy, 1)
        call(dx, dy, 1)  # recorded
    for name, call in _ALPHA_CALLS.items():
        try:
            expected = call(x, y, alpha)
        except Exception as error:  # the type is what is compared
            with pytest.raises(type(error)):
                call(dx, dy, alpha)
            continue
        with pytest.MonkeyPatch.context() as patch:
            _python_path_forbidden(patch)
            got = call(dx, dy, alpha)
        assert got.dtype == expected.dtype and got.stride() == expected.stride(), name
        same = same_bits_but_nan_bits if dtype.is_complex else same_bits
        assert same(got.cpu(), expected), (name, alpha)


def test_a_storage_too_small_still_raises() -> None:
    replay.clear()
    a = torch.arange(12.0).reshape(3, 4).to("mydev")
    for _ in range(3):
        a.clone().mul_(2.0)
    view = torch.empty(0, device="mydev")
    view.set_(a.clone().untyped_storage(), 0, (3, 4), (4, 1))
    view.untyped_storage().resize_(16)  # now holds 4 of the 12 elements
    with pytest.raises((IndexError, RuntimeError)):
        view.mul_(2.0)


# ---- fill_ and zero_ --------------------------------------------------------------------

_FILL_VALUES = st.one_of(
    st.booleans(),
    st.integers(-(1 << 40), 1 << 40),
    st.floats(allow_nan=True, allow_infinity=True, width=64),
)


@given(dtype=st.sampled_from(DEVICE_DTYPES), values=st.lists(_FILL_VALUES, min_size=1, max_size=4))
def test_fills_replayed_equal_cpu_and_overflow_raises_as_cpu(dtype, values) -> None:
    """fill_ and zero_ of a small tensor: recorded on the second call, then the stub converts
    each value with ``Scalar::to``'s overflow check and runs the copy (never Python's
    ``checked_scalar``); a value CPU refuses raises CPU's error through Python's path."""
    replay.clear()
    mine = torch.empty(12, dtype=dtype, device="mydev")[2:].view(2, 5)  # an offset
    cpu = torch.empty(2, 5, dtype=dtype)
    for value in (1, 1, 2.0, 2.0, True, True):  # each number type recorded
        mine.fill_(value)
    mine.zero_()
    mine.zero_()
    for value in values:
        try:
            expected = cpu.fill_(value).clone()
        except RuntimeError as error:
            with pytest.raises(RuntimeError, match="without overflow"):
                mine.fill_(value)
            assert "without overflow" in str(error)
            continue
        assert mine.fill_(value) is mine
        assert same_bits(mine.cpu(), expected), value
    assert same_bits(mine.zero_().cpu(), cpu.zero_())


def test_recorded_fills_never_enter_python(monkeypatch) -> None:
    from torch_mydev.ops.elementwise import aten as elementwise_aten

    replay.clear()
    x = torch.empty(2, 3, 4, device="mydev")
    for _ in range(2):
        x.fill_(0.5)
        x.zero_()
        x.fill_(7)
    assert _C._native_replay_size("fill_") == 2  # by the value's type: float, int

    def refuse(*args, **kwargs):
        raise AssertionError("the Python path ran for a recorded fill")

    monkeypatch.setattr(elementwise_aten, "checked_scalar", refuse)
    for value in (0.25, -3, 1e30):
        assert same_bits(x.fill_(value).cpu(), torch.full((2, 3, 4), value, dtype=torch.float32))
    assert same_bits(x.zero_().cpu(), torch.zeros(2, 3, 4))
    cow = x._lazy_clone()
    with pytest.raises(AssertionError):  # copy-on-write: Python materialises it first
        cow.fill_(1.0)


# ---- reductions -------------------------------------------------------------------------

REDUCTIONS = [
    ("r.sum", lambda t: t.sum(-1, keepdim=True)),
    ("r.sum", lambda t: t.sum(0)),
    ("r.sum", lambda t: t.sum()),
    ("r.sum", lambda t: t.sum((0, 2))),
    ("r.mean", lambda t: t.mean(1)),
    ("r.mean", lambda t: t.mean()),
    ("r.amax", lambda t: t.amax(-1)),
    ("r.amin", lambda t: t.amin((0, 1), keepdim=True)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_reductions_replayed_equal_cpu(dtype, monkeypatch) -> None:
    """The exact float reductions: recorded on a signature's second call, then run by the
    stub alone (float32/float64: the Python per-call path forbidden), CPU's bits and
    layout; transposed, sliced and broadcast inputs. float16/bfloat16 sums through a
    float32 buffer keep the general path; their answers are checked either way."""
    replay.clear()
    g = torch.Generator().manual_seed(5)
    base = (torch.randn(4, 6, 10, generator=g) * 30).to(dtype)
    views = (
        lambda t: t,
        lambda t: t.transpose(0, 2),
        lambda t: t[1:, ::2, 3:],
        lambda t: t[:1].expand(4, 6, 10),
    )
    cases = []
    for view in views:  # made on each device (.to() of a sliced view would copy it dense)
        cpu, mine = view(base), view(base.to("mydev"))
        assert mine.stride() == cpu.stride()
        for table, call in REDUCTIONS:
            if table in ("r.amax", "r.amin") and dtype in (torch.float16, torch.bfloat16):
                continue  # their exact replica is float32/float64's (docs/reductions.md)
            cases.append((table, call, mine, cpu))
    for _, call, mine, _ in cases:
        call(mine)
        call(mine)
    tables = {table for table, *_ in cases}
    assert any(_C._native_replay_size(table) > 0 for table in tables)
    if dtype in (torch.float32, torch.float64):
        assert all(_C._native_replay_size(table) > 0 for table in tables)
        from torch_mydev.ops.reduction import entries as reduction_entries

        def refuse(*args, **kwargs):
            raise AssertionError("the Python path ran for a recorded reduction")

        monkeypatch.setattr(reduction_entries, "serve_one", refuse)
    for table, call, mine, cpu in cases:
        got, expected = call(mine), call(cpu)
        assert got.device.type == "mydev", table
        assert got.dtype == expected.dtype and got.shape == expected.shape, table
        assert got.stride() == expected.stride(), table
        assert same_bits(got.cpu(), expected), table


def test_a_reductions_key_holds_its_arguments_and_the_thread_count() -> None:
    """keepdim, dtype= and the dims (None apart from ()) each key their own record, and so
    does torch's thread count (the plan may differ): the answers stay CPU's."""
    replay.clear()
    x = torch.randn(3, 5)
    mine = x.to("mydev")
    for _ in range(2):
        mine.sum(1)
        mine.sum(1, keepdim=True)
        mine.sum(1, dtype=torch.float32)  # dtype= given: its own key
        mine.sum()
        mine.sum(())
    assert _C._native_replay_size("r.sum") == 5
    assert same_bits(mine.sum(1, keepdim=True).cpu(), x.sum(1, keepdim=True))
    assert same_bits(mine.sum(()).cpu(), x.sum(()))
    threads = torch.get_num_threads()
    torch.set_num_threads(1 if threads > 1 else 2)
    try:
        assert same_bits(mine.sum(1).cpu(), x.sum(1))
        assert same_bits(mine.sum(1).cpu(), x.sum(1))
        assert _C._native_replay_size("r.sum") == 6
    finally:
        torch.set_num_threads(threads)


# ---- clone --------------------------------------------------------------------------------

CLONE_FORMATS = [None, torch.preserve_format, torch.contiguous_format, torch.channels_last]


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.int64, torch.bool, torch.complex64]
)
def test_clones_replayed_equal_cpu_and_never_enter_python(dtype, monkeypatch) -> None:
    """A clone's third call of a layout and memory format runs in the stub (its key holds
    the format: preserve and contiguous of one transposed tensor differ), with CPU's
    layout and bits."""
    from torch_mydev.ops.copy import conversions

    replay.clear()
    g = torch.Generator().manual_seed(5)
    base = (torch.randn(2, 3, 4, 6, generator=g) * 9).to(dtype)
    views = [
        lambda t: t,
        lambda t: t.transpose(1, 2),  # attention's [B, H, L, E] -> [B, L, H, E]
        lambda t: t[:, :, :2].expand(2, 3, 2, 6) if t.dim() else t,
        lambda t: t[:, :, None, :1].expand(2, 3, 2, 1, 6),  # repeat_kv's expand
        lambda t: t[1:, ::2, 1:],  # sliced, with an offset and steps
        lambda t: t.contiguous(memory_format=torch.channels_last),
    ]
    device = base.to("mydev")
    for view in views:
        for memory_format in CLONE_FORMATS:
            if memory_format is torch.channels_last and view(base).dim() != 4:
                continue
            for _ in range(2):  # the second call records
                device_view = view(device)
                device_view.clone(memory_format=memory_format)
    recorded = _C._native_replay_size("clone")
    assert recorded > 10

    def refuse(*args, **kwargs):
        raise AssertionError("the Python path ran for a recorded clone")

    monkeypatch.setattr(replay, "replay_copy", refuse)
    monkeypatch.setattr(conversions, "_signature", refuse)
    pairs = [
        (view(base).clone(memory_format=fmt), view(device).clone(memory_format=fmt))
        for view in views
        for fmt in CLONE_FORMATS
        if fmt is not torch.channels_last or view(base).dim() == 4
    ]
    monkeypatch.undo()  # .cpu() below is a _to_copy, which the patch would refuse
    for expected, result in pairs:
        assert result.stride() == expected.stride() and result.shape == expected.shape
        assert same_bits(result.cpu(), expected)


def test_a_clone_steps_aside_for_lazy_bits() -> None:
    """A conjugate view and a copy-on-write storage go to Python, which handles them."""
    replay.clear()
    z = torch.randn(3, 4, dtype=torch.complex64).to("mydev")
    for _ in range(3):
        z.clone()
    assert _C._native_replay_size("clone") == 1
    assert torch.equal(z.conj().clone().cpu(), z.cpu().conj().clone())
    cow = z._lazy_clone()
    assert torch.equal(cow.clone().cpu(), z.cpu())


# ---- empty_like ---------------------------------------------------------------------------

LIKE_VIEWS = [
    lambda t: t,
    lambda t: t.transpose(1, 2),
    lambda t: t[:, :, :1].expand(2, 3, 5, 6),  # expanded: not dense, infer_dense_strides
    lambda t: t[1:, ::2, 1:],  # sliced: not dense
    lambda t: t.contiguous(memory_format=torch.channels_last),
    lambda t: t[:, :1].contiguous(memory_format=torch.channels_last),  # C == 1: ambiguous
]


def test_empty_like_replayed_with_cpus_layout_and_never_enters_python(monkeypatch) -> None:
    """``empty_like``'s third call of a layout and memory format (options ``self``'s own) is
    the stub's, with the strides Python's rule gave, which are CPU's."""
    from torch_mydev.ops import factories

    replay.clear()
    base = torch.randn(2, 3, 4, 6)
    device = base.to("mydev")
    for view in LIKE_VIEWS:
        for fmt in CLONE_FORMATS:
            for _ in range(2):
                torch.empty_like(view(device), memory_format=fmt)
    # None and preserve_format are one memory format to the rule: one record
    assert _C._native_replay_size("empty_like") == len(LIKE_VIEWS) * (len(CLONE_FORMATS) - 1)

    def refuse(*args, **kwargs):
        raise AssertionError("the Python path ran for a recorded empty_like")

    monkeypatch.setattr(factories, "cached_like_strides", refuse)
    for view in LIKE_VIEWS:
        for fmt in CLONE_FORMATS:
            expected = torch.empty_like(view(base), memory_format=fmt)
            for like in (torch.empty_like, torch.zeros_like, torch.ones_like):
                result = like(view(device), memory_format=fmt)
                assert result.shape == expected.shape and result.stride() == expected.stride()
                assert result.dtype == expected.dtype and result.device == device.device
    with pytest.raises(AssertionError):  # another dtype: Python decides
        torch.empty_like(device, dtype=torch.float64)


def test_a_replayed_empty_like_fills_under_deterministic_algorithms() -> None:
    """As ATen's empty_like (and the Python path) fill new memory under
    ``use_deterministic_algorithms`` with ``fill_uninitialized_memory``: NaN for floats,
    the largest value for integers."""
    replay.clear()
    x = torch.zeros(3, 5, device="mydev")
    i = torch.zeros(3, 5, dtype=torch.int32, device="mydev")
    for _ in range(3):
        torch.empty_like(x), torch.empty_like(i)
    assert _C._native_replay_size("empty_like") == 2
    torch.use_deterministic_algorithms(True)
    try:
        assert torch.empty_like(x).isnan().all()
        assert (torch.empty_like(i) == torch.iinfo(torch.int32).max).all()
    finally:
        torch.use_deterministic_algorithms(False)
