"""Adopting a CPU op's new result as mydev memory (``_C._adopt``), the fallback's zero-copy
results.

Truth: the CPU tensor itself before adoption (values, sizes, strides, storage offset, storage
bytes) and the allocator's statistics (``torch.mydev.memory_stats``), which must count an
adopted block while it lives and return to their baseline when it dies.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torch_mydev
from torch_mydev import _C


def _fresh(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.arange(int(np.prod(shape)), dtype=torch.float64).reshape(shape).to(dtype)


def test_adopted_tensor_keeps_layout_values_and_memory() -> None:
    before = torch.mydev.memory_stats()
    base = _fresh(6, 10)
    expected = base.clone()
    # offset and strides over a bigger block; detached, so no view keeps ``base`` alive:
    # the result is the block's only holder, as a CPU op's new result is
    view = base[1:, ::2].detach()
    del base
    nbytes = 6 * 10 * 4  # (untyped_storage() would make a Python object that holds it)
    shape, stride, offset = view.shape, view.stride(), view.storage_offset()
    address = view.data_ptr() - offset * 4
    adopted = _C._adopt(view, 1)
    assert adopted is not None
    assert adopted.device == torch.device("mydev", 1)
    assert (adopted.shape, adopted.stride(), adopted.storage_offset()) == (shape, stride, offset)
    assert adopted.untyped_storage().data_ptr() == address  # no copy
    assert adopted.untyped_storage().nbytes() == nbytes
    assert torch.equal(adopted.cpu(), expected[1:, ::2])
    # the CPU tensor is left empty, never over memory it no longer owns
    assert view.shape == (0,) and view.untyped_storage().nbytes() == 0 and view.numel() == 0
    stats = torch.mydev.memory_stats(1)
    assert stats["allocated_bytes.all.current"] >= nbytes
    assert (
        torch.mydev.memory_allocated(1)
        == torch.mydev.memory_stats(1)["allocated_bytes.all.current"]
    )
    adopted.add_(1)  # native kernels run on it
    assert torch.equal(adopted.cpu(), expected[1:, ::2] + 1)
    del adopted
    after = torch.mydev.memory_stats()
    assert after["allocated_bytes.all.current"] == before["allocated_bytes.all.current"]
    assert torch.mydev.memory_allocated(1) == 0


def test_adopted_storage_resizes_through_mydev_allocator() -> None:
    adopted = _C._adopt(_fresh(4, 4), 0)
    assert adopted is not None
    values = adopted.cpu()
    adopted.resize_(100)
    assert adopted.untyped_storage().nbytes() == 400
    assert torch.equal(adopted[:16].cpu(), values.reshape(-1))
    assert adopted.untyped_storage().data_ptr() % 64 == 0


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: _fresh(3).conj_physical().conj(), id="conj bit"),
        pytest.param(lambda: torch.empty(0), id="no bytes"),
        pytest.param(lambda: torch.from_numpy(np.ones(8, np.float32)), id="numpy's memory"),
        pytest.param(lambda: torch_mydev_alias(), id="an alias of mydev memory"),
    ],
)
def test_refuses_memory_that_is_not_a_plain_cpu_block(make) -> None:
    t = make()
    before = (t.shape, t.untyped_storage().nbytes())
    assert _C._adopt(t, 0) is None
    assert (t.shape, t.untyped_storage().nbytes()) == before


def torch_mydev_alias() -> torch.Tensor:
    return _C._cpu_alias(torch.ones(4, device="mydev"), None)


def test_refuses_a_block_held_elsewhere() -> None:
    t = _fresh(8)
    other_view = t[2:]  # a second tensor over the same storage
    assert _C._adopt(t, 0) is None
    del other_view
    storage = t.untyped_storage()  # a Python storage object holds it too
    assert _C._adopt(t, 0) is None
    del storage  # torch keeps that object alive with the storage: still refused
    assert _C._adopt(t, 0) is None
    fresh = _fresh(8)
    assert _C._adopt(fresh, 0) is not None
    assert fresh.shape == (0,)


def test_fallback_results_are_adopted_not_copied(monkeypatch) -> None:
    """A non-structured op through the fallback (native_layer_norm's three results): equal
    to CPU, with CPU's layout, and never copied to mydev (``to_mydev`` is not called)."""
    from torch_mydev.ops.fallback import copy as fallback_copy

    x = torch.randn(4, 6, 8)
    w, b = torch.randn(8), torch.randn(8)
    expected = torch.native_layer_norm(x, [8], w, b, 1e-5)
    dx, dw, db = x.to("mydev"), w.to("mydev"), b.to("mydev")
    torch_mydev.reset_fallback_stats()

    def refuse(*args, **kwargs):
        raise AssertionError("a new CPU result was copied to mydev")

    monkeypatch.setattr(fallback_copy, "to_mydev", refuse)
    before = torch.mydev.memory_stats()["allocation.all.allocated"]
    got = torch.native_layer_norm(dx, [8], dw, db, 1e-5)
    assert torch.mydev.memory_stats()["allocation.all.allocated"] - before == 3  # adopted
    assert torch_mydev.fallback_stats() == {"aten::native_layer_norm": 1}
    for g, e in zip(got, expected, strict=True):
        assert g.device.type == "mydev"
        assert (g.shape, g.stride(), g.storage_offset()) == (
            e.shape,
            e.stride(),
            e.storage_offset(),
        )
        assert torch.equal(g.cpu(), e)


def test_cpu_tensor_passed_in_is_never_adopted() -> None:
    """The fallback's own guard: a CPU tensor the call was given (an op may return it as it
    is) is copied to mydev, and stays valid for its owner."""
    from torch_mydev.ops.fallback import boxed
    from torch_mydev.ops.fallback import copy as fallback_copy

    to_cpu = fallback_copy.Aliases([])
    mine = _fresh(5)
    assert to_cpu(mine) is mine
    moved = boxed._result(mine, to_cpu, torch.device("mydev", 0), True, {})
    assert moved.device.type == "mydev"
    assert moved.untyped_storage().data_ptr() != mine.untyped_storage().data_ptr()
    assert torch.equal(mine, _fresh(5)) and torch.equal(moved.cpu(), mine)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(
            lambda: torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8), id="quantized"
        ),
        pytest.param(
            lambda: torch.nested.nested_tensor([torch.ones(1000), torch.ones(2000)]), id="nested"
        ),
    ],
)
def test_refuses_tensors_that_are_not_plain_dense(make) -> None:
    t = make()
    before = t.clone()
    assert _C._adopt(t, 0) is None
    if t.is_nested:
        assert all(torch.equal(a, b) for a, b in zip(t.unbind(), before.unbind(), strict=True))
    else:
        assert torch.equal(t.int_repr(), before.int_repr())


TABLE = torch.arange(4.0)


def test_python_cpu_kernels_results_are_copied_not_taken() -> None:
    """A CPU kernel written in Python may return a tensor Python still holds (a cached table):
    such results are copied, never adopted, and the table stays as it was. One returned
    twice is one mydev tensor, as on CPU."""
    lib = torch.library.Library("mydev_adopt_test", "DEF")
    try:
        lib.define("lookup(Tensor x) -> Tensor")
        lib.define("twice(Tensor x) -> (Tensor, Tensor)")
        lib.impl("lookup", lambda x: TABLE, "CPU")
        lib.impl("twice", lambda x: (lambda r: (r, r))(x * 2), "CPU")
        x = torch.ones(4, device="mydev")
        for _ in range(2):
            got = torch.ops.mydev_adopt_test.lookup(x)
            assert torch.equal(got.cpu(), torch.arange(4.0))
            assert torch.equal(TABLE, torch.arange(4.0))
        a, b = torch.ops.mydev_adopt_test.twice(x)
        assert a is b and torch.equal(a.cpu(), torch.full((4,), 2.0))
    finally:
        lib._destroy()


def test_no_adoption_while_python_overrides_an_aten_cpu_kernel() -> None:
    """An aten op's CPU kernel overridden from Python turns adoption off for every op until
    the override is gone (torch.library's record of Python kernels is read)."""
    from torch_mydev.ops.fallback.adopt import may_adopt

    mm = torch.ops.aten.mm.default
    assert may_adopt(mm)
    cached = torch.full((2, 2), 7.0)
    lib = torch.library.Library("aten", "IMPL")
    try:
        lib.impl("native_layer_norm", lambda x, s, w, b, e: (cached, cached[0], cached[1]), "CPU")
        assert not may_adopt(mm)
        out = torch.native_layer_norm(torch.ones(2, 2, device="mydev"), [2], None, None, 1e-5)
        assert torch.equal(out[0].cpu(), torch.full((2, 2), 7.0))
        assert torch.equal(cached, torch.full((2, 2), 7.0))
    finally:
        lib._destroy()
    assert may_adopt(mm)
