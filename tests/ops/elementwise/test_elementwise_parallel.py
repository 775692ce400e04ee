"""Large native elementwise ops run on the parallel loops and still match torch CPU.

Truth: the same call on CPU tensors with the same sizes, strides, offsets and values
(``assert_matches`` of ``test_elementwise``: bit for bit, NaN positions only for NaN bits).
The thresholds are lowered to one element here, so the small hypothesis layouts take the
parallel path (``kernels.elementwise_parallel``), on two threads or more; the count of
parallel regions (``threads.regions``) proves each call went parallel. The per-signature
entries and the stub's records of them are cleared around each test
(``elementwise.entries.clear``), so nothing prepared under the real thresholds is reused.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.layout.strategies import views
from tests.ops.elementwise.test_elementwise import assert_matches, pair, partner, run_both
from tests.support.dtypes import FEW
from torch_mydev.kernels.copy import loops as copy_loops
from torch_mydev.kernels.elementwise import kernel as kernels
from torch_mydev.kernels.parallel import threads
from torch_mydev.ops.elementwise import entries as elementwise_entries

# A few dtypes: the split is under test here; tests/ops/test_elementwise covers every dtype.


class _Regions:
    """Parallel regions run so far (``calls``, as a spy's count)."""

    @property
    def calls(self) -> int:
        return threads.regions()


@pytest.fixture
def spy(monkeypatch):
    for module, name in (
        (copy_loops, "PARALLEL_MIN_NUMEL"),
        (kernels, "PARALLEL_MIN_NUMEL"),
        (kernels, "PARALLEL_STREAM_MIN_NUMEL"),
    ):
        monkeypatch.setattr(module, name, 1)
    monkeypatch.setattr(kernels, "TILE_MIN_SIDE", 2)
    monkeypatch.setattr(kernels, "BINARY_TILE", 3)  # tiles cut short at the dims' ends
    monkeypatch.setattr(threads, "count", lambda: 2)  # parallel on a one-core machine too
    elementwise_entries.clear()
    yield _Regions()
    elementwise_entries.clear()


def _check(spy, fn_cpu, fn_dev, twice=True):
    """Compare with CPU; the mydev call (twice: general path, then cached entry) must run a
    parallel region each time it has elements for two parts."""
    before = spy.calls
    expected, got = run_both(fn_cpu, fn_dev)
    if expected is None:
        return
    assert_matches(expected, got)
    if twice:
        assert_matches(fn_cpu(), fn_dev())  # assert_matches zeroes the NaNs it compared
    if got.numel() >= 2:
        assert spy.calls >= before + (2 if twice else 1)


# The fixture's patches hold for every example; only the spy's count moves, read per call.
_FIXTURE_OK = settings(
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ]
)


@_FIXTURE_OK
@given(
    view=views(max_dims=4),
    dtype=st.sampled_from(FEW),
    op=st.sampled_from(("add", "sub", "mul", "div", "floor_divide", "eq", "lt")),
    seed=st.integers(0, 9),
    data=st.data(),
)
def test_binary_and_comparisons_in_parallel(spy, view, dtype, op, seed, data):
    a_cpu, a_dev = pair(view, dtype, seed)
    b_cpu, b_dev = pair(data.draw(partner(view[0])), dtype, seed + 1, nonzero=True)
    if data.draw(st.booleans()):
        a_cpu, a_dev, b_cpu, b_dev = b_cpu, b_dev, a_cpu, a_dev
    fn = getattr(torch, op)
    _check(spy, lambda: fn(a_cpu, b_cpu), lambda: fn(a_dev, b_dev))


@_FIXTURE_OK
@given(
    view=views(max_dims=4),
    dtype=st.sampled_from(FEW),
    op=st.sampled_from(("neg", "abs")),
    seed=st.integers(0, 9),
)
def test_unary_in_parallel(spy, view, dtype, op, seed):
    a_cpu, a_dev = pair(view, dtype, seed)
    fn = getattr(torch, op)
    _check(spy, lambda: fn(a_cpu), lambda: fn(a_dev))


@_FIXTURE_OK
@given(view=views(max_dims=4), dtype=st.sampled_from(FEW), seed=st.integers(0, 9))
def test_where_and_fill_in_parallel(spy, view, dtype, seed):
    a_cpu, a_dev = pair(view, dtype, seed)
    b_cpu, b_dev = pair(view, dtype, seed + 1)
    c_cpu, c_dev = a_cpu > 0, a_dev > 0
    _check(
        spy,
        lambda: torch.where(c_cpu, a_cpu, b_cpu),
        lambda: torch.where(c_dev, a_dev, b_dev),
        twice=False,
    )
    _check(
        spy,
        lambda: torch.empty_like(a_cpu).fill_(3),
        lambda: torch.empty_like(a_dev).fill_(3),
        twice=False,
    )


def test_channels_last_plus_contiguous_at_the_real_thresholds():
    """The bench's case, tiled and parallel above the real threshold (64K elements)."""
    elementwise_entries.clear()
    a = torch.randn(2, 64, 24, 24).contiguous(memory_format=torch.channels_last)
    b = torch.randn(2, 64, 24, 24)
    da, db = a.to("mydev"), b.to("mydev")
    for _ in range(2):  # general path, then the cached entry
        assert_matches(a + b, da + db)
        assert_matches(a * b, da * db)
        assert_matches(b - a, db - da)
    assert_matches(torch.where(a > 0, a, b), torch.where(da > 0, da, db))
    elementwise_entries.clear()
