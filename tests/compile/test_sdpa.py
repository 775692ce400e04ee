"""``torch.compile`` of scaled_dot_product_attention on mydev: the graph calls the
OVERRIDEABLE ops (torch_mydev/ops/fallback/sdpa.py) as extern kernels, and inductor's
stride checks of their outputs hold (they follow the ops' meta functions).

Truth: the same function compiled for CPU (whose graph calls CPU's flash ops).
"""

import torch

import torch_mydev
from tests.support.tensors import same_bits


def test_compiled_sdpa_forward_and_backward_equal_compiled_cpu():
    def f(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True).sin()

    gen = torch.Generator().manual_seed(0)
    cpu = [torch.randn(2, 3, 5, 8, generator=gen).requires_grad_() for _ in range(3)]
    dev = [t.detach().to("mydev").requires_grad_() for t in cpu]
    torch_mydev.reset_fallback_stats()
    compiled = torch.compile(f)
    expected, result = compiled(*cpu), compiled(*dev)
    assert same_bits(expected.detach(), result.detach().cpu())
    expected.sum().backward()
    result.sum().backward()
    for c, d in zip(cpu, dev, strict=True):
        assert same_bits(c.grad, d.grad.cpu())
    stats = torch_mydev.fallback_stats()
    assert stats["aten::_scaled_dot_product_fused_attention_overrideable"] == 1
    assert stats["aten::_scaled_dot_product_fused_attention_overrideable_backward"] == 1
