"""The CPU fallback (torch_mydev/ops/fallback/boxed.py) against torch CPU.

Truth: the same call on CPU tensors with the same sizes, strides and values; results must
have CPU's values, sizes and strides, live on mydev, and alias what CPU's results alias.
The ops used here have no mydev kernel (``sin``, ``exp``, ``cat``, ``max``, ``normal_``, …).
"""

from __future__ import annotations

import gc
import warnings

import pytest
import torch

import torch_mydev
from tests.support.tensors import same_bits, same_layout
from torch_mydev.ops.fallback import boxed as fallback
from torch_mydev.ops.fallback import copy as fallback_copy

CL = torch.channels_last


@pytest.fixture(autouse=True)
def fresh_stats():
    torch_mydev.reset_fallback_stats()
    yield
    torch_mydev.reset_fallback_stats()


def _pair(*sizes: int, memory_format=torch.contiguous_format, seed: int = 0):
    cpu = torch.randn(*sizes, generator=torch.Generator().manual_seed(seed))
    cpu = cpu.contiguous(memory_format=memory_format)
    return cpu, cpu.to("mydev")


def _same(cpu: torch.Tensor, dev: torch.Tensor) -> None:
    assert dev.device.type == "mydev"
    assert same_layout(cpu, dev), (cpu.stride(), dev.stride())
    assert same_bits(cpu, dev)


# ---------------------------------------------------------------------------- statistics


def test_counts_each_op_by_overload_name():
    _, x = _pair(2, 3)
    x.sin()
    x.sin()
    torch.nn.functional.hardtanh(x)
    assert torch_mydev.fallback_stats() == {"aten::hardtanh": 1, "aten::sin": 2}
    torch_mydev.reset_fallback_stats()
    assert torch_mydev.fallback_stats() == {}


def test_native_ops_are_not_counted():
    _, x = _pair(2, 3)
    x.clone().to("cpu")
    torch.empty(3, device="mydev").copy_(torch.ones(3))
    assert torch_mydev.fallback_stats() == {}


def test_warns_once_per_op_under_env_var(monkeypatch):
    _, x = _pair(3)
    monkeypatch.setenv(fallback.WARN_ENV, "1")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x.sin()
        x.sin()
        x.exp()
        x.sin()
    messages = [str(w.message) for w in caught if w.category is torch_mydev.FallbackWarning]
    assert len(messages) == 2
    assert "aten::sin;" in messages[0] and "aten::exp;" in messages[1]
    assert torch_mydev.fallback_stats() == {"aten::exp": 1, "aten::sin": 3}

    torch_mydev.reset_fallback_stats()  # forgets the warned ops too
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x.sin()
    assert [w.category for w in caught] == [torch_mydev.FallbackWarning]


def test_no_warning_without_env_var(monkeypatch):
    monkeypatch.delenv(fallback.WARN_ENV, raising=False)
    _, x = _pair(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x.sin()
    assert caught == []


# ----------------------------------------------------------------- results and layouts


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.sin(),
        lambda t: torch.relu(t),
        lambda t: t.sum(dim=1),
        lambda t: torch.nn.functional.max_pool2d(t, 2),
        lambda t: t.permute(0, 2, 3, 1).exp(),
        lambda t: t[:, 1:, ::2].cos(),
        lambda t: t.expand(2, 2, 3, 4, 5).tanh(),
    ],
    ids=["sin", "relu", "sum", "max_pool2d", "permuted", "strided_view", "expanded"],
)
def test_results_keep_cpu_layout(call):
    cpu, dev = _pair(2, 3, 4, 5, memory_format=CL)
    _same(call(cpu), call(dev))


def test_results_on_mydev_with_several_outputs():
    cpu, dev = _pair(3, 4)
    for c, d in zip(cpu.max(dim=1), dev.max(dim=1), strict=True):
        _same(c, d)


def test_results_that_overlap_themselves():
    # No common op returns one; the fallback's move of such a result keeps offset and strides.
    cpu = torch.arange(8.0)[1:4, None].expand(3, 5)
    dev = fallback_copy.move(cpu, torch.device("mydev"))
    assert dev.storage_offset() == 1
    _same(cpu, dev)


def test_unsupported_copy_dtype_moves_as_bits():
    cpu = torch.tensor([1, 2, 300], dtype=torch.int16)
    dev = cpu.to("mydev").view(torch.uint16)
    out = torch.cat([dev, dev])
    assert out.dtype == torch.uint16 and out.device.type == "mydev"
    assert torch.equal(out.view(torch.int16).cpu(), torch.cat([cpu, cpu]))


# ------------------------------------------------------------------------- write-back


def test_in_place_writes_back_into_the_original_tensor():
    cpu, dev = _pair(2, 3, 4, 5, memory_format=CL)
    ptr = dev.data_ptr()
    out = dev.sin_()
    assert out is dev and dev.data_ptr() == ptr
    _same(cpu.sin_(), dev)


def test_in_place_on_a_view_writes_through_to_its_base():
    cpu, dev = _pair(4, 6)
    cpu.t()[1:3].exp_()
    dev.t()[1:3].exp_()
    _same(cpu, dev)


def test_out_keeps_its_strides():
    cpu, dev = _pair(3, 4)
    cpu_out = torch.empty(4, 3).t()
    dev_out = torch.empty(4, 3, device="mydev").t()
    ptr = dev_out.data_ptr()
    result = torch.sin(dev, out=dev_out)
    assert result is dev_out and dev_out.data_ptr() == ptr
    torch.sin(cpu, out=cpu_out)
    _same(cpu_out, dev_out)


def test_out_resized_like_cpu():
    cpu, dev = _pair(2, 3, 4, 5, memory_format=CL)
    cpu_out = torch.empty(0)
    dev_out = torch.empty(0, device="mydev")
    assert torch.sin(dev, out=dev_out) is dev_out
    torch.sin(cpu, out=cpu_out)
    assert dev_out.stride() == cpu_out.stride() == (60, 1, 15, 3)
    _same(cpu_out, dev_out)


def test_several_outs_are_the_originals():
    cpu, dev = _pair(3, 4)
    values, indices = torch.empty(0, device="mydev"), torch.empty(0, 2, dtype=torch.long)
    indices = indices.to("mydev")
    result = torch.max(dev, dim=1, out=(values, indices))
    assert result[0] is values and result[1] is indices
    expected = torch.max(cpu, dim=1)
    _same(expected.values, values)
    _same(expected.indices, indices)


def test_list_of_written_tensors():
    # _fused_sgd_ (SGD(fused=True)) has Tensor(a!)[] arguments and no mydev kernel.
    def step(params):
        for p in params:
            p.grad = torch.full_like(p, 0.5)
        optimizer = torch.optim.SGD(params, lr=0.1, momentum=0.9, fused=True)
        optimizer.step()
        optimizer.step()
        return optimizer

    cpu = [torch.randn(3, 4, requires_grad=True), torch.randn(5, requires_grad=True)]
    dev = [p.detach().to("mydev").requires_grad_() for p in cpu]
    cpu_opt, dev_opt = step(cpu), step(dev)
    assert torch_mydev.fallback_stats() == {"aten::_fused_sgd_": 2}
    for c, d in zip(cpu, dev, strict=True):
        _same(c.detach(), d.detach())
        c_buf, d_buf = cpu_opt.state[c]["momentum_buffer"], dev_opt.state[d]["momentum_buffer"]
        _same(c_buf, d_buf)


def test_undeclared_write_of_native_batch_norm_running_stats():
    # native_batch_norm's schema does not mark running_mean/var as written; CPU writes them.
    cpu, dev = _pair(4, 3, 2, 2)
    stats = [torch.zeros(3), torch.ones(3)]
    dev_stats = [s.to("mydev") for s in stats]
    expected = torch.native_batch_norm(cpu, None, None, *stats, True, 0.1, 1e-5)
    result = torch.native_batch_norm(dev, None, None, *dev_stats, True, 0.1, 1e-5)
    for c, d in zip(expected + tuple(stats), result + tuple(dev_stats), strict=True):
        _same(c, d)


# -------------------------------------------------------------- arguments and aliasing


def test_list_arguments_cat_and_stack():
    cpu, dev = _pair(3, 4)
    _same(torch.cat([cpu, cpu.t().contiguous().t(), cpu[1:]]), torch.cat([dev, dev, dev[1:]]))
    _same(torch.stack([cpu, cpu * 2]), torch.stack([dev, dev * 2]))
    _same(torch.cat([cpu, cpu[:1]]), torch.cat([dev, dev[:1]]))


def test_optional_tensor_arguments():
    cpu, dev = _pair(3, 4)
    low = torch.zeros(4)
    _same(torch.clamp(cpu, min=low), torch.clamp(dev, min=low.to("mydev")))
    _same(torch.clamp(cpu, max=low), torch.clamp(dev, min=None, max=low.to("mydev")))


def test_arguments_sharing_storage_alias_on_cpu_too():
    cpu = torch.arange(6.0)
    dev = cpu.to("mydev")
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        torch.sin(cpu[:4], out=cpu[2:6])
    with pytest.raises(RuntimeError, match="refer to a single memory location"):
        torch.sin(dev[:4], out=dev[2:6])
    torch.sin(cpu[2:6], out=cpu[2:6])
    torch.sin(dev[2:6], out=dev[2:6])
    _same(cpu, dev)
    torch.atan2(cpu[:3], cpu[3:], out=cpu[:3])  # out is exactly the first input: allowed
    torch.atan2(dev[:3], dev[3:], out=dev[:3])
    _same(cpu, dev)


def test_lazy_conjugate_arguments():
    # mm handles the conjugate bit itself, so torch hands it the lazy conj view.
    a = torch.randn(2, 3, dtype=torch.complex64, generator=torch.Generator().manual_seed(1))
    b = torch.randn(3, 2, dtype=torch.complex64, generator=torch.Generator().manual_seed(2))
    _same(torch.mm(a.conj(), b), torch.mm(a.to("mydev").conj(), b.to("mydev")))
    assert torch_mydev.fallback_stats() == {"aten::mm": 1}  # CPU's functional kernel


# -------------------------------------------------------------------------- factories


@pytest.mark.parametrize(
    "factory",
    [
        lambda **kw: torch.arange(2, 11, 3, **kw),
        lambda **kw: torch.linspace(0, 1, 7, **kw),
        lambda **kw: torch.eye(3, 4, **kw),
        lambda **kw: torch.zeros(2, 3, **kw),
        lambda **kw: torch.full((2, 2), 1.5, dtype=torch.float64, **kw),
        lambda **kw: torch.tril_indices(4, 3, **kw),
        lambda **kw: torch.empty(2, 3, 4, 5, memory_format=CL, **kw).fill_(2),
    ],
    ids=["arange", "linspace", "eye", "zeros", "full", "tril_indices", "channels_last"],
)
def test_factories_with_device_mydev(factory):
    _same(factory(), factory(device="mydev"))


def test_tril_indices_runs_with_device_cpu_in_the_fallback():
    torch.tril_indices(3, 3, device="mydev")
    assert torch_mydev.fallback_stats() == {"aten::tril_indices": 1}


@pytest.mark.parametrize(
    "draw",
    [
        lambda **kw: torch.randn(3, 4, **kw),
        lambda **kw: torch.rand(5, dtype=torch.float64, **kw),
        lambda **kw: torch.randint(0, 10, (6,), **kw),
        lambda **kw: torch.randperm(7, **kw),
        lambda **kw: torch.nn.functional.dropout(torch.ones(8, **kw), 0.5),
    ],
    ids=["randn", "rand", "randint", "randperm", "dropout"],
)
def test_random_ops_draw_from_mydev_generator_like_cpu(draw):
    torch.manual_seed(5)  # seeds CPU and mydev alike
    expected = draw()
    torch.manual_seed(5)
    result = draw(device="mydev")
    after = torch.randn(2)  # mydev draws leave CPU's stream alone
    _same(expected, result)
    torch.manual_seed(5)
    assert torch.equal(after, torch.randn(2))


def test_explicit_mydev_generator():
    g = torch.Generator(device="mydev").manual_seed(11)
    reference = torch.Generator().manual_seed(11)
    for _ in range(2):  # the state advances on mydev's generator
        _same(torch.randn(4, generator=reference), torch.randn(4, generator=g, device="mydev"))


# ------------------------------------------------------------------ printing and .item()


def test_repr_matches_cpu():
    cpu, dev = _pair(2, 3)
    assert repr(dev) == repr(cpu)[:-1] + ", device='mydev:0')"
    ints = torch.arange(4)
    assert repr(ints.to("mydev")) == "tensor([0, 1, 2, 3], device='mydev:0')"
    assert "device='mydev:0'" in repr(torch.empty(0, 3, device="mydev"))
    big = torch.arange(5000.0)
    assert repr(big.to("mydev")) == repr(big)[:-1] + ", device='mydev:0')"
    half = cpu.to(torch.bfloat16)
    assert str(half.to("mydev")) == str(half)[: -len("dtype=torch.bfloat16)")] + (
        "device='mydev:0', dtype=torch.bfloat16)"
    )


def test_item_and_bool():
    cpu, dev = _pair(3)
    assert dev.max().item() == cpu.max().item()
    assert bool((dev > 0).any()) == bool((cpu > 0).any())


# ---------------------------------------------------------------------------- refusals


def test_a_view_op_reaching_the_fallback_raises():
    _, dev = _pair(3)
    with pytest.raises(RuntimeError, match=r"aten::_values is a view op"):
        dev._values()
    with pytest.raises(RuntimeError, match=r"aten::alias is a view op"):
        fallback.cpu_fallback(torch.ops.aten.alias.default, dev)
    with pytest.raises(RuntimeError, match=r"aten::t_ is a view op"):  # in-place metadata op
        fallback.cpu_fallback(torch.ops.aten.t_.default, dev)
    assert torch_mydev.fallback_stats() == {}


@pytest.mark.parametrize(
    "call",
    [
        lambda t: torch.index_select(t, 0, torch.tensor([7]).to(t.device)),
        lambda t: torch.cat([t, t[None]]),
        lambda t: t.sin_().view(5),
        lambda t: torch.ops.aten.miopen_batch_norm(t, t[0], None, None, None, True, 0.1, 1e-5),
    ],
    ids=["IndexError", "RuntimeError", "view_size", "NotImplementedError"],
)
def test_exceptions_propagate_with_their_type(call):
    cpu, dev = _pair(3, 2)
    with pytest.raises(Exception) as on_cpu:
        call(cpu)
    with pytest.raises(Exception) as on_mydev:
        call(dev)
    assert on_mydev.type is on_cpu.type


def test_memory_back_to_baseline():
    gc.collect()
    baseline = torch.mydev.memory_allocated()
    _, dev = _pair(2, 3, 4, 5, memory_format=CL)
    out = torch.empty(0, device="mydev")
    torch.sin(dev, out=out)
    results = [dev.exp(), torch.cat([dev, dev]), dev.max(dim=1), torch.randn(100, device="mydev")]
    assert torch.mydev.memory_allocated() > baseline
    del dev, out, results
    gc.collect()
    assert torch.mydev.memory_allocated() == baseline
