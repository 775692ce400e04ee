"""Copy-on-write tensors (``Tensor._lazy_clone``) on mydev materialise exactly when CPU's do.

c10's rule: reading a tensor (const access) leaves a copy-on-write storage shared; writing it
(mutable access) gives it its own bytes first. ATen's kernels read inputs through
``const_data_ptr`` and write outputs through ``mutable_data_ptr``, so ``t + c`` leaves both
lazy and ``t.add_(1)`` materialises ``t`` alone. Each scenario runs on CPU and on mydev
from a fresh pair ``t``, ``c = t._lazy_clone()`` and compares which tensors are still
copy-on-write afterwards, and every value. Each runs several times: a call signature's
first call, its recorded entry and the stub's replay are different paths.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from torch_mydev import _C
from torch_mydev.ops.fallback.boxed import fallback_stats, reset_fallback_stats

is_cow = torch._C._is_cow_tensor
REPEATS = 4  # first call, entry, record, replay


def _pair(device: str, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    t = torch.arange(-6, 6).to(dtype).reshape(3, 4).to(device)
    return t, t._lazy_clone()


def _run(scenario: Callable, device: str) -> tuple[list[bool], list[torch.Tensor]]:
    t, c = _pair(device)
    result = scenario(t, c)
    results = list(result) if isinstance(result, tuple) else [result]
    values = [x.cpu() if isinstance(x, torch.Tensor) else torch.tensor(x) for x in results]
    return [is_cow(t), is_cow(c)], [t.cpu(), c.cpu(), *values]


def _check(scenario: Callable) -> None:
    for _ in range(REPEATS):
        cow_cpu, values_cpu = _run(scenario, "cpu")
        cow_mydev, values_mydev = _run(scenario, "mydev")
        assert cow_mydev == cow_cpu
        for a, b in zip(values_mydev, values_cpu, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert torch.equal(a, b)


READS: dict[str, Callable] = {
    "add": lambda t, c: t + c,
    "add_scalar": lambda t, c: t + 2,
    "sub_alpha": lambda t, c: torch.sub(t, c, alpha=3),
    "mul": lambda t, c: t * c,
    "div": lambda t, c: t / 4,
    "lt": lambda t, c: t < c,
    "eq_scalar": lambda t, c: t == 1,
    "neg": lambda t, c: -t,
    "abs": lambda t, c: t.abs(),
    "relu": lambda t, c: t.relu(),
    "threshold_backward": lambda t, c: torch.ops.aten.threshold_backward(c, t, 0.0),
    "clamp_min": lambda t, c: t.clamp_min(1),
    "where": lambda t, c: torch.where(t > 0, t, c),
    "sum": lambda t, c: t.sum(),
    "sum_dim": lambda t, c: t.sum(1),
    "mean": lambda t, c: t.mean(0),
    "amax": lambda t, c: t.amax(0),
    "amin": lambda t, c: c.amin(1),
    "clone": lambda t, c: t.clone(),
    "contiguous": lambda t, c: t.t().contiguous(),
    "to_dtype": lambda t, c: t.to(torch.float64),
    "to_cpu": lambda t, c: t.to("cpu"),
    "item": lambda t, c: t[1, 2].item(),
    "copy_from": lambda t, c: torch.empty(3, 4, device=t.device).copy_(t),
    "copy_from_conj": lambda t, c: torch.empty(3, 4, device=t.device).copy_(t._neg_view()),
    "copy_across_dtypes": lambda t, c: torch.zeros(3, 4, dtype=torch.int32).to(t.device).copy_(t),
    "out_from_lazy": lambda t, c: torch.add(t, c, out=torch.empty(3, 4, device=t.device)),
    "fallback_sin": lambda t, c: t.sin(),
    "fallback_mm": lambda t, c: t @ c.t(),
    "fallback_cumsum": lambda t, c: torch.cumsum(t, 0),
    "repr": lambda t, c: (repr(t), t)[1],
}


@pytest.mark.parametrize("name", list(READS))
def test_reading_leaves_both_lazy_as_on_cpu(name):
    _check(READS[name])


def _out(op: Callable) -> Callable:
    """``op(source, out=t)``: ``t`` (copy-on-write) is the output."""

    def scenario(t, c):
        source = torch.linspace(-1, 1, 12, device=t.device).reshape(3, 4)
        return op(source, t)

    return scenario


WRITES: dict[str, Callable] = {
    "add_": lambda t, c: t.add_(1),
    "add_sibling": lambda t, c: t.add_(c),
    "add_sibling_transposed": lambda t, c: t[:3, :3].add_(c[:3, :3].t()),
    "mul_clone": lambda t, c: c.mul_(2),
    "neg_": lambda t, c: t.neg_(),
    "relu_": lambda t, c: t.relu_(),
    "clamp_min_": lambda t, c: t.clamp_min_(0),
    "lt_": lambda t, c: t.lt_(1),
    "fill_": lambda t, c: t.fill_(5),
    "zero_view": lambda t, c: t[1].zero_(),
    "copy_": lambda t, c: t.copy_(torch.ones(3, 4, device=t.device)),
    "copy_sibling": lambda t, c: t.copy_(c),
    "copy_sibling_transposed": lambda t, c: t[:3, :3].copy_(c[:3, :3].t()),
    "copy_self_view": lambda t, c: t.copy_(t.view(3, 4)),
    "copy_conj_bits": lambda t, c: t.copy_(torch._neg_view(torch.ones(3, 4, device=t.device))),
    "add_out": _out(lambda x, t: torch.add(x, x, out=t)),
    "sum_out": _out(lambda x, t: torch.sum(x, 0, out=t[0])),
    "amax_out": _out(lambda x, t: torch.amax(x, 1, out=t[:, 0])),
    "fallback_sin_": lambda t, c: t.sin_(),
    "fallback_out": _out(lambda x, t: torch.cos(x, out=t)),
    "fallback_reading_sibling": lambda t, c: t.addcmul_(c, c),
}


@pytest.mark.parametrize("name", list(WRITES))
def test_writing_materialises_as_on_cpu(name):
    _check(WRITES[name])


def test_writing_never_reaches_the_lazy_clone():
    """The lazy clone keeps the values it was made with on every path (the fast in-place
    path used to write through the shared bytes from its second call on)."""
    for _ in range(REPEATS):
        t, c = _pair("mydev")
        t.add_(1)
        t.mul_(3)
        t.copy_(torch.zeros(3, 4, device="mydev"))
        assert torch.equal(c.cpu(), torch.arange(-6, 6, dtype=torch.float32).reshape(3, 4))
        assert not torch.equal(t.cpu(), c.cpu())


def test_the_fallback_reads_through_a_lazy_alias():
    """An op without a mydev kernel reads a copy-on-write tensor through a CPU alias that is
    copy-on-write itself: nothing is materialised, and the op ran through the fallback."""
    reset_fallback_stats()
    t, c = _pair("mydev")
    result = torch.cumsum(t, 0)
    assert [name for name in fallback_stats() if name.startswith("aten::cumsum")]
    assert is_cow(t) and is_cow(c)
    assert torch.equal(result.cpu(), torch.cumsum(t.cpu(), 0))


def test_readonly_alias_is_lazy_and_a_write_to_it_stays_on_cpu():
    t, c = _pair("mydev")
    alias = _C._cpu_alias(t, None, True)
    assert is_cow(alias) and is_cow(t)
    assert torch.equal(alias, t.cpu())
    alias.add_(100)  # a write materialises the alias alone, into CPU memory
    assert not is_cow(alias) and is_cow(t) and is_cow(c)
    assert torch.equal(t.cpu(), c.cpu())
    assert alias.untyped_storage().data_ptr() != _C._storage_span(t)[0]
    del alias
    writable = _C._cpu_alias(t)  # the default alias is written through: t materialises
    assert not is_cow(t) and is_cow(c)
    writable.add_(1)
    assert torch.equal(t.cpu(), c.cpu() + 1)


def test_signature_flags_a_copy_on_write_storage_without_changing_the_key():
    t, c = _pair("mydev")
    plain = torch.zeros(3, 4, device="mydev")
    key, flags, start, base, nbytes = _C._signature(t)
    assert flags == _C.FLAG_COW and is_cow(t)
    assert key == _C._signature(plain)[0]
    assert (base, nbytes) == _C._storage_span(t) == _C._storage_span(c)
    assert start == base
    assert _C._signature(plain, c)[1] == _C.FLAG_COW
    assert _C._signature(torch._neg_view(t))[1] == _C.FLAG_COW | _C.FLAG_NEG
