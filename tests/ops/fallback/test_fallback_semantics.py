"""The CPU fallback's semantics against torch CPU (and CUDA's device rules).

Python-number overloads, out= tensors CPU restrides, the fused RNN cells, mixed-device
calls, and the zero-copy path against the copy path. Truth: the same call on CPU tensors.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import torch_mydev
from tests.support.raises import run_like_cpu
from tests.support.tensors import same_bits, same_layout
from torch_mydev.ops.fallback import boxed as fallback
from torch_mydev.ops.fallback import copy as fallback_copy


@pytest.fixture(autouse=True)
def fresh_stats():
    torch_mydev.reset_fallback_stats()
    yield
    torch_mydev.reset_fallback_stats()


@pytest.fixture(params=[True, False], ids=["zero_copy", "copy"])
def path(request, monkeypatch):
    """Run a test on the zero-copy path and on the copy path (``fallback.zero_copy``)."""
    monkeypatch.setattr(fallback, "zero_copy", request.param)
    return request.param


def _same(cpu: torch.Tensor, dev: torch.Tensor) -> None:
    assert dev.device.type == "mydev"
    assert cpu.dtype == dev.dtype
    assert same_layout(cpu, dev), (cpu.shape, dev.shape, cpu.stride(), dev.stride())
    assert same_bits(cpu, dev)


def _both(call, *cpu_args):
    """``call`` on CPU and on mydev copies: same result, or the same exception type."""
    dev_args = [a.to("mydev") if isinstance(a, torch.Tensor) else a for a in cpu_args]
    both = run_like_cpu(lambda: call(*cpu_args), lambda: call(*dev_args))
    if both is None:
        return
    expected, result = both
    if isinstance(expected, torch.Tensor):
        _same(expected, result)
    else:
        for c, d in zip(expected, result, strict=True):
            _same(c, d)


INTS = torch.arange(-6, 6).reshape(3, 4)
FLOATS = torch.linspace(-3, 3, 12).reshape(3, 4)

NUMBER_FORMS = {
    "remainder_int": (lambda i, x: i % 4),
    "remainder_float": (lambda i, x: x % 2.5),
    "rremainder": (lambda i, x: 7 % i[i != 0]),
    "fmod": (lambda i, x: torch.fmod(i, 3)),
    "and": (lambda i, x: i & 1),
    "or": (lambda i, x: i | 2),
    "xor": (lambda i, x: i ^ 3),
    "copysign": (lambda i, x: torch.copysign(x, -1.0)),
    "xlogy": (lambda i, x: torch.xlogy(x, 2.0)),
    "xlogy_self_number": (lambda i, x: torch.xlogy(2.0, x)),
    "take_along_dim_negative": (
        lambda i, x: torch.take_along_dim(x, torch.tensor([[-1], [0], [-4]]).to(x.device), 1)
    ),
    "remainder_by_zero": (lambda i, x: i % 0),
    "remainder_out": (lambda i, x: torch.remainder(i, 4, out=torch.empty_like(i))),
    "copysign_out": (lambda i, x: torch.copysign(x, -1.0, out=torch.empty(0, device=x.device))),
}


@pytest.mark.parametrize("call", NUMBER_FORMS.values(), ids=NUMBER_FORMS.keys())
def test_python_number_overloads(call, path):
    _both(call, INTS, FLOATS)


def test_remainder_by_zero_raises_cpus_error_type():
    with pytest.raises(RuntimeError, match="ZeroDivisionError") as on_cpu:
        INTS % 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError") as on_mydev:
        INTS.to("mydev") % 0
    assert on_cpu.type is on_mydev.type
    assert torch_mydev.fallback_stats() == {"aten::remainder.Scalar": 1}


def test_the_called_overload_is_counted():
    torch.copysign(FLOATS.to("mydev"), -1.0)
    assert list(torch_mydev.fallback_stats()) == ["aten::copysign.Scalar"]


# --------------------------------------------------------------------- restrided outputs


def test_lstsq_restrides_its_outputs_like_cpu(path):
    gen = torch.Generator().manual_seed(3)
    a, b = torch.randn(5, 3, generator=gen), torch.randn(5, 2, generator=gen)
    expected = torch.linalg.lstsq(a, b)
    result = torch.linalg.lstsq(a.to("mydev"), b.to("mydev"))
    for c, d in zip(expected, result, strict=True):
        assert c.shape == d.shape and c.stride() == d.stride()
        torch.testing.assert_close(d.cpu(), c)


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("start", [(0,), (2, 2), (40,)], ids=["empty", "small", "big"])
def test_out_resized_and_restrided_like_cpu(start, path):
    gen = torch.Generator().manual_seed(4)
    a = torch.randn(4, 3, generator=gen)
    cpu_out = torch.empty(start)
    dev_out = cpu_out.to("mydev")
    torch.linalg.inv(a[:3], out=cpu_out)
    torch.linalg.inv(a[:3].to("mydev"), out=dev_out)
    assert cpu_out.stride() == dev_out.stride()
    _same(cpu_out, dev_out)


# ----------------------------------------------------------------------------- RNNs


@pytest.mark.parametrize("module", [torch.nn.LSTM, torch.nn.GRU, torch.nn.LSTMCell])
def test_rnn_forward_and_backward_like_cpu(module):
    torch.manual_seed(0)
    cpu = module(4, 5) if module is torch.nn.LSTMCell else module(4, 5, num_layers=2)
    dev = type(cpu)(4, 5) if module is torch.nn.LSTMCell else module(4, 5, num_layers=2)
    dev.load_state_dict(cpu.state_dict())
    dev.to("mydev")
    x = torch.randn(3, 4) if module is torch.nn.LSTMCell else torch.randn(6, 3, 4)
    y_cpu = cpu(x)[0]
    y_dev = dev(x.to("mydev"))[0]
    torch.testing.assert_close(y_dev.cpu(), y_cpu)
    (y_cpu * y_cpu).sum().backward()
    (y_dev * y_dev).sum().backward()
    for p, q in zip(cpu.parameters(), dev.parameters(), strict=True):
        torch.testing.assert_close(q.grad.cpu(), p.grad)
    assert any("fused" in name for name in torch_mydev.fallback_stats())


# --------------------------------------------------------------------------- devices

MIXED = {
    "mm": lambda d: torch.mm(d, torch.ones(2, 2)),
    "cat": lambda d: torch.cat([d, torch.ones(2, 2)]),
    "sin_out_cpu": lambda d: torch.sin(d, out=torch.zeros(2, 2)),
    "sin_out_cpu_0dim": lambda d: torch.sin(d[0, 0], out=torch.zeros(())),
    "add_native": lambda d: d + torch.ones(2, 2),
    "mul_native_inplace": lambda d: d.mul_(torch.ones(2, 2)),
    "where": lambda d: torch.where(d > 0, d, torch.ones(2, 2)),
}


@pytest.mark.parametrize("call", MIXED.values(), ids=MIXED.keys())
def test_mixed_devices_raise_like_cuda(call, path):
    dev = torch.full((2, 2), 3.0, device="mydev")
    with pytest.raises(RuntimeError, match=r"^Expected all tensors to be on the same device, "):
        call(dev)
    assert torch.equal(dev.cpu(), torch.full((2, 2), 3.0))  # nothing written


def test_mixed_device_message_names_both_devices():
    dev = torch.ones(2, 2, device="mydev")
    message = "but found at least two devices, mydev:0 and cpu!"
    with pytest.raises(RuntimeError, match=message):
        torch.mm(dev, torch.ones(2, 2))
    with pytest.raises(RuntimeError, match="devices, cpu and mydev:0!"):  # argument order
        torch.mm(torch.ones(2, 2), dev)
    if torch.mydev.device_count() > 1:
        other = torch.zeros(2, 2, device="mydev:1")
        with pytest.raises(RuntimeError, match="mydev:0 and mydev:1!"):
            torch.sin(dev, out=other)
        assert torch.equal(other.cpu(), torch.zeros(2, 2))


def test_zero_dim_cpu_tensors_join_mydev_inputs(path):
    cpu = torch.arange(6.0).reshape(2, 3)
    scalar = torch.tensor(2.5)
    _same(torch.atan2(cpu, scalar), torch.atan2(cpu.to("mydev"), scalar))
    _same(torch.xlogy(cpu, scalar), torch.xlogy(cpu.to("mydev"), scalar))


def test_cpu_indices_are_allowed_for_indexing_as_on_cuda():
    cpu = torch.arange(12.0).reshape(3, 4)
    index = torch.tensor([2, 0])
    _same(cpu[index], cpu.to("mydev")[index])


# -------------------------------------------------------------------------- zero-copy


def test_zero_copy_moves_no_argument(monkeypatch):
    moves = []
    original = fallback_copy.move
    monkeypatch.setattr(fallback_copy, "move", lambda t, d: moves.append(d) or original(t, d))
    dev = torch.randn(3, 4).to("mydev")
    out = torch.empty(3, 4, device="mydev")
    dev.sin_()
    torch.cos(dev, out=out)
    torch.mm(dev, dev.t(), out=torch.empty(3, 3, device="mydev"))
    assert moves == []


@pytest.mark.parametrize(
    "call",
    [
        lambda t: torch.sin(t[:4], out=t[2:6]),
        lambda t: torch.cumsum(t[:4], 0, out=t[1:5]),
    ],
    ids=["sin_partial_overlap", "cumsum_partial_overlap"],
)
def test_aliases_of_one_storage_share_one_cpu_storage(call, path):
    _both(call, torch.arange(8.0))


def test_views_of_one_storage_in_place(path):
    cpu = torch.arange(16.0).reshape(4, 4)
    dev = cpu.to("mydev")
    cpu[1:3].mul_(cpu[2:4].exp())
    dev[1:3].mul_(dev[2:4].exp())
    _same(cpu, dev)
    torch.addcmul(cpu[0], cpu[1], cpu[2], out=cpu[3])
    torch.addcmul(dev[0], dev[1], dev[2], out=dev[3])
    _same(cpu, dev)


def test_one_tensor_passed_twice_is_one_cpu_tensor(path):
    _both(lambda t: torch.atan2(t, t, out=t), torch.linspace(-1, 1, 6))
    _both(lambda t: torch.cat([t, t, t[1:]]), torch.arange(6.0))


# ------------------------------------------- ops whose composite would hide the CPU kernel


def test_ops_with_cpu_kernels_and_composites_run_cpus_kernel():
    names = {fallback.op_name(op) for op in fallback.CPU_KERNEL_OPS}
    assert {"aten::native_layer_norm", "aten::native_group_norm", "aten::addr"} <= names
    # CompositeExplicitAutogradNonFunctional kernels of non-structured ops; the structured
    # ones' functional forms run CPU's kernel too, registered as fallback.structured's
    assert {"aten::pixel_shuffle", "aten::pixel_unshuffle"} <= names
    structured = {fallback.op_name(op) for op in fallback.STRUCTURED_OPS}
    assert {"aten::mm", "aten::_softmax", "aten::lerp.Scalar", "aten::sin"} <= structured
    in_place = {"aten::sin_", "aten::exp_", "aten::sqrt_", "aten::mm.out"}
    assert not in_place & (names | structured)


@pytest.mark.parametrize("shuffle", ["pixel_shuffle", "pixel_unshuffle"])
def test_pixel_shuffle_runs_cpus_kernel(shuffle):
    """``math_pixel_unshuffle`` (the composite) gave a zero-element result other strides."""
    call = getattr(torch.nn.functional, shuffle)
    empty = torch.empty(2)[1:].as_strided((1, 0, 1, 1), (2, 2, 2, 2))
    _both(lambda x: call(x, 1), empty)
    x = torch.arange(2 * 8 * 4 * 6.0).reshape(2, 8, 4, 6)
    _both(lambda x: call(x, 2), x)
    _both(lambda x: call(x, 2), x.transpose(2, 3))
    assert f"aten::{shuffle}" in torch_mydev.fallback_stats()
    leaf = x.to("mydev").requires_grad_()
    call(leaf, 2).pow(2).sum().backward()
    _same(2 * x, leaf.grad)


@pytest.mark.parametrize(
    "call",
    [
        lambda x, w, b: torch.nn.functional.layer_norm(x, (2, 3), w[0], b[0], eps=0.5),
        lambda x, w, b: torch.nn.functional.group_norm(x.reshape(2, 6, 1), 3),
        lambda x, w, b: torch.addr(x[0, 0], w[0, 0], b[0, 1], beta=0.5),
        lambda x, w, b: torch.all(x > -1, dim=(0, 2)),
    ],
    ids=["layer_norm", "group_norm", "addr", "all_dims"],
)
def test_cpu_kernel_ops_match_cpu_bits(call):
    gen = torch.Generator().manual_seed(8)
    cpu = [torch.randn(2, 2, 3, generator=gen).requires_grad_() for _ in range(3)]
    dev = [t.detach().to("mydev").requires_grad_() for t in cpu]
    expected, result = call(*cpu), call(*dev)
    _same(expected.detach(), result.detach())
    if expected.requires_grad:
        expected.sum().backward()
        result.sum().backward()
        for c, d in zip(cpu, dev, strict=True):
            if c.grad is not None:
                _same(c.grad, d.grad)


# ------------------------------------------------- scaled_dot_product_attention's backend

SDPA_FORMS = {
    "causal": {"is_causal": True},
    "bool_mask": {"attn_mask": torch.tensor([[True, False] * 3] * 3)},
    "float_mask": {"attn_mask": torch.linspace(-1, 1, 18).reshape(3, 6)},
    "scale": {"scale": 0.3},
    "plain": {},
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kwargs", SDPA_FORMS.values(), ids=SDPA_FORMS.keys())
def test_sdpa_takes_cpus_backend(dtype, kwargs):
    """CPU picks its flash kernel (``_fused_sdp_choice == 1``); mydev picks OVERRIDEABLE (4),
    whose kernel is that one, so outputs and gradients are CPU's bits (the math path differed
    by ulps). More in tests/stub/test_sdpa_overrideable.py."""
    gen = torch.Generator().manual_seed(3)
    shapes = [(4, 4, 3, 8), (4, 4, 6, 8), (4, 4, 6, 8)]
    cpu = [torch.randn(s, generator=gen).to(dtype).requires_grad_() for s in shapes]
    dev = [t.detach().to("mydev").requires_grad_() for t in cpu]
    dev_kwargs = {
        k: v.to(dtype) if k == "attn_mask" and v.is_floating_point() else v
        for k, v in kwargs.items()
    }
    cpu_kwargs = dict(dev_kwargs)
    dev_kwargs = {
        k: v.to("mydev") if isinstance(v, torch.Tensor) else v for k, v in dev_kwargs.items()
    }
    assert torch._fused_sdp_choice(*cpu, **cpu_kwargs) == 1
    assert torch._fused_sdp_choice(*dev, **dev_kwargs) == 4
    sdpa = torch.nn.functional.scaled_dot_product_attention
    expected, result = sdpa(*cpu, **cpu_kwargs), sdpa(*dev, **dev_kwargs)
    _same(expected.detach(), result.detach())
    assert "aten::_scaled_dot_product_fused_attention_overrideable" in torch_mydev.fallback_stats()
    grad = torch.randn(expected.shape, generator=gen).to(dtype)
    expected.backward(grad)
    result.backward(grad.to("mydev"))
    for c, d in zip(cpu, dev, strict=True):
        _same(c.grad, d.grad)
    with torch.inference_mode():
        _same(sdpa(*cpu, **cpu_kwargs), sdpa(*dev, **dev_kwargs))


def test_sdpa_math_choice_and_errors_as_cpu():
    """A call CPU sends to the math path (dropout, 3-dim) runs torch's composite; bad
    input raises CPU's error type."""
    q = torch.randn(2, 3, 4)
    _both(lambda a, b, c: torch.nn.functional.scaled_dot_product_attention(a, b, c), q, q, q)
    _both(
        lambda a, b, c: torch.nn.functional.scaled_dot_product_attention(a, b, c),
        q,
        q.double(),
        q,
    )
    _both(
        lambda a, b, c, m: torch.nn.functional.scaled_dot_product_attention(a, b, c, m),
        q,
        q,
        q,
        torch.ones(3, 3, dtype=torch.long),
    )


# ------------------------------------- structured losses: no resize warning CPU never gives

LOSSES = {
    "mse_mean": lambda a, b: torch.nn.functional.mse_loss(a, b),
    "mse_sum": lambda a, b: torch.nn.functional.mse_loss(a, b, reduction="sum"),
    "mse_none": lambda a, b: torch.nn.functional.mse_loss(a, b, reduction="none"),
    "smooth_l1_mean": lambda a, b: torch.nn.functional.smooth_l1_loss(a, b),
    "smooth_l1_sum": lambda a, b: torch.nn.functional.smooth_l1_loss(a, b, reduction="sum"),
}


@pytest.mark.parametrize("call", LOSSES.values(), ids=LOSSES.keys())
def test_structured_losses_warn_as_cpu(call, path):
    """The structured composite used to call ``mse_loss.out`` with a 0-dim output, which
    CPU's out kernel resizes with torch's deprecation warning; CPU's functional call is
    silent, so mydev's is too (``fallback.FUNCTIONAL_ON_CPU``)."""
    gen = torch.Generator().manual_seed(5)
    a, b = torch.randn(4, 3, generator=gen), torch.randn(4, 3, generator=gen)
    leaf_cpu, leaf_dev = a.clone().requires_grad_(), a.to("mydev").requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        expected, result = call(leaf_cpu, b), call(leaf_dev, b.to("mydev"))
        _same(expected.detach(), result.detach())
        expected.sum().backward()
        result.sum().backward()
    _same(leaf_cpu.grad, leaf_dev.grad)


def test_functional_on_cpu_assumption_and_explicit_out_warns_as_cpu():
    """What ``FUNCTIONAL_ON_CPU`` works around is torch's: CPU's ``out=`` kernel warns for a
    0-dim output; an explicit ``out=`` call on mydev still warns as CPU does."""
    a, b = torch.randn(4, 3), torch.randn(4, 3)
    assert set(fallback.FUNCTIONAL_ON_CPU) == {"mse_loss", "smooth_l1_loss"}
    for device in ("cpu", "mydev"):
        x, y = a.to(device), b.to(device)
        with pytest.warns(UserWarning, match="resized since it had shape"):
            torch._C._nn.mse_loss(x, y, 1, out=torch.empty((), device=device))
        with pytest.warns(UserWarning, match="resized since it had shape"):
            torch._C._nn.smooth_l1_loss(x, y, 1, 1.0, out=torch.empty((), device=device))
