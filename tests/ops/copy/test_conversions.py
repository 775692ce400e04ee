"""clone, contiguous, empty_like and .to() on mydev against the same calls on CPU.

Truth: the CPU result of the same call on a CPU view with equal sizes, strides, offset
and values: sizes, strides, offset, contiguity flags, dtype and bits must all agree.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.layout.strategies import views
from tests.support.dtypes import COPY_DTYPES, UNSIGNED
from tests.support.tensors import same_bits, same_layout, view_pair

FORMATS = [
    None,
    torch.preserve_format,
    torch.contiguous_format,
    torch.channels_last,
    torch.channels_last_3d,
]


def _kw(fmt):
    return {} if fmt is None else {"memory_format": fmt}


def _outcome(fn, x):
    try:
        return fn(x), None
    except RuntimeError as exc:
        return None, (type(exc), str(exc))


def _check(fn, cpu, dev, *, values=True, dev_fn=None):
    """fn(cpu) and (dev_fn or fn)(dev) agree: same error, or same layout (and bits)."""
    expected, cpu_err = _outcome(fn, cpu)
    got, dev_err = _outcome(dev_fn or fn, dev)
    assert dev_err == cpu_err
    if cpu_err is None:
        assert same_layout(expected, got), (expected.stride(), got.stride())
        if values:
            assert same_bits(expected, got)
    return expected, got


@given(view=views(max_dims=5), fmt=st.sampled_from(FORMATS), dtype=st.sampled_from(COPY_DTYPES))
def test_clone_matches_cpu(view, fmt, dtype):
    cpu, dev = view_pair(view, dtype)
    _check(lambda x: x.clone(**_kw(fmt)), cpu, dev)


@given(view=views(max_dims=5), fmt=st.sampled_from([*FORMATS[2:], None]))
def test_contiguous_matches_cpu_and_keeps_identity(view, fmt):
    cpu, dev = view_pair(view, torch.float32)
    expected, got = _check(lambda x: x.contiguous(**_kw(fmt)), cpu, dev)
    if expected is not None:
        assert (expected is cpu) == (got is dev)


@given(view=views(max_dims=5), fmt=st.sampled_from(FORMATS), dtype=st.sampled_from(COPY_DTYPES))
def test_empty_like_matches_cpu(view, fmt, dtype):
    cpu, dev = view_pair(view, torch.float32)
    _check(lambda x: torch.empty_like(x, dtype=dtype, **_kw(fmt)), cpu, dev, values=False)


@given(
    view=views(max_dims=5),
    fmt=st.sampled_from(FORMATS),
    src_dtype=st.sampled_from(COPY_DTYPES),
    dst_dtype=st.sampled_from(COPY_DTYPES),
)
def test_to_matches_cpu(view, fmt, src_dtype, dst_dtype):
    """mydev -> mydev, mydev -> cpu and cpu -> mydev, each against the CPU conversion."""
    low = 0.0 if dst_dtype in UNSIGNED else -100.0
    cpu, dev = view_pair(view, src_dtype, low=low)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, got = _check(lambda x: x.to(dtype=dst_dtype, **_kw(fmt)), cpu, dev)
        assert got is None or got.device.type == "mydev"
        _, got = _check(lambda x: x.to("cpu", dst_dtype, copy=True, **_kw(fmt)), cpu, dev)
        assert got is None or got.device.type == "cpu"
        _, got = _check(
            lambda x: x.to(dst_dtype, copy=True, **_kw(fmt)),
            cpu,
            cpu,
            dev_fn=lambda x: x.to("mydev", dst_dtype, **_kw(fmt)),
        )
        assert got is None or got.device.type == "mydev"


def test_design_guide_ambiguous_tensor_rules():
    """[2,1,4,4] is both contiguous and channels_last (design guide)."""
    x = torch.randn(2, 1, 4, 4).to("mydev")
    assert x.contiguous(memory_format=torch.channels_last) is x
    assert x.contiguous(memory_format=torch.channels_last).stride() == (16, 16, 4, 1)
    assert x.to(memory_format=torch.channels_last).stride() == (16, 1, 4, 1)


def test_design_guide_preserve_on_non_dense_inputs():
    """clone with preserve_format on non-dense views keeps the input's dim order."""
    a = torch.empty(2, 4, 6, device="mydev").as_strided((2, 3, 4), (24, 1, 6))
    assert a.clone().stride() == (12, 1, 3)
    b = torch.empty(48, device="mydev").as_strided((1, 2, 2, 2), (24, 1, 5, 1))
    assert b.clone().stride() == (8, 2, 4, 1)


@pytest.mark.parametrize("method", ["contiguous", "clone", "to"])
@pytest.mark.parametrize(
    "fmt,shape", [(torch.channels_last, (2, 3, 4)), (torch.channels_last_3d, (2, 3, 4, 5))]
)
def test_memory_format_not_fitting_rank_raises_like_cpu(method, fmt, shape):
    def call(x):
        return getattr(x, method)(memory_format=fmt)

    with pytest.raises(RuntimeError) as cpu:
        call(torch.randn(shape).transpose(0, 1))
    with pytest.raises(RuntimeError) as dev:
        call(torch.randn(shape).to("mydev").transpose(0, 1))
    assert str(dev.value) == str(cpu.value)


def test_to_another_layout_is_refused_like_cpu():
    x = torch.randn(2, 2)
    with pytest.raises(RuntimeError, match="different layout") as cpu:
        torch.ops.aten._to_copy(x, layout=torch.sparse_coo)
    with pytest.raises(RuntimeError, match="different layout") as dev:
        torch.ops.aten._to_copy(x.to("mydev"), layout=torch.sparse_coo)
    assert str(dev.value) == str(cpu.value)


GRAD_CHAINS = {
    "to": lambda x, d: x.to(d, copy=True),
    "to_contiguous": lambda x, d: x.to(d, copy=True).transpose(1, 2).contiguous(),
    "to_channels_last": lambda x, d: x.to(d, copy=True).to(memory_format=torch.channels_last),
    "clone": lambda x, d: x.to(d, copy=True).clone(memory_format=torch.channels_last).clone(),
    "to_dtype": lambda x, d: x.to(d, copy=True).to(torch.float64),
}


@pytest.mark.parametrize("name", list(GRAD_CHAINS))
def test_autograd_through_copies_matches_cpu(name):
    chain = GRAD_CHAINS[name]
    x_cpu = torch.randn(2, 3, 4, 5, requires_grad=True)
    x_dev = x_cpu.detach().clone().requires_grad_(True)
    y_cpu, y_dev = chain(x_cpu, "cpu"), chain(x_dev, "mydev")
    assert y_dev.device.type == "mydev"
    assert type(y_dev.grad_fn).__name__ == type(y_cpu.grad_fn).__name__
    assert y_dev.stride() == y_cpu.stride()
    grad = torch.randn(y_cpu.shape, dtype=y_cpu.dtype)
    y_cpu.backward(grad)
    y_dev.backward(grad.to("mydev"))
    assert x_dev.grad.device.type == "cpu"
    assert same_bits(x_dev.grad, x_cpu.grad)
