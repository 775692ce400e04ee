"""``_C._cpu_alias``: CPU tensors over mydev bytes, the base of the zero-copy paths.

Truth: the mydev tensor itself (same sizes, strides, offset, dtype, bits) and what torch
reports for CPU tensors that share a storage (``untyped_storage().data_ptr()``).
"""

import gc

import pytest
import torch

import torch_mydev  # noqa: F401
from torch_mydev import _C


def test_alias_has_the_layout_and_reads_and_writes_the_bytes():
    base = torch.arange(24, dtype=torch.float32).to("mydev")
    view = base.as_strided((3, 4), (1, 6), 2)
    alias = _C._cpu_alias(view)
    assert alias.device.type == "cpu"
    assert (alias.shape, alias.stride(), alias.storage_offset(), alias.dtype) == (
        view.shape,
        view.stride(),
        view.storage_offset(),
        view.dtype,
    )
    assert alias.data_ptr() == view.data_ptr()
    assert torch.equal(alias, view.cpu())
    alias.fill_(-1)
    assert torch.equal(view.cpu(), torch.full((3, 4), -1.0))


def test_like_shares_one_cpu_storage_so_overlap_checks_see_it():
    base = torch.zeros(6, device="mydev")
    a = _C._cpu_alias(base[:4])
    b = _C._cpu_alias(base[2:], like=a)
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    with pytest.raises(RuntimeError, match="unsupported operation"):
        torch.add(a, 1, out=b)  # partial overlap, as for two views of one CPU storage
    separate = _C._cpu_alias(base[2:])
    with pytest.raises(RuntimeError, match="same mydev storage"):
        _C._cpu_alias(torch.zeros(3, device="mydev"), like=separate)


def test_alias_keeps_the_mydev_memory_alive_and_frees_it_after():
    before = torch.mydev.memory_allocated()
    t = torch.ones(1000, device="mydev")
    alias = _C._cpu_alias(t)
    del t
    gc.collect()
    assert torch.mydev.memory_allocated() > before
    assert float(alias.sum()) == 1000.0
    del alias
    gc.collect()
    assert torch.mydev.memory_allocated() == before


def test_conj_and_neg_bits_carry_over():
    z = torch.tensor([1 + 2j, 3 - 4j]).to("mydev").conj()
    alias = _C._cpu_alias(z)
    assert alias.is_conj()
    assert torch.equal(alias.resolve_conj(), z.cpu().resolve_conj())


def test_a_growable_alias_moves_to_cpu_memory_when_grown():
    """The fallback's aliases are ``growable``: a CPU op that grows one (an empty ``out=``)
    gets new CPU memory holding the old bytes; the mydev tensor is left as it was."""
    mydev = torch.arange(4.0).to("mydev")
    alias = _C._cpu_alias(mydev, None, True, True)
    assert alias.data_ptr() == mydev.data_ptr()
    alias.resize_(100)
    assert alias.data_ptr() != mydev.data_ptr()
    assert torch.equal(alias[:4], torch.arange(4.0))
    alias.fill_(7.0)
    assert torch.equal(mydev.cpu(), torch.arange(4.0))


def test_alias_is_not_resizable_and_bad_input_raises():
    alias = _C._cpu_alias(torch.zeros(2, device="mydev"))
    with pytest.raises(RuntimeError, match="not resizable"):
        alias.resize_(100)
    with pytest.raises(RuntimeError, match="expected a strided mydev tensor"):
        _C._cpu_alias(torch.zeros(2))
