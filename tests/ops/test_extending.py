"""Users extending mydev through torch.library (docs/extending.md).

Truth: the behaviour before an override (whichever kernel mydev has at test time: native
or the CPU fallback) comes back after it; a custom op's mydev kernel is the one that runs
on mydev, and ``torch.library.opcheck`` accepts it.
"""

from __future__ import annotations

import gc

import pytest
import torch

import torch_mydev

pytestmark = pytest.mark.filterwarnings("ignore:Warning only once for all operators")


def _fallback_delta(fn):
    """Run ``fn``; return its result and the fallback counts it added."""
    torch_mydev.reset_fallback_stats()
    result = fn()
    stats = torch_mydev.fallback_stats()
    torch_mydev.reset_fallback_stats()
    return result, stats


def test_override_add_takes_effect_and_restoring_brings_back_the_previous_kernel():
    a = torch.tensor([5.0, 7.0]).to("mydev")
    b = torch.tensor([1.0, 2.0]).to("mydev")
    before, before_stats = _fallback_delta(lambda: (a + b).cpu())

    calls = []

    def subtracting_add(x, y, *, alpha=1):
        calls.append(alpha)
        return torch.sub(x.cpu(), y.cpu(), alpha=alpha).to(x.device)

    lib = torch.library.Library("aten", "IMPL")
    torch.library.register_kernel("aten::add.Tensor", "mydev", subtracting_add, lib=lib)
    overridden, stats = _fallback_delta(lambda: (a + b).cpu())
    assert torch.equal(overridden, torch.tensor([4.0, 5.0])) and calls == [1]
    assert "aten::add.Tensor" not in stats
    # Registered below autograd: the grad_fn is torch's own formula for add.
    w = a.clone().requires_grad_()
    s = w + b
    assert type(s.grad_fn).__name__ == "AddBackward0"
    s.sum().backward()
    assert torch.equal(w.grad.cpu(), torch.ones(2))
    del s, w

    del lib
    gc.collect()
    after, after_stats = _fallback_delta(lambda: (a + b).cpu())
    assert torch.equal(before, torch.tensor([6.0, 9.0])) and torch.equal(after, before)
    assert after_stats == before_stats
    assert calls == [1, 1]  # the overridden call and ``w + b``: none after the restore


def test_a_kernel_takes_an_op_off_the_fallback_list():
    x = torch.tensor([0.0, 0.5]).to("mydev")
    _, before = _fallback_delta(lambda: x.cos())
    assert before == {"aten::cos": 1}
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("cos", lambda t: torch.cos(t.cpu()).to(t.device), "PrivateUse1")
    result, during = _fallback_delta(lambda: x.cos())
    assert during == {} and result.device.type == "mydev"
    assert torch.equal(result.cpu(), torch.cos(x.cpu()))
    del lib
    gc.collect()
    assert _fallback_delta(lambda: x.cos())[1] == before


# --------------------------------------------------------------------------- custom ops

mydev_calls: list[str] = []


@torch.library.custom_op("mydev_tests::scaled_tanh", mutates_args=())
def scaled_tanh(t: torch.Tensor, k: float) -> torch.Tensor:
    return torch.tanh(t) * k


@scaled_tanh.register_kernel("mydev")
def _scaled_tanh_mydev(t, k):
    mydev_calls.append("scaled_tanh")
    return (torch.tanh(t.cpu()) * k).to(t.device)


@scaled_tanh.register_fake
def _scaled_tanh_fake(t, k):
    return torch.empty_like(t)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(output)
    ctx.k = inputs[1]


def _backward(ctx, grad):
    (out,) = ctx.saved_tensors
    return grad * (ctx.k - out * out / ctx.k), None


scaled_tanh.register_autograd(_backward, setup_context=_setup_context)


@torch.library.custom_op("mydev_tests::twice", mutates_args=())
def twice(t: torch.Tensor) -> torch.Tensor:
    return t.exp().log() * 2  # no mydev kernel: exp and log fall back


@torch.library.custom_op("mydev_tests::shifted", mutates_args=())
def shifted(t: torch.Tensor) -> torch.Tensor:
    return t + 1


@shifted.register_kernel("privateuseone")
def _shifted_mydev(t):
    return (t.cpu() + 2).to(t.device)


def test_custom_op_runs_its_mydev_kernel_on_mydev_only():
    mydev_calls.clear()
    cpu = torch.tensor([-1.0, 0.0, 0.5])
    expected = scaled_tanh(cpu, 3.0)
    assert mydev_calls == []
    result = scaled_tanh(cpu.to("mydev"), 3.0)
    assert mydev_calls == ["scaled_tanh"]
    assert result.device.type == "mydev"
    torch.testing.assert_close(result.cpu(), expected)


def test_custom_op_gradients_match_cpu():
    cpu = torch.tensor([-1.0, 0.0, 0.5], requires_grad=True)
    dev = cpu.detach().to("mydev").requires_grad_()
    scaled_tanh(cpu, 2.0).sum().backward()
    scaled_tanh(dev, 2.0).sum().backward()
    torch.testing.assert_close(dev.grad.cpu(), cpu.grad)


def test_opcheck_on_mydev():
    x = torch.randn(2, 3).to("mydev")
    result = torch.library.opcheck(scaled_tanh, (x, 1.5))
    assert set(result.values()) == {"SUCCESS"}
    assert "test_autograd_registration" in result


def test_opcheck_autograd_registration_refuses_other_devices():
    # torch 2.13's autograd_registration_check knows CPU/CUDA/XPU only (docs/extending.md).
    x = torch.randn(3).to("mydev").requires_grad_()
    with pytest.raises(Exception, match="NYI devices other than CPU/CUDA/XPU"):
        torch.library.opcheck(scaled_tanh, (x, 1.5))
    utils = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")
    result = torch.library.opcheck(scaled_tanh, (x, 1.5), test_utils=utils)
    assert set(result.values()) == {"SUCCESS"}


def test_custom_op_without_mydev_kernel_uses_its_default_and_the_fallback():
    x = torch.tensor([0.5, 1.5]).to("mydev")
    result, stats = _fallback_delta(lambda: twice(x))
    assert result.device.type == "mydev"
    torch.testing.assert_close(result.cpu(), x.cpu() * 2)
    assert stats == {"aten::exp": 1, "aten::log": 1}


def test_register_kernel_accepts_privateuseone():
    x = torch.tensor([1.0])
    assert shifted(x).item() == 2.0
    assert shifted(x.to("mydev")).item() == 3.0
