"""``scaled_dot_product_attention`` on mydev takes the backend CPU takes.

``aten::scaled_dot_product_attention`` is CompositeImplicitAutograd: its C++ body
(aten/src/ATen/native/transformers/attention.cpp) asks ``_fused_sdp_choice_stub`` for a
backend, a DispatchStub that PrivateUse1 can only fill from C++. Without it mydev took the
math path (``bmm``, ``_softmax``, ``tril`` through the fallback) while CPU runs its flash
kernel, so values differed by ulps. This kernel, registered for PrivateUse1 and
AutogradPrivateUse1, is that C++ body for the backends CPU's stub picks: it asks
``aten::_fused_sdp_choice`` (which runs CPU's choice through the fallback) and, for
``flash_attention``, calls ``_scaled_dot_product_flash_attention_for_cpu`` as the C++ body
does for a non-CUDA device (autograd records that op's own backward); any other choice runs
the CompositeImplicitAutograd kernel itself (``OpOverload.decompose``).
"""

from __future__ import annotations

import torch

__all__ = ["FLASH_ATTENTION", "scaled_dot_product_attention"]

FLASH_ATTENTION = 1  # sdp::SDPBackend::flash_attention


def _validate(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: torch.Tensor | None
) -> None:
    """attention.cpp ``validate_sdpa_input``, with its messages."""
    if not (query.dtype == key.dtype == value.dtype):
        raise RuntimeError(
            "Expected query, key, and value to have the same dtype, but got query.dtype: "
            f"{query.dtype} key.dtype: {key.dtype} and value.dtype: {value.dtype} instead."
        )
    if not (query.device == key.device == value.device):
        raise RuntimeError(
            "Expected query, key, and value to have the same device type, but got "
            f"query.device: {query.device} key.device: {key.device} and value.device: "
            f"{value.device} instead."
        )
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError(
            "Expected query, key, and value to all be  at least 2 dimensional, but got "
            f"query.dim: {query.dim()} key.dim: {key.dim()} and value.dim: {value.dim()} "
            "instead."
        )
    if attn_mask is not None and attn_mask.dtype not in (torch.bool, torch.float, query.dtype):
        raise RuntimeError(
            "Expected attn_mask dtype to be bool or float or to match query dtype, but got "
            f"attn_mask.dtype: {attn_mask.dtype} and  query.dtype: {query.dtype} instead."
        )


def scaled_dot_product_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """aten::scaled_dot_product_attention with CPU's backend choice (module docstring)."""
    op = torch.ops.aten.scaled_dot_product_attention.default
    call = (query, key, value, attn_mask, dropout_p, is_causal)
    options = {"scale": scale, "enable_gqa": enable_gqa}
    _validate(query, key, value, attn_mask)
    if torch.ops.aten._fused_sdp_choice.default(*call, **options) != FLASH_ATTENTION:
        return op.decompose(*call, **options)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        # attention.cpp convert_boolean_attn_mask: an additive mask in the query's dtype
        zero = torch.scalar_tensor(0.0, dtype=query.dtype, device=attn_mask.device)
        attn_mask = torch.where(attn_mask.logical_not(), -float("inf"), zero)
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default(
        query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale
    )[0]
