"""Sparse COO tensors on mydev against torch CPU (ops/fallback/sparse.py, docs/fallback.md).

Truth: the same call on CPU tensors. Every result is compared on device type, layout, sizes,
sparse/dense dims, nnz, ``is_coalesced``, and indices and values bit for bit (CPU's sparse
kernels are deterministic: mydev runs them). Memory sharing is compared with what CPU shares.
"""

from __future__ import annotations

import gc

import pytest
import torch

import torch_mydev
from tests.support.raises import run_like_cpu
from tests.support.tensors import same_bits
from torch_mydev.ops.fallback import boxed as fallback
from torch_mydev.ops.fallback import sparse as fallback_sparse

IDX = torch.tensor([[0, 1, 1, 0, 2], [1, 0, 1, 1, 2]])  # (0, 1) twice: uncoalesced
V = torch.tensor([1.5, -2.25, 3.0, 0.1, 7.0])
SIZE = (3, 3)


@pytest.fixture(autouse=True)
def fresh_stats():
    torch_mydev.reset_fallback_stats()
    yield
    torch_mydev.reset_fallback_stats()


@pytest.fixture(autouse=True)
def quiet_invariants():
    """CPU and mydev alike: no invariant checks unless a test asks (and no warning)."""
    was = torch.sparse.check_sparse_tensor_invariants.is_enabled()
    torch.sparse.check_sparse_tensor_invariants.disable()
    yield
    if was:
        torch.sparse.check_sparse_tensor_invariants.enable()


def _same(cpu, dev) -> None:
    if not isinstance(cpu, torch.Tensor):
        assert cpu == dev
        return
    assert dev.device.type == "mydev", dev.device
    assert (dev.layout, dev.dtype, dev.shape) == (cpu.layout, cpu.dtype, cpu.shape)
    assert dev.requires_grad == cpu.requires_grad
    if cpu.layout == torch.sparse_coo:
        assert (dev.sparse_dim(), dev.dense_dim(), dev._nnz()) == (
            cpu.sparse_dim(),
            cpu.dense_dim(),
            cpu._nnz(),
        )
        assert dev.is_coalesced() == cpu.is_coalesced()
        for c, d in ((cpu._indices(), dev._indices()), (cpu._values(), dev._values())):
            assert d.device == dev.device
            assert d.stride() == c.stride()
            assert same_bits(c.detach(), d.detach())
    else:
        assert dev.stride() == cpu.stride()
        assert same_bits(cpu.detach(), dev.detach())


def _both(make, *, check=_same):
    """``make(device)`` on CPU and on mydev: equal results (or the same exception type)."""
    both = run_like_cpu(lambda: make("cpu"), lambda: make("mydev"))
    if both is None:
        return None
    expected, result = both
    if isinstance(expected, (tuple, list)):
        for c, d in zip(expected, result, strict=True):
            check(c, d)
    else:
        check(expected, result)
    return result


def _sparse(device, nnz=None, size=SIZE):
    """IDX, V (their first ``nnz`` entries) as a sparse tensor: the same strides on both."""
    if nnz is None:
        return torch.sparse_coo_tensor(IDX, V, size, device=device)
    return torch.sparse_coo_tensor(IDX.to(device)[:, :nnz], V.to(device)[:nnz], size)


# ------------------------------------------------------------------------- construction


def test_constructors():
    _both(lambda d: _sparse(d))
    _both(lambda d: torch.sparse_coo_tensor(IDX.to(d), V.to(d), SIZE))  # mydev tensors
    _both(lambda d: torch.sparse_coo_tensor(IDX.to(d), V.to(d)))  # size inferred
    _both(lambda d: torch.sparse_coo_tensor(IDX, V, SIZE, device=d, is_coalesced=False))
    _both(lambda d: torch.sparse_coo_tensor(IDX, V.to(torch.float64), SIZE, device=d))
    _both(lambda d: torch.sparse_coo_tensor(size=(2, 5), device=d))
    # values are aliased, not copied: an expanded tensor stays expanded (strides (1, 0))
    _both(
        lambda d: torch.sparse_coo_tensor(IDX.to(d), V.to(d).reshape(5, 1).expand(5, 2), (3, 3, 2))
    )
    _both(lambda d: torch.ops.aten._sparse_coo_tensor_unsafe(IDX.to(d), V.to(d), list(SIZE)))
    _both(lambda d: torch.empty(2, 3, layout=torch.sparse_coo, device=d))
    _both(lambda d: torch.zeros(2, 3, layout=torch.sparse_coo, device=d))
    _both(lambda d: torch.zeros_like(_sparse(d)))


def test_constructor_checks_as_cpu():
    with torch.sparse.check_sparse_tensor_invariants():
        _both(lambda d: _sparse(d))
        _both(lambda d: torch.sparse_coo_tensor(IDX, V, (2, 2), device=d))  # index out of range


def test_move_to_mydev_and_back():
    cpu = _sparse("cpu")
    dev = cpu.to("mydev")
    _same(cpu, dev)
    back = dev.cpu()
    assert back.device.type == "cpu" and back.layout == torch.sparse_coo
    assert torch.equal(back._indices(), cpu._indices()) and same_bits(back._values(), V)
    assert back.is_coalesced() == cpu.is_coalesced()
    # Tensor.to copies indices and values as clone() does (contiguous: CPU's coalesced
    # indices are a narrowed view), so a CPU clone is the truth
    _same(cpu.coalesce().clone(), cpu.coalesce().to("mydev"))
    _same(cpu.to(torch.float64), dev.to(torch.float64))
    _same(cpu.clone(), dev.clone())


def test_indices_and_values_share_memory():
    """As on CPU: ``_indices``/``_values`` are the tensors the sparse tensor was built over."""
    for device in ("cpu", "mydev"):
        i, v = IDX.to(device), V.to(device)
        s = torch.sparse_coo_tensor(i, v, SIZE)
        assert s._indices().data_ptr() == i.data_ptr()
        assert s._values().data_ptr() == v.data_ptr()
        assert s._values().device == s._indices().device == s.device
        c = s.coalesce()
        assert c.indices().data_ptr() == c._indices().data_ptr()
        assert c.values().data_ptr() == c._values().data_ptr()
        c.values().mul_(2)  # a write through values() is a write to the sparse tensor
        assert c.to_dense()[0, 1].item() == ((V[0] + V[3]) * 2).item()
        p = s.permute(1, 0)  # a view: new indices, the same values (as CPU)
        assert p._values().data_ptr() == v.data_ptr()
        assert p._indices().data_ptr() != i.data_ptr()


def test_metadata():
    _both(lambda d: (_sparse(d).is_coalesced(), _sparse(d).coalesce().is_coalesced()))
    _both(lambda d: (_sparse(d)._nnz(), _sparse(d).coalesce()._nnz()))
    _both(lambda d: (_sparse(d).sparse_dim(), _sparse(d).dense_dim()))
    _both(lambda d: _sparse(d).indices())  # uncoalesced: the same RuntimeError
    _both(lambda d: _sparse(d).coalesce().indices())
    _both(lambda d: _sparse(d).coalesce().values())
    assert torch_mydev.fallback_stats() == {"aten::_coalesce": 4}  # nothing else ran on CPU


# ---------------------------------------------------------------------- conversions


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
def test_to_sparse_and_to_dense(dtype):
    dense = torch.tensor([[0, 1, 0], [2, 0, 3], [0, 0, 0]]).to(dtype)
    _both(lambda d: dense.to(d).to_sparse())
    _both(lambda d: dense.to(d).to_sparse(1))  # hybrid: one sparse, one dense dim
    _both(lambda d: dense.to(d).to_sparse().to_dense())
    _both(lambda d: dense.to(d).t().to_sparse())
    _both(lambda d: _sparse(d).to(dtype).to_dense())


def test_coalesce():
    _both(lambda d: _sparse(d).coalesce())
    _both(lambda d: _sparse(d, nnz=1).coalesce())  # nnz < 2: CPU clones
    _both(lambda d: _sparse(d).coalesce().coalesce())
    c = _sparse("mydev").coalesce()
    assert c.coalesce() is c  # coalesced already: the tensor itself, as on CPU


# ---------------------------------------------------------------------- arithmetic


def test_arithmetic_with_dense():
    dense = torch.arange(9.0).reshape(3, 3)
    _both(lambda d: dense.to(d) + _sparse(d))
    _both(lambda d: torch.add(dense.to(d), _sparse(d), alpha=2.5))
    _both(lambda d: _sparse(d) + dense.to(d))  # CPU's "add(sparse, dense) is not supported"
    _both(lambda d: dense.to(d) - _sparse(d))
    _both(lambda d: dense.to(d) * _sparse(d))  # sparse result
    _both(lambda d: dense.to(d).sparse_mask(_sparse(d).coalesce()))


def test_arithmetic_sparse():
    other = torch.sparse_coo_tensor(torch.tensor([[2, 0], [0, 1]]), torch.tensor([4.0, 0.5]), SIZE)
    _both(lambda d: _sparse(d) * 3)
    _both(lambda d: _sparse(d) * 2.5)
    _both(lambda d: _sparse(d) / 4)
    _both(lambda d: -_sparse(d))
    _both(lambda d: _sparse(d) + other.to(d))
    _both(lambda d: _sparse(d).coalesce() + other.to(d).coalesce())
    _both(lambda d: _sparse(d) - other.to(d))
    _both(lambda d: _sparse(d).coalesce() * other.to(d).coalesce())
    _both(lambda d: torch.sparse_coo_tensor(IDX, V.to(torch.int64), SIZE, device=d) * 3)


def test_in_place_and_out():
    other = torch.sparse_coo_tensor(torch.tensor([[2, 0], [0, 1]]), torch.tensor([4.0, 0.5]), SIZE)

    def add_(d):
        s = _sparse(d).coalesce()
        return s.add_(other.to(d)), s

    def mul_(d):
        s = _sparse(d)
        values = s._values()
        return s.mul_(3), s, values, values.data_ptr() == s._values().data_ptr()

    def zero_(d):
        s = _sparse(d)
        return s.zero_(), s

    def dense_add_(d):
        t = torch.ones(3, 3, device=d)
        return t.add_(_sparse(d)), t

    def out_sparse(d):
        out = _sparse(d, nnz=1)  # smaller than the result: CPU grows its indices
        return torch.mul(_sparse(d), 2, out=out), out

    def out_dense(d):
        out = torch.empty(0, device=d)  # CPU resizes it
        return torch.add(torch.ones(3, 3, device=d), _sparse(d), out=out), out

    def copy_(d):
        s = _sparse(d, nnz=2)
        return s.copy_(other.to(d)), s

    for make in (add_, mul_, zero_, dense_add_, out_sparse, out_dense, copy_):
        result = _both(make)
        assert result[0] is result[1]  # the argument itself is returned, as on CPU


@pytest.mark.parametrize("name", ["mul_", "div_", "neg_", "abs_", "sqrt_"])
def test_in_place_keeps_values_shared_as_cpu(name):
    """CPU's div_/neg_/abs_/sqrt_ of a coalesced tensor work on its values in place (an
    earlier values() sees the result), mul_ makes new values: the same on mydev."""

    def make(d):
        s = _sparse(d).coalesce()
        values = s._values()
        result = getattr(s, name)(*((3,) if name in ("mul_", "div_") else ()))
        return result, s, values, values.data_ptr() == s._values().data_ptr()

    result = _both(make)
    assert result[0] is result[1]


def test_written_lazy_clones_get_their_own_bytes_as_on_cpu():
    """A copy-on-write tensor an op writes is materialised before CPU writes through it:
    the write lands in the tensor the op was given, and its lazy clone keeps the old bytes."""

    def values_in_place(d):
        values = torch.ones(1, device=d)
        s = torch.sparse_coo_tensor(IDX.to(d)[:, :1], values, SIZE)  # coalesced: nnz 1
        clone = values._lazy_clone()
        s.neg_()
        return s, values, clone, s._values().data_ptr() == values.data_ptr()

    def dense_in_place(d):
        dense = torch.ones(3, 3, device=d)
        clone = dense._lazy_clone()
        return dense.add_(_sparse(d)), dense, clone

    _both(values_in_place)
    _both(dense_in_place)


def test_copy_path_gives_the_same(monkeypatch):
    monkeypatch.setattr(fallback, "zero_copy", False)
    test_arithmetic_sparse()
    test_in_place_and_out()


# ---------------------------------------------------------------------- matmul, sum


def test_matmul():
    dense = torch.linspace(-1, 1, 12).reshape(3, 4)
    _both(lambda d: torch.sparse.mm(_sparse(d), dense.to(d)))
    _both(lambda d: torch.mm(_sparse(d), dense.to(d)))
    _both(lambda d: _sparse(d) @ dense.to(d))
    _both(lambda d: torch.addmm(torch.ones(3, 4, device=d), _sparse(d), dense.to(d), beta=0.5))
    _both(lambda d: torch.sparse.mm(_sparse(d), _sparse(d).t()))  # sparse result
    _both(lambda d: torch.mv(_sparse(d), torch.tensor([1.0, 2.0, 3.0], device=d)))
    stats = torch_mydev.fallback_stats()
    assert stats["aten::addmm"] >= 1 and stats["aten::mm"] >= 1


def test_sum():
    _both(lambda d: _sparse(d).sum())
    _both(lambda d: torch.sparse.sum(_sparse(d)))
    _both(lambda d: torch.sparse.sum(_sparse(d), 0))
    _both(lambda d: torch.sparse.sum(_sparse(d), [0, 1]))
    _both(lambda d: _sparse(d).sum(1))
    _both(lambda d: _sparse(d).sum(dtype=torch.float64))


# ---------------------------------------------------------------------- autograd


def test_autograd_through_sparse_mm():
    def step(d):
        s = _sparse(d).requires_grad_()
        w = torch.linspace(-1, 1, 12).reshape(3, 4).to(d).requires_grad_()
        out = torch.sparse.mm(s, w)
        out.sum().backward()
        first = (s.grad.clone(), w.grad.clone())
        torch.sparse.mm(s, w).pow(2).sum().backward()  # accumulates into the sparse grad
        assert type(out.grad_fn).__name__ == "AddmmBackward0"
        return (out, *first, s.grad, w.grad)

    _both(step)


def test_autograd_of_construction_and_to_dense():
    def step(d):
        v = V.to(d).detach().requires_grad_()  # a new leaf (V.to("cpu") is V)
        s = torch.sparse_coo_tensor(IDX.to(d), v, SIZE)
        (s.to_dense() * torch.arange(9.0, device=d).reshape(3, 3)).sum().backward()
        return s.to_dense(), v.grad

    _both(step)


# ---------------------------------------------------------------------- devices, errors


def test_mixed_devices_raise_as_cuda():
    dev = _sparse("mydev")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(3, 3) + dev
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.sparse.mm(dev, torch.ones(3, 2))
    assert (dev * torch.tensor(2.0)).device == dev.device  # a 0-dim CPU tensor may join


def test_second_device():
    if torch.mydev.device_count() < 2:
        pytest.skip("needs two mydev devices (TORCH_MYDEV_DEVICE_COUNT)")
    s = _sparse("mydev:1")
    assert s.device == torch.device("mydev:1")
    for t in (s.coalesce(), s * 2, s._values(), torch.ones(3, 3, device="mydev:1") + s):
        assert t.device == torch.device("mydev:1")


COMPRESSED = {
    "dense.to_sparse_csr()": lambda: torch.eye(3, device="mydev").to_sparse_csr(),
    "dense.to_sparse_csc()": lambda: torch.eye(3, device="mydev").to_sparse_csc(),
    "dense.to_sparse_bsr()": lambda: torch.eye(4, device="mydev").to_sparse_bsr((2, 2)),
    "dense.to_sparse_bsc()": lambda: torch.eye(4, device="mydev").to_sparse_bsc((2, 2)),
    "dense.to_sparse(layout=csr)": lambda: torch.eye(3, device="mydev").to_sparse(
        layout=torch.sparse_csr
    ),
    "coo.to_sparse_csr()": lambda: torch.eye(3, device="mydev").to_sparse().to_sparse_csr(),
    "coo.to_sparse(layout=bsc)": lambda: (
        torch.eye(4, device="mydev")
        .to_sparse()
        .to_sparse(layout=torch.sparse_bsc, blocksize=(2, 2))
    ),
    "csr.to(mydev)": lambda: torch.eye(3).to_sparse_csr().to("mydev"),
    "sparse_csr_tensor(device=mydev)": lambda: torch.sparse_csr_tensor(
        torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.ones(2), device="mydev"
    ),
    "sparse_csr_tensor(mydev tensors)": lambda: torch.sparse_csr_tensor(
        torch.tensor([0, 1, 2], device="mydev"),
        torch.tensor([0, 1], device="mydev"),
        torch.ones(2, device="mydev"),
    ),
    "sparse_compressed_tensor(csc)": lambda: torch.sparse_compressed_tensor(
        torch.tensor([0, 1, 2]),
        torch.tensor([0, 1]),
        torch.ones(2),
        layout=torch.sparse_csc,
        device="mydev",
    ),
    "empty(layout=csr)": lambda: torch.empty(2, 2, layout=torch.sparse_csr, device="mydev"),
    "zeros(layout=csc)": lambda: torch.zeros(2, 2, layout=torch.sparse_csc, device="mydev"),
}


@pytest.mark.parametrize("name", list(COMPRESSED))
def test_compressed_layouts_are_refused(name):
    layout = next(kind for kind in ("csr", "csc", "bsr", "bsc") if kind in name)
    message = (
        f"mydev supports the sparse COO layout \\(torch.sparse_coo\\) only; "
        f"torch.sparse_{layout} tensors cannot be created on or moved to mydev"
    )
    with pytest.raises(NotImplementedError, match=message):
        COMPRESSED[name]()


# ---------------------------------------------------------------------- bookkeeping


def test_fallback_stats_count_cpu_runs_only():
    s = _sparse("mydev")
    s.coalesce()
    _ = s._values(), s._indices(), s._nnz(), s.is_coalesced()  # generic: not counted
    torch.ones(3, 3, device="mydev") + s
    assert torch_mydev.fallback_stats() == {"aten::_coalesce": 1, "aten::add.Tensor": 1}


def test_memory_returns_to_baseline():
    gc.collect()
    baseline = torch.mydev.memory_allocated()
    s = _sparse("mydev").requires_grad_()
    w = torch.ones(3, 2, device="mydev", requires_grad=True)
    torch.sparse.mm(s, w).sum().backward()
    c = (s.detach().coalesce() * 2 + s.detach()).coalesce()
    assert torch.mydev.memory_allocated() > baseline
    del s, w, c
    gc.collect()
    assert torch.mydev.memory_allocated() == baseline


def test_composite_ops_listed_from_the_dispatcher():
    """Fails loudly if torch moves these ops: each must be registered for SparsePrivateUse1."""
    listed = fallback_sparse.composite_ops()
    for name in ("add.Tensor", "mul.Tensor", "sum", "addmm", "mm", "values", "indices"):
        assert name in listed or name in fallback_sparse.METADATA, name
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for name in (*listed, *fallback_sparse.METADATA):
        assert has(f"aten::{name}", "SparsePrivateUse1"), name
