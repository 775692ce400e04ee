"""View ops bound in the stub are metadata-only and give CPU's sizes, strides and offsets."""

import pytest
import torch

VIEWS = {
    "t": lambda x: x.t(),
    "view": lambda x: x.view(4, 6),
    "reshape_alias": lambda x: x.reshape(2, 12),
    "as_strided": lambda x: x.as_strided((3, 2), (1, 7), 2),
    "unfold": lambda x: x.unfold(1, 2, 2),
    "permute": lambda x: x.view(2, 3, 4).permute(2, 0, 1),
    "expand": lambda x: x[:1].expand(5, 6),
    "slice_step": lambda x: x[1::2, ::3],
    "select": lambda x: x.select(1, 4),
    "diagonal": lambda x: x.diagonal(),
    "squeeze_unsqueeze": lambda x: x.unsqueeze(0).unsqueeze(2).squeeze(0),
    "narrow": lambda x: x.narrow(1, 2, 3),
}


def _pair(shape=(4, 6), dtype=torch.float32):
    return torch.empty(shape, dtype=dtype), torch.empty(shape, dtype=dtype, device="mydev")


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_metadata_equals_cpu(name):
    cpu, dev = _pair()
    a, b = VIEWS[name](cpu), VIEWS[name](dev)
    assert b.device.type == "mydev"
    assert (b.shape, b.stride(), b.storage_offset()) == (a.shape, a.stride(), a.storage_offset())
    assert b.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()
    assert b.is_contiguous() == a.is_contiguous()


def test_complex_views():
    cpu, dev = _pair((3, 4), torch.complex64)
    for fn in (torch.view_as_real, lambda x: torch.view_as_complex(torch.view_as_real(x))):
        a, b = fn(cpu), fn(dev)
        assert (b.shape, b.stride(), b.dtype) == (a.shape, a.stride(), a.dtype)
        assert b.untyped_storage().data_ptr() == dev.untyped_storage().data_ptr()


def test_view_of_noncontiguous_raises_like_cpu():
    cpu, dev = _pair()
    with pytest.raises(RuntimeError) as a:
        cpu.t().view(24)
    with pytest.raises(RuntimeError) as b:
        dev.t().view(24)
    assert str(a.value) == str(b.value)


def test_set_overloads_share_storage():
    src = torch.empty(12, device="mydev")
    t = torch.empty(0, device="mydev")
    t.set_(src.untyped_storage(), 2, (2, 3), (3, 1))
    assert (t.shape, t.stride(), t.storage_offset()) == ((2, 3), (3, 1), 2)
    assert t.untyped_storage().data_ptr() == src.untyped_storage().data_ptr()
    u = torch.empty(0, device="mydev").set_(src)
    assert u.shape == src.shape and u.data_ptr() == src.data_ptr()
    v = torch.empty(0, device="mydev").set_(src.untyped_storage())
    assert v.shape == (12,)
    w = torch.empty(5, device="mydev").set_()
    assert w.shape == (0,) and w.untyped_storage().nbytes() == 0
    assert w.untyped_storage().device.type == "mydev"
