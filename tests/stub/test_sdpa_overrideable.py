"""scaled_dot_product_attention's OVERRIDEABLE backend on mydev (csrc_stub/ops/sdpa.cpp,
torch_mydev/ops/fallback/sdpa.py), after OpenReg's tests/test_sdpa.py.

Truth: CPU. Where CPU picks its flash kernel, mydev picks OVERRIDEABLE, whose kernels are
that flash kernel: outputs and gradients are CPU's bits and layouts. Where CPU picks the
math path, so does mydev. Called directly, the overrideable ops agree with CPU's math
composite (``_scaled_dot_product_attention_math`` and its autograd) within float tolerance.
"""

import warnings

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.nn.attention import SDPBackend

import torch_mydev
from tests.support.tensors import same_bits, same_layout

sdpa = torch.nn.functional.scaled_dot_product_attention
overrideable = torch.ops.aten._scaled_dot_product_fused_attention_overrideable.default
overrideable_backward = torch.ops.aten._scaled_dot_product_fused_attention_overrideable_backward
math = torch.ops.aten._scaled_dot_product_attention_math.default
NAME = "aten::_scaled_dot_product_fused_attention_overrideable"


@pytest.fixture(autouse=True)
def fresh_stats():
    torch_mydev.reset_fallback_stats()
    yield
    torch_mydev.reset_fallback_stats()


def _randn(shape, dtype=torch.float32, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _additive(mask):
    """The float64 additive form of a mask, as the composite hands it to the math kernel."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=torch.float64).masked_fill(~mask, -float("inf"))
    return mask.double()


def _mydev(*tensors, grad=False):
    return [t.detach().to("mydev").requires_grad_(grad) for t in tensors]


def test_fused_sdp_choice_is_overrideable_where_cpu_takes_flash():
    """OpenReg's test_fused_sdp_choice_privateuseone, and CPU's math cases stay math."""
    q = torch.rand(4, 2, 256, 128, dtype=torch.float16)
    assert torch._fused_sdp_choice(q, q, q) == SDPBackend.FLASH_ATTENTION.value
    (d,) = _mydev(q)
    assert torch._fused_sdp_choice(d, d, d) == SDPBackend.OVERRIDEABLE.value
    q = _randn((2, 3, 5, 8))
    mask = _randn((5, 5)).requires_grad_()
    cases = {
        "dropout": (q, q, q, None, 0.5),
        "three_dim": (q[0], q[0], q[0]),
        "mask_needs_grad": (q, q, q, mask),
    }
    flash = SDPBackend.FLASH_ATTENTION.value
    for name, call in cases.items():
        cpu_choice = torch._fused_sdp_choice(*call)
        if name != "three_dim":  # torch 2.13's CPU takes math for 3-dim inputs, 2.14's flash
            assert cpu_choice == SDPBackend.MATH.value, name
        dev = [
            _mydev(a, grad=a.requires_grad)[0] if isinstance(a, torch.Tensor) else a for a in call
        ]
        expected = SDPBackend.OVERRIDEABLE.value if cpu_choice == flash else cpu_choice
        assert torch._fused_sdp_choice(*dev) == expected, name
    with torch.nn.attention.sdpa_kernel(SDPBackend.MATH):
        assert torch._fused_sdp_choice(d, d, d) == SDPBackend.MATH.value


FORMS = {
    "plain": {},
    "causal": {"is_causal": True},
    "scale": {"scale": 0.3},
    "float_mask": {"attn_mask": torch.linspace(-1, 1, 30).reshape(5, 6)},
    "bool_mask": {"attn_mask": torch.tensor([[True, False, True] * 2] * 5)},
    "batched_mask": {"attn_mask": _randn((2, 1, 5, 6), seed=9)},
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("kwargs", FORMS.values(), ids=FORMS.keys())
def test_sdpa_runs_the_overrideable_ops_with_cpus_bits(dtype, kwargs):
    """Forward and backward (gradients of query, key and value) through the overrideable
    ops: CPU's bits and layouts, and within float tolerance of CPU's math path."""
    shapes = [(2, 3, 5, 8), (2, 3, 6, 8), (2, 3, 6, 8)]
    cpu = [_randn(s, dtype, seed=i).requires_grad_() for i, s in enumerate(shapes)]
    dev = _mydev(*cpu, grad=True)
    cpu_kwargs = {
        k: v.to(dtype) if k == "attn_mask" and v.is_floating_point() else v
        for k, v in kwargs.items()
    }
    dev_kwargs = {
        k: v.to("mydev") if isinstance(v, torch.Tensor) else v for k, v in cpu_kwargs.items()
    }
    expected, result = sdpa(*cpu, **cpu_kwargs), sdpa(*dev, **dev_kwargs)
    assert same_layout(expected, result) and same_bits(expected, result)
    assert result.grad_fn.name() == "ScaledDotProductFusedAttentionOverrideableBackward0"
    grad = _randn(expected.shape, dtype, seed=7)
    expected.backward(grad)
    result.backward(grad.to("mydev"))
    for c, d in zip(cpu, dev, strict=True):
        assert same_layout(c.grad, d.grad) and same_bits(c.grad, d.grad)
    stats = torch_mydev.fallback_stats()
    assert stats[NAME] == 1 and stats[f"{NAME}_backward"] == 1
    assert "aten::_fused_sdp_choice" not in stats  # chosen in the stub, not on CPU
    # and the math path agrees within tolerance
    ref = [t.detach().double().requires_grad_() for t in cpu]
    ref_kwargs = {k: _additive(v) if k == "attn_mask" else v for k, v in cpu_kwargs.items()}
    out = math(*ref, **ref_kwargs)[0]
    out.backward(grad.double())
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {"atol": 1e-5, "rtol": 1e-5}
    torch.testing.assert_close(result.cpu().double(), out.detach(), **tol)
    for r, d in zip(ref, dev, strict=True):
        torch.testing.assert_close(d.grad.cpu().double(), r.grad, **tol)


def test_sdpa_of_3_dim_inputs_takes_cpus_path():
    """3-dim inputs: torch 2.13's CPU takes the math path, torch 2.14's its flash kernel;
    mydev takes the same one (the overrideable ops for flash), with CPU's bits."""
    q = _randn((2, 5, 8))
    (d,) = _mydev(q)
    torch.testing.assert_close(sdpa(d, d, d).cpu(), sdpa(q, q, q), atol=0, rtol=0)
    cpu_flash = torch._fused_sdp_choice(q, q, q) == SDPBackend.FLASH_ATTENTION.value
    assert (NAME in torch_mydev.fallback_stats()) == cpu_flash


def test_sdpa_math_cases_run_torchs_composite():
    """A mask that needs a gradient takes the math path, as on CPU: no overrideable op
    runs, and the mask gets its gradient."""
    q4, mask = _randn((2, 3, 5, 8), seed=1), _randn((5, 5), seed=2).requires_grad_()
    dq, dmask = _mydev(q4)[0], _mydev(mask, grad=True)[0]
    sdpa(q4, q4, q4, mask).sum().backward()
    sdpa(dq, dq, dq, dmask).sum().backward()
    torch.testing.assert_close(dmask.grad.cpu(), mask.grad, atol=1e-6, rtol=1e-6)
    assert NAME not in torch_mydev.fallback_stats()


def test_overrideable_ops_called_directly_as_openreg_does():
    """OpenReg's test_scaled_dot_product_fused_attention_overrideable(_backward): float16,
    a bias, all four gradients asked; compared with CPU's math composite and its autograd."""
    shape = (2, 2, 16, 8)
    q, k, v = (
        torch.rand(shape, generator=torch.Generator().manual_seed(i)).half() for i in range(3)
    )
    bias = torch.rand(2, 2, 16, 16, generator=torch.Generator().manual_seed(3)).half()
    dq, dk, dv, dbias = _mydev(q, k, v, bias)
    out = overrideable(dq, dk, dv, attn_bias=dbias)
    output, logsumexp, cum_q, cum_k, max_q, max_k, seed, offset, debug = out
    assert (cum_q, cum_k, debug, max_q, max_k) == (None, None, None, 16, 16)
    assert logsumexp.shape == (2, 2, 16) and logsumexp.dtype == torch.float32
    assert seed.shape == offset.shape == () and seed.dtype == torch.long
    ref = [t.double().requires_grad_() for t in (q, k, v, bias)]
    expected = math(*ref)[0]
    torch.testing.assert_close(output.cpu().double(), expected.detach(), atol=2e-3, rtol=2e-3)
    upstream = torch.rand(shape, generator=torch.Generator().manual_seed(4)).half()
    grads = overrideable_backward(
        upstream.to("mydev"),
        dq,
        dk,
        dv,
        dbias,
        [True, True, True, True],
        output,
        logsumexp,
        cum_q,
        cum_k,
        max_q,
        max_k,
        dropout_p=0.0,
        is_causal=False,
        philox_seed=seed,
        philox_offset=offset,
    )
    expected.backward(upstream.double())
    for got, r in zip(grads, ref, strict=True):
        assert got.device.type == "mydev" and got.shape == r.shape
        torch.testing.assert_close(got.cpu().double(), r.grad, atol=1e-2, rtol=1e-2)
    only_v = overrideable_backward(
        upstream.to("mydev"),
        dq,
        dk,
        dv,
        dbias,
        [False, False, True, False],
        output,
        logsumexp,
        cum_q,
        cum_k,
        max_q,
        max_k,
        0.0,
        False,
        seed,
        offset,
    )
    assert only_v[0] is None and only_v[1] is None and only_v[3] is None
    assert torch.equal(only_v[2].cpu(), grads[2].cpu())


def test_overrideable_takes_three_dim_inputs_as_its_meta_function():
    """(heads, seq, dim) inputs are one batch: output 3-dim, logsumexp (1, heads, seq), the
    shapes torch's meta function gives; the values are CPU flash's of the 4-dim batch."""
    q = _randn((3, 5, 8))
    (d,) = _mydev(q)
    output, logsumexp = overrideable(d, d, d, is_causal=True)[:2]
    expected, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q[None], q[None], q[None], 0.0, True
    )
    assert same_bits(output.cpu(), expected[0]) and same_bits(logsumexp.cpu(), lse)
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(d)
        meta = overrideable(fake, fake, fake, is_causal=True)
    assert meta[0].shape == output.shape and meta[1].shape == logsumexp.shape


def _layouts(values):
    return [
        (tuple(v.shape), v.stride(), v.dtype) if isinstance(v, torch.Tensor) else v for v in values
    ]


@pytest.mark.parametrize("transposed", [False, True], ids=["contiguous", "transposed_query"])
def test_overrideable_ops_agree_with_their_meta_functions(transposed):
    """Sizes, strides and dtypes of both ops' results equal what torch's meta functions
    give for fake copies of the arguments (a compiled graph asserts them; CPU's logsumexp
    and key/value gradients come transposed and are re-laid out), and ``opcheck``'s
    fake-tensor test passes."""
    q = _randn((2, 5, 3, 8)).transpose(1, 2) if transposed else _randn((2, 3, 5, 8))
    k, v, bias = _randn((2, 3, 6, 8), seed=1), _randn((2, 3, 6, 8), seed=2), _randn((5, 6), seed=3)
    dq, dk, dv, dbias = _mydev(q, k, v, bias)
    out = overrideable(dq, dk, dv, attn_bias=dbias)
    grad = _mydev(_randn(out[0].shape, seed=4))[0]
    args = (grad, dq, dk, dv, dbias, [True] * 4, out[0], out[1], None, None, 5, 6, 0.0, False)
    grads = overrideable_backward(*args, out[6], out[7])
    with FakeTensorMode() as mode:
        fake = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in args]
        fake_out = overrideable(*fake[1:4], attn_bias=fake[4])
        seeds = [mode.from_tensor(t) for t in out[6:8]]
        fake_grads = overrideable_backward(*fake, *seeds)
    assert _layouts(out[:2]) == _layouts(fake_out[:2])
    assert _layouts(grads) == _layouts(fake_grads)
    fwd = torch.library.opcheck(
        overrideable, (dq, dk, dv), {"attn_bias": dbias}, test_utils=("test_faketensor",)
    )
    assert fwd == {"test_faketensor": "SUCCESS"}


def test_vmap_takes_the_math_path():
    """functorch has no batching rule for the overrideable op: under ``torch.vmap`` the stub
    answers MATH (the composite batches); values within float tolerance of CPU's."""
    q = _randn((3, 2, 2, 5, 8))

    def f(a):
        return sdpa(a, a, a, is_causal=True)

    with warnings.catch_warnings():  # CPU's flash op has no batching rule either: it warns
        warnings.simplefilter("ignore", UserWarning)
        expected = torch.vmap(f)(q)
    result = torch.vmap(f)(_mydev(q)[0])
    torch.testing.assert_close(result.cpu(), expected, atol=1e-6, rtol=1e-5)
    assert NAME not in torch_mydev.fallback_stats()


def _attention_with_grads(q, k, v, **kwargs):
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    out = sdpa(*leaves, **kwargs)
    out.backward(torch.ones_like(out))
    return [out.detach(), *(t.grad for t in leaves)]


def test_plain_calls_run_in_the_stub_with_pythons_bits(monkeypatch):
    """csrc_stub/ops/sdpa.cpp runs the plain calls (4-dim operands, no dropout, no bool mask, no
    bias gradient) as fallback/sdpa.py does: the same bits and layouts as the Python kernels
    give with every call sent to Python (the warning mode), counted under the same names;
    a call the stub leaves (a bool mask, which only a direct call passes: sdpa converts it
    first; 3-dim operands) goes to Python."""
    q = _randn((2, 5, 3, 8), seed=1).transpose(1, 2)  # [B, L, H, E] seen as [B, H, L, E]
    k, v = _randn((2, 3, 6, 8), seed=2), _randn((2, 3, 6, 8), seed=3)
    dev = [t.to("mydev") for t in (q, k, v)]
    dev[0] = _randn((2, 5, 3, 8), seed=1).to("mydev").transpose(1, 2)
    mask = _randn((5, 6), seed=4).to("mydev")
    stub = _attention_with_grads(*dev, is_causal=True) + _attention_with_grads(*dev, attn_mask=mask)
    assert torch_mydev._C._fallback_counts() == {NAME: 2, f"{NAME}_backward": 2}
    assert torch_mydev.fallback_stats() == {NAME: 2, f"{NAME}_backward": 2}
    torch_mydev.reset_fallback_stats()
    monkeypatch.setenv("TORCH_MYDEV_FALLBACK_WARN", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        python = _attention_with_grads(*dev, is_causal=True)
        python += _attention_with_grads(*dev, attn_mask=mask)
    assert torch_mydev._C._fallback_counts() == {}
    assert torch_mydev.fallback_stats()[NAME] == 2
    for a, b in zip(stub, python, strict=True):
        assert same_layout(a, b) and same_bits(a, b)
    expected = _attention_with_grads(q, k, v, is_causal=True)
    for a, b in zip(stub[:4], expected, strict=True):
        assert same_layout(a, b) and same_bits(a, b)
    monkeypatch.delenv("TORCH_MYDEV_FALLBACK_WARN")
    torch_mydev.reset_fallback_stats()
    overrideable(*dev, attn_bias=torch.ones(5, 6, dtype=torch.bool, device="mydev"))
    overrideable(*(t[0] for t in dev))
    assert NAME not in torch_mydev._C._fallback_counts()  # the mask's logical_not is
    assert torch_mydev.fallback_stats()[NAME] == 2
