"""copy_ on mydev against torch CPU: values bit-exact, layouts kept, torch's errors.

Truth: the same ``dst.copy_(src)`` on CPU tensors with the same sizes, strides, offsets
and values; the whole destination storage is compared byte for byte.
"""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.layout.strategies import views
from tests.support.dtypes import COPY_DTYPES, FLOATS, UNSIGNED
from tests.support.tensors import same_bits, view_pair
from torch_mydev.ops.copy import aten as copy_ops
from torch_mydev_rules import layout


def _writable(view) -> bool:
    """No two elements of the view share memory (torch leaves such copies unordered)."""
    sizes, strides, _ = view
    offsets = [
        sum(i * s for i, s in zip(idx, strides, strict=True))
        for idx in itertools.product(*(range(n) for n in sizes))
    ]
    return len(offsets) == len(set(offsets))


@st.composite
def broadcast_src(draw, dst_sizes):
    """A source view whose sizes broadcast to `dst_sizes` (dims dropped or set to 1)."""
    drop = draw(st.integers(0, len(dst_sizes)))
    sizes = tuple(1 if draw(st.integers(0, 3)) == 0 else s for s in dst_sizes[drop:])
    ndim = len(sizes)
    strides = draw(
        st.one_of(
            st.just(layout.contiguous_strides(sizes)),
            st.permutations(layout.contiguous_strides(sizes)).map(tuple),
            st.lists(st.integers(0, 30), min_size=ndim, max_size=ndim).map(tuple),
        )
    )
    return sizes, strides, draw(st.integers(0, 3))


def _low(dst_dtype):
    return 0.0 if dst_dtype in UNSIGNED else -100.0


def whole_storage(t: torch.Tensor) -> torch.Tensor:
    """Every element of the storage behind `t`, as a 1-D view."""
    return t.as_strided((t.untyped_storage().nbytes() // t.element_size(),), (1,), 0)


@given(
    dst_view=views(max_dims=4).filter(_writable),
    data=st.data(),
    dst_dtype=st.sampled_from(COPY_DTYPES),
    src_dtype=st.sampled_from(COPY_DTYPES),
    direction=st.sampled_from(["mydev<-mydev", "mydev<-cpu", "cpu<-mydev"]),
)
def test_copy_matches_cpu(dst_view, data, dst_dtype, src_dtype, direction):
    src_view = data.draw(broadcast_src(dst_view[0]))
    dst_cpu, dst_dev = view_pair(dst_view, dst_dtype, seed=1)
    src_cpu, src_dev = view_pair(src_view, src_dtype, seed=2, low=_low(dst_dtype))
    if direction == "mydev<-cpu":
        src_dev = src_cpu
    elif direction == "cpu<-mydev":
        dst_dev, _ = view_pair(dst_view, dst_dtype, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dst_cpu.copy_(src_cpu)
        out = dst_dev.copy_(src_dev)
    assert out is dst_dev
    assert (dst_dev.shape, dst_dev.stride()) == (dst_cpu.shape, dst_cpu.stride())
    assert same_bits(whole_storage(dst_cpu), whole_storage(dst_dev))


@pytest.mark.parametrize("src_dtype,dst_dtype", list(itertools.product(FLOATS, FLOATS)))
def test_special_float_values_cast_like_cpu(src_dtype, dst_dtype):
    special = [
        0.0,
        -0.0,
        float("inf"),
        float("-inf"),
        float("nan"),
        1e-40,
        -1e-45,
        65504.0,
        65520.0,
        3.4e38,
        1.0009765625,
        1.00048828125,
        1.0 + 2**-8,
        1.0 + 3 * 2**-9,
    ]
    src = torch.tensor(special, dtype=torch.float64).to(src_dtype)
    dst_cpu = torch.empty(len(special), dtype=dst_dtype).copy_(src)
    dst_dev = torch.empty(len(special), dtype=dst_dtype, device="mydev").copy_(src.to("mydev"))
    assert same_bits(dst_cpu, dst_dev)


@pytest.mark.parametrize(
    "shape,make",
    [
        ((300, 500), lambda t: t.t()),
        ((8, 64, 33, 20), lambda t: t.contiguous(memory_format=torch.channels_last)),
        ((70000,), lambda t: t[::2]),
    ],
)
def test_large_copies_match_cpu(shape, make):
    """Sizes above the kernels' parallel and tiling thresholds, both directions of strides."""
    base = torch.randn(shape)
    cpu = make(base)
    gathered = torch.empty(cpu.shape, device="mydev").copy_(make(base.to("mydev")))
    assert same_bits(gathered, cpu.contiguous())
    scattered = make(torch.empty(shape, device="mydev")).copy_(gathered)
    assert scattered.stride() == cpu.stride()
    assert same_bits(scattered, cpu)


def test_same_tensor_and_same_data_return_self():
    x = torch.arange(6.0).to("mydev")
    assert x.copy_(x) is x
    alias = x.view(6)
    assert x.copy_(alias) is x
    assert same_bits(x, torch.arange(6.0))


def test_zero_elements():
    dst = torch.empty(0, 3, device="mydev")
    assert dst.copy_(torch.empty(0, 3)) is dst
    assert torch.empty(3, 0, device="mydev").copy_(torch.empty(1, 0)).shape == (3, 0)


def _both_raise(fn):
    """fn(device) raises on CPU and on mydev with the same type and message."""
    with pytest.raises(Exception) as cpu:
        fn("cpu")
    with pytest.raises(Exception) as dev:
        fn("mydev")
    assert type(dev.value) is type(cpu.value)
    assert str(dev.value).splitlines()[0] == str(cpu.value).splitlines()[0]


def test_internal_overlap_destination_raises_like_cpu():
    _both_raise(lambda d: torch.empty(1, device=d).expand(3).copy_(torch.ones(3)))


def test_partial_overlap_raises_like_cpu():
    def shifted(d):
        base = torch.arange(10.0).to(d)
        base[1:].copy_(base[:-1])

    def transposed(d):
        a = torch.arange(9.0).reshape(3, 3).to(d)
        a.copy_(a.t())

    _both_raise(shifted)
    _both_raise(transposed)


def test_not_broadcastable_raises_like_cpu():
    _both_raise(lambda d: torch.empty(2, 3, device=d).copy_(torch.ones(4)))
    _both_raise(lambda d: torch.empty(3, device=d).copy_(torch.ones(2, 3)))


def test_disjoint_views_of_one_storage_copy():
    base_cpu = torch.arange(10.0)
    base_dev = base_cpu.to("mydev")
    base_cpu[5:].copy_(base_cpu[:5])
    base_dev[5:].copy_(base_dev[:5])
    assert same_bits(base_cpu, base_dev)


def test_complex_to_real_warns_and_drops_imaginary_part(monkeypatch):
    monkeypatch.setattr(copy_ops, "_complex_to_real_warned", False)  # TORCH_WARN_ONCE
    src = torch.tensor([1 + 2j, -3 - 4j]).to("mydev")
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        out = torch.empty(2, device="mydev").copy_(src)
    assert same_bits(out, torch.tensor([1.0, -3.0]))


def test_non_blocking_is_accepted():
    out = torch.empty(4, device="mydev").copy_(torch.arange(4.0), non_blocking=True)
    assert same_bits(out, torch.arange(4.0))


def test_item_reads_one_element():
    for dtype in (torch.bool, torch.int64, torch.float16, torch.bfloat16, torch.complex64):
        x = torch.tensor([[3]], dtype=dtype)
        assert x.to("mydev").item() == x.item()
    with pytest.raises(RuntimeError, match="cannot be converted to Scalar"):
        torch.empty(2, device="mydev").item()


LAZY_BITS = {
    "conj_src": lambda d: (torch.empty(2, 3, dtype=torch.complex64, device=d), "conj"),
    "conj_dst": lambda d: (torch.empty(3, 2, dtype=torch.complex64, device=d).t().conj(), None),
    "neg_src_real": lambda d: (torch.empty(2, 3, device=d), "imag"),
    "neg_src_to_int": lambda d: (torch.empty(2, 3, dtype=torch.int32, device=d), "imag"),
    "conj_both": lambda d: (torch.empty(2, 3, dtype=torch.complex128, device=d).conj(), "conj"),
}


@pytest.mark.parametrize("case", list(LAZY_BITS))
def test_lazy_conjugate_and_negative_bits_like_cpu(case):
    """Truth: the same copy_ on CPU, where Copy.cpp resolves the bits."""
    z = torch.tensor([[1 + 2j, -0.0 - 3j, 4.5 + 0j], [float("nan") + 1j, 7 - 8j, 9j]])

    def run(d):
        dst, kind = LAZY_BITS[case](d)
        src = z.to(d)
        src = {"conj": src.conj(), "imag": src.conj().imag, None: src}[kind]
        if src.dtype != dst.dtype and not dst.is_complex():
            src = src.real if src.is_complex() else src
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dst.copy_(src)
        return dst

    cpu, dev = run("cpu"), run("mydev")
    assert (dev.is_conj(), dev.is_neg()) == (cpu.is_conj(), cpu.is_neg())
    assert same_bits(dev.resolve_conj().resolve_neg(), cpu.resolve_conj().resolve_neg())


def test_lazy_bits_reach_the_fallback_and_clone():
    z = torch.tensor([1 + 2j, 3 - 4j])
    dev = z.to("mydev").conj()
    assert same_bits(dev.clone(), z.conj().clone())
    assert same_bits(torch.sin(dev), torch.sin(z.conj()))
    assert same_bits(dev.resolve_conj(), z.conj().resolve_conj())
