"""Native relu, clamp_min, threshold and threshold_backward on mydev against torch CPU.

Truth: the same call on CPU tensors with the same sizes, strides, offsets and values
(``test_elementwise``'s helpers: dtype, shape and strides equal, values bit for bit, NaN
positions for NaN bits); when CPU raises, mydev raises the same exception type. Values
include NaN, infinities and -0.0 (``make_values``). Each mydev call runs twice: the first
takes the general path, the second the cached entry.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import torch_mydev
from tests.layout.strategies import views
from tests.ops.elementwise.test_elementwise import (
    assert_matches,
    out_tensor,
    pair,
    partner,
    run_both,
    twice,
    writable,
)
from tests.support.dtypes import DEVICE_DTYPES

A = torch.ops.aten
_THRESHOLDS = st.sampled_from((0, 0, 0.0, -0.0, 0.5, -1, 0.1, 20, 1e39, 300, 2**40, float("nan")))
_VALUES = st.sampled_from((0, 7, -2.5, 0.1, 1e39, 300, float("inf")))


@given(
    view=views(max_dims=4),
    dtype=st.sampled_from(DEVICE_DTYPES),
    form=st.sampled_from(("functional", "method", "inplace")),
    seed=st.integers(0, 9),
)
def test_relu_matches_cpu(view, dtype, form, seed):
    a_cpu, a_dev = pair(view, dtype, seed)
    if form == "inplace" and not writable(view):
        form = "functional"

    def call(a):
        if form == "inplace":
            x = a.clone()
            assert x.relu_() is x
            return x
        return a.relu() if form == "method" else torch.relu(a)

    expected, got = run_both(lambda: call(a_cpu), lambda: twice(lambda: call(a_dev)))
    if expected is not None:
        assert_matches(expected, got)


def test_relu_of_special_values_bit_for_bit():
    x = torch.tensor([float("nan"), -0.0, 0.0, -1.0, 2.0, float("-inf"), float("inf")])
    for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        cpu = torch.relu(x.to(dtype))
        dev = torch.relu(x.to(dtype).to("mydev")).cpu()
        assert torch.equal(cpu.isnan(), dev.isnan())
        # -0.0 stays -0.0 (std::max(-0.0, 0) keeps its first operand)
        assert torch.equal(cpu[1:].view(torch.uint8), dev[1:].view(torch.uint8)), dtype
    for dtype in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        i = torch.tensor([-3, 0, 5, 100], dtype=torch.int64).to(dtype)
        assert torch.equal(torch.relu(i), torch.relu(i.to("mydev")).cpu())


@pytest.mark.parametrize(
    ("dtype", "error"),
    [(torch.bool, RuntimeError), (torch.complex64, NotImplementedError)],
)
def test_relu_refuses_what_cpu_refuses(dtype, error):
    x = torch.ones(3, dtype=dtype)
    with pytest.raises(error) as cpu_error:
        torch.relu(x)
    with pytest.raises(error) as dev_error:
        torch.relu(x.to("mydev"))
    assert str(dev_error.value) == str(cpu_error.value)
    with pytest.raises(error):
        x.to("mydev").relu_()


@given(
    view=views(max_dims=4),
    dtype=st.sampled_from(DEVICE_DTYPES),
    bound=st.sampled_from(
        (0, 0.0, -0.0, 0.5, -1, 20, 300, 1e6, 1e39, True, float("nan"), float("-inf"), 2j)
    ),
    form=st.sampled_from(("functional", "inplace", "out")),
    seed=st.integers(0, 9),
    data=st.data(),
)
def test_clamp_min_matches_cpu(view, dtype, bound, form, seed, data):
    a_cpu, a_dev = pair(view, dtype, seed)
    if form == "inplace" and not writable(view):
        form = "functional"
    out_cpu = out_dev = None
    if form == "out":
        out_cpu, out_dev = data.draw(out_tensor(tuple(a_cpu.shape)))

    def call(a, out):
        if form == "inplace":
            x = a.clone()
            assert A.clamp_min_(x, bound) is x
            return x
        if form == "out":
            assert A.clamp_min.out(a, bound, out=out) is out
            return out
        return A.clamp_min(a, bound)

    expected, got = run_both(lambda: call(a_cpu, out_cpu), lambda: call(a_dev, out_dev))
    if expected is not None:
        assert_matches(expected, got)


@given(
    view=views(max_dims=4),
    dtype=st.sampled_from(DEVICE_DTYPES),
    threshold=_THRESHOLDS,
    value=_VALUES,
    form=st.sampled_from(("functional", "inplace", "out")),
    seed=st.integers(0, 9),
    data=st.data(),
)
def test_threshold_matches_cpu(view, dtype, threshold, value, form, seed, data):
    a_cpu, a_dev = pair(view, dtype, seed)
    if form == "inplace" and not writable(view):
        form = "functional"
    out_cpu = out_dev = None
    if form == "out":
        out_cpu, out_dev = data.draw(out_tensor(tuple(a_cpu.shape)))

    def call(a, out):
        if form == "inplace":
            x = a.clone()
            assert A.threshold_(x, threshold, value) is x
            return x
        if form == "out":
            assert A.threshold.out(a, threshold, value, out=out) is out
            return out
        return A.threshold(a, threshold, value)

    expected, got = run_both(lambda: call(a_cpu, out_cpu), lambda: call(a_dev, out_dev))
    if expected is not None:
        assert_matches(expected, got)


@given(
    view=views(max_dims=4),
    dtype=st.sampled_from(DEVICE_DTYPES),
    grad_dtype=st.sampled_from(DEVICE_DTYPES),
    threshold=_THRESHOLDS,
    form=st.sampled_from(("functional", "functional", "grad_input")),
    seed=st.integers(0, 9),
    data=st.data(),
)
def test_threshold_backward_matches_cpu(view, dtype, grad_dtype, threshold, form, seed, data):
    s_cpu, s_dev = pair(view, dtype, seed)
    if data.draw(st.booleans()):
        grad_dtype = dtype  # the common case: no promotion
    g_cpu, g_dev = pair(data.draw(partner(tuple(s_cpu.shape))), grad_dtype, seed + 1)
    out_cpu = out_dev = None
    if form == "grad_input":
        shape = (
            torch.broadcast_shapes(s_cpu.shape, g_cpu.shape) if _broadcasts(s_cpu, g_cpu) else ()
        )
        out_cpu, out_dev = data.draw(out_tensor(tuple(shape)))

    def call(g, s, out):
        if out is None:
            return A.threshold_backward(g, s, threshold)
        assert A.threshold_backward.grad_input(g, s, threshold, grad_input=out) is out
        return out

    expected, got = run_both(
        lambda: call(g_cpu, s_cpu, out_cpu),
        lambda: (
            twice(lambda: call(g_dev, s_dev, out_dev))
            if out_dev is None
            else call(g_dev, s_dev, out_dev)
        ),
    )
    if expected is not None:
        assert_matches(expected, got)


def _broadcasts(a, b) -> bool:
    try:
        torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError:
        return False
    return True


def test_threshold_compares_float16_and_bfloat16_in_float32():
    """bfloat16(0.1) is 0.10009765625: above the float32 threshold 0.1, at the bfloat16 one."""
    for dtype in (torch.bfloat16, torch.float16):
        s = torch.full((70,), 0.1, dtype=dtype)
        g = torch.ones(70, dtype=dtype)
        for th in (0.1, 0.0999):
            assert_matches(
                A.threshold_backward(g, s, th),
                A.threshold_backward(g.to("mydev"), s.to("mydev"), th),
            )
            assert_matches(A.threshold(s, th, 5.0), A.threshold(s.to("mydev"), th, 5.0))


@pytest.mark.parametrize(
    "layout",
    [
        lambda t: t,
        lambda t: t.contiguous(memory_format=torch.channels_last),
        lambda t: t.transpose(1, 3),
        lambda t: t[:, ::2],
    ],
)
def test_autograd_through_relu_matches_cpu(layout):
    torch_mydev.reset_fallback_stats()
    base = torch.randn(2, 4, 3, 5, dtype=torch.float64)
    base[0, 0, 0, :2] = 0.0  # relu's gradient at 0 is 0
    x_cpu = layout(base.clone()).requires_grad_()
    x_dev = layout(base.to("mydev")).requires_grad_()
    w = torch.randn(tuple(x_cpu.shape), dtype=torch.float64)
    y_cpu, y_dev = torch.relu(x_cpu), torch.relu(x_dev)
    assert y_dev.grad_fn.name() == y_cpu.grad_fn.name() == "ReluBackward0"
    (y_cpu * w).sum().backward()
    (y_dev * w.to("mydev")).sum().backward()
    assert_matches(x_cpu.grad, x_dev.grad)
    assert_matches(y_cpu.detach(), y_dev.detach())
    stats = torch_mydev.fallback_stats()
    assert not any("relu" in op or "threshold" in op for op in stats), stats


def test_relu_family_does_not_fall_back():
    torch_mydev.reset_fallback_stats()
    x = torch.randn(4, 5).to("mydev")
    g = torch.randn(4, 5).to("mydev")
    results = [
        torch.relu(x),
        x.clone().relu_(),
        torch.nn.functional.relu(x),
        torch.nn.functional.threshold(x, 0.5, 2.0),
        A.threshold_(x.clone(), 0.5, 2.0),
        A.threshold.out(x, 0.5, 2.0, out=torch.empty(0, device="mydev")),
        A.threshold_backward(g, x, 0),
        A.threshold_backward.grad_input(g, x, 0, grad_input=torch.empty(0, device="mydev")),
        torch.clamp_min(x, 0.5),
        x.clone().clamp_min_(-1),
        torch.clamp_min(x, 0.5, out=torch.empty(0, device="mydev")),
    ]
    del results
    assert torch_mydev.fallback_stats() == {}
