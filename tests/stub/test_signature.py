"""``_C._signature``: the per-call key and addresses the ops read in one stub call.

The key must be equal for two calls exactly when every tensor's sizes, strides, dtype,
device and lazy bits are; the addresses must be what Python's tensor attributes say.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.layout.strategies import storage_elements, views
from tests.support.dtypes import DEVICE_DTYPES
from torch_mydev import _C


def _tensor(view, dtype, device):
    sizes, strides, offset = view
    base = torch.zeros(max(storage_elements(sizes, strides, offset), 1), dtype=dtype)
    return base.to(device).as_strided(sizes, strides, offset)


def _facts(t: torch.Tensor) -> tuple:
    return (tuple(t.shape), t.stride(), t.dtype, t.device, t.is_conj(), t.is_neg())


@given(
    first=views(max_dims=4),
    second=views(max_dims=4),
    dtypes=st.tuples(st.sampled_from(DEVICE_DTYPES), st.sampled_from(DEVICE_DTYPES)),
    devices=st.tuples(st.sampled_from(("cpu", "mydev")), st.sampled_from(("cpu", "mydev"))),
)
def test_keys_are_equal_exactly_when_the_layout_facts_are(first, second, dtypes, devices):
    a = _tensor(first, dtypes[0], devices[0])
    b = _tensor(second, dtypes[1], devices[1])
    key_a = _C._signature(a)[0]
    key_b = _C._signature(b)[0]
    assert (key_a == key_b) == (_facts(a) == _facts(b))
    pair = _C._signature(a, b)[0]
    assert pair == _C._signature(a, b)[0]
    assert (pair == _C._signature(b, a)[0]) == (_facts(a) == _facts(b))


@given(view=views(max_dims=4), dtype=st.sampled_from(DEVICE_DTYPES))
def test_addresses_are_the_tensors_own(view, dtype):
    t = _tensor(view, dtype, "mydev")
    cpu = _tensor(view, dtype, "cpu")
    _, flags, *addresses = _C._signature(t, cpu)
    assert flags == 0
    for i, x in enumerate((t, cpu)):
        storage = x.untyped_storage()
        start, base, nbytes = addresses[3 * i : 3 * i + 3]
        assert base == storage.data_ptr() and nbytes == storage.nbytes()
        assert start == base + x.storage_offset() * x.element_size()
        if x.numel():
            assert start == x.data_ptr()


def test_lazy_bits_are_in_the_key_and_the_flags():
    z = torch.randn(3, dtype=torch.complex64, device="mydev")
    plain, conj, neg = (_C._signature(x) for x in (z, z.conj(), torch._neg_view(z)))
    assert plain[1] == 0 and conj[1] == _C.FLAG_CONJ and neg[1] == _C.FLAG_NEG
    assert len({plain[0], conj[0], neg[0]}) == 3
    assert _C._signature(z, z.conj())[1] == _C.FLAG_CONJ


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.zeros(3, device="meta"),
        lambda: torch.zeros(3).to_sparse(),
    ],
    ids=["meta", "sparse"],
)
def test_anything_but_a_strided_host_tensor_gives_none(make):
    assert _C._signature(make()) is None
    assert _C._signature(torch.zeros(2, device="mydev"), make()) is None


def test_bad_arguments_raise_type_error():
    with pytest.raises(TypeError):
        _C._signature()
    with pytest.raises(TypeError):
        _C._signature(torch.zeros(1), 3)
    with pytest.raises(TypeError):
        _C._signature(*[torch.zeros(1)] * 9)


def test_empty_strided_checks_its_arguments():
    t = _C._empty_strided(torch.Size([2, 3]), [1, 2], torch.float16, 0)
    assert (t.shape, t.stride(), t.dtype, t.device.type) == ((2, 3), (1, 2), torch.float16, "mydev")
    with pytest.raises(RuntimeError, match="negative dimension"):
        _C._empty_strided((-1,), (1,), torch.float32, 0)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        _C._empty_strided((2,), (1,), torch.float32, 3)
    with pytest.raises(TypeError):
        _C._empty_strided((2,), (1,), "float32", 0)
    with pytest.raises(TypeError):
        _C._empty_strided((2.5,), (1,), torch.float32, 0)
