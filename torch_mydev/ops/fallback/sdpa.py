"""``scaled_dot_product_attention`` on mydev: the OVERRIDEABLE backend runs CPU's flash kernel.

``aten::scaled_dot_product_attention`` is CompositeImplicitAutograd; its C++ body
(aten/src/ATen/native/transformers/attention.cpp) asks ``_fused_sdp_choice_stub`` for a
backend. csrc_stub/ops/sdpa.cpp fills that stub for PrivateUse1, as OpenReg does, with CPU's
choice in which CPU's flash attention is answered as ``SDPBackend.OVERRIDEABLE``; the body
then calls ``aten::_scaled_dot_product_fused_attention_overrideable`` and autograd records
its backward, ``_scaled_dot_product_fused_attention_overrideable_backward``. Both are
registered here for PrivateUse1 and run CPU's flash kernels
(``_scaled_dot_product_flash_attention_for_cpu`` and its ``_backward``) on the mydev
tensors' memory, so outputs and gradients are CPU's bits and layouts. Every other choice
(math: dropout, 3-dim inputs, a mask that needs a gradient) is torch's composite, as on CPU.

Called directly, the forward also takes 3-dim ``(heads, seq, dim)`` inputs (one batch, as
the op's meta function does), and the backward also gives the bias gradient when
``grad_input_mask[3]`` asks (CPU's flash kernel has none: it is the gradient of CPU's math
composite, recomputed).
"""

from __future__ import annotations

import torch

from torch_mydev import _C
from torch_mydev.ops.fallback import (
    boxed as fallback,  # imported by it: its names are read at call time
)
from torch_mydev_rules.layout import preserve_format_strides

__all__ = ["OVERRIDEABLE", "fused_attention_overrideable", "fused_attention_overrideable_backward"]

OVERRIDEABLE = 4  # sdp::SDPBackend::overrideable, what torch._fused_sdp_choice gives on mydev

_FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
_FLASH_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward.default
_NAME = "aten::_scaled_dot_product_fused_attention_overrideable"


def _additive(attn_bias: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """attention.cpp ``convert_boolean_attn_mask``: a bool mask becomes 0 / -inf in `dtype`."""
    if attn_bias is None or attn_bias.dtype != torch.bool:
        return attn_bias
    zero = torch.zeros((), dtype=dtype, device=attn_bias.device)
    return torch.where(attn_bias.logical_not(), -float("inf"), zero)


def _like(result: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """`result` in the layout ``empty_like(reference)`` gives (what the meta function of the
    backward allocates, and a compiled graph checks): copied only where it differs."""
    strides = preserve_format_strides(tuple(reference.shape), tuple(reference.stride()))
    if result.stride() == strides:
        return result
    return torch.empty_strided(
        result.shape, strides, dtype=result.dtype, device=result.device
    ).copy_(result)


def _batched(*tensors: torch.Tensor | None) -> list[torch.Tensor | None]:
    """3-dim ``(heads, seq, dim)`` operands as one batch of 4-dim ones (views)."""
    return [t if t is None or t.dim() != 3 else t.unsqueeze(0) for t in tensors]


def fused_attention_overrideable(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_bias: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    return_debug_mask: bool = False,
    *,
    scale: float | None = None,
) -> tuple:
    """aten::_scaled_dot_product_fused_attention_overrideable: CPU's flash kernel.

    Returns what the op's meta function returns: output (in the query's layout, as CPU's
    flash kernel makes it), logsumexp (contiguous; CPU's values, float32 for
    float/half/bfloat16, float64 for double), no cumulative sequence lengths, the two
    sequence lengths, a CPU philox seed and offset (zero: no dropout) and no debug mask.
    Dropout raises CPU's flash error ("do not support dropout > 0").
    """
    three_dim = query.dim() == 3
    q, k, v, bias = _batched(query, key, value, _additive(attn_bias, query.dtype))
    output, logsumexp = fallback.run_on_cpu(
        _FLASH, (q, k, v, dropout_p, is_causal), {"attn_mask": bias, "scale": scale}, _NAME
    )
    if three_dim:
        output = output.squeeze(0)
    # CPU's is a (batch, seq, heads) buffer seen transposed; the op's meta function (and so a
    # compiled graph's stride check) says contiguous. CPU's flash backward reads either.
    logsumexp = logsumexp.contiguous()
    seed = torch.zeros((), dtype=torch.long)
    offset = torch.zeros((), dtype=torch.long)
    return (output, logsumexp, None, None, q.shape[2], k.shape[2], seed, offset, None)


def _bias_grad(
    grad_out: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_bias: torch.Tensor,
    is_causal: bool,
    scale: float | None,
) -> torch.Tensor:
    """The bias gradient of CPU's math composite (``_scaled_dot_product_attention_math``):
    with ``P = softmax(Q K^T * scale + bias)`` and ``dP = dO V^T``, it is
    ``P * (dP - rowsum(dP * P))`` summed over the bias's broadcast dimensions. Computed on
    CPU aliases of the mydev tensors in float32 (float64 for double), in the bias's dtype on
    its device. A kernel runs below autograd, so the formula is written out."""
    acc = torch.float64 if query.dtype == torch.float64 else torch.float32
    g, q, k, v, bias = (_C._cpu_alias(t).to(acc) for t in (grad_out, query, key, value, attn_bias))
    if k.size(-3) != q.size(-3):  # grouped-query attention: math repeats the key/value heads
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    scores = q @ k.transpose(-2, -1) * (q.size(-1) ** -0.5 if scale is None else scale) + bias
    if is_causal:
        causal = torch.ones(scores.shape[-2:], dtype=torch.bool).tril()
        scores = scores.masked_fill(causal.logical_not(), -float("inf"))
    p = torch.softmax(scores, -1)
    dp = g @ v.transpose(-2, -1)
    grad = (p * (dp - (dp * p).sum(-1, keepdim=True))).sum_to_size(attn_bias.shape)
    return grad.to(attn_bias.dtype).to(attn_bias.device)


def fused_attention_overrideable_backward(
    grad_out: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_bias: torch.Tensor | None,
    grad_input_mask: list[bool],
    out: torch.Tensor,
    logsumexp: torch.Tensor,
    cum_seq_q: torch.Tensor | None,
    cum_seq_k: torch.Tensor | None,
    max_q: int,
    max_k: int,
    dropout_p: float,
    is_causal: bool,
    philox_seed: torch.Tensor,
    philox_offset: torch.Tensor,
    *,
    scale: float | None = None,
) -> tuple:
    """aten::_scaled_dot_product_fused_attention_overrideable_backward: CPU's flash
    backward for query, key and value; the bias gradient of CPU's math composite when
    ``grad_input_mask[3]`` asks for it, each in its input's ``empty_like`` layout (CPU's
    flash backward may give a key or value gradient transposed; the meta function, and so a
    compiled graph, says ``empty_like``). Gradients not asked for are None (undefined)."""
    three_dim = query.dim() == 3
    bias = _additive(attn_bias, query.dtype)
    operands = _batched(grad_out, query, key, value, out, bias)
    grad_out4, q, k, v, out4, bias4 = operands
    grads = [None, None, None, None]
    if any(grad_input_mask[:3]):
        call = (grad_out4, q, k, v, out4, logsumexp, dropout_p, is_causal)
        flash = fallback.run_on_cpu(
            _FLASH_BACKWARD, call, {"attn_mask": bias4, "scale": scale}, f"{_NAME}_backward"
        )
        for i, (grad, reference) in enumerate(zip(flash, (query, key, value), strict=True)):
            if grad_input_mask[i]:
                grads[i] = _like(grad.squeeze(0) if three_dim else grad, reference)
    if grad_input_mask[3] and attn_bias is not None:
        if attn_bias.dtype == torch.bool:
            raise RuntimeError("a boolean attn_bias has no gradient")
        grad = _bias_grad(grad_out, query, key, value, attn_bias, is_causal, scale)
        grads[3] = _like(grad, attn_bias)
    return tuple(grads)


def register(library: torch.library.Library, key: str) -> None:
    """Register both kernels for the dispatch key `key` in `library` (an ``aten`` IMPL
    library): the fallback's Python key, behind the stub's own kernels for PrivateUse1
    (csrc_stub/ops/sdpa.cpp), which run the plain calls -- 4-dim operands, no dropout, no bool
    mask, no bias gradient -- as these do and send the rest here."""
    library.impl(
        "_scaled_dot_product_fused_attention_overrideable", fused_attention_overrideable, key
    )
    library.impl(
        "_scaled_dot_product_fused_attention_overrideable_backward",
        fused_attention_overrideable_backward,
        key,
    )
    _C._sdpa_kernels()
