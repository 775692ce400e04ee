"""Mixture-of-experts routing written as real code writes it: two styles in one small LM.

``MixtralSparseMoeBlock`` is Hugging Face's (``modeling_mixtral.py``): router softmax in
float32, ``topk``, renormalised weights, ``one_hot(...).permute`` for the expert mask, the hit
experts found by ``greater(...).nonzero()`` and iterated as tensors (``ModuleList[tensor]``),
``torch.where`` for each expert's tokens, ``hidden_states[None, top_x]`` gathering, and
``index_add_`` of the weighted expert outputs into a ``zeros`` buffer; the router's logits go
to ``load_balancing_loss_func`` (``one_hot``, means, the auxiliary loss).

``ScatterMoeBlock`` is the other common style (the "makeMoE" tutorials, Switch-style routers):
the top-k logits ``scatter``ed into a ``full_like(-inf)`` tensor, softmax over it, each
expert's tokens picked by a boolean mask (``(top_indices == i).any(-1)``), skipped when
``mask.any()`` is false, and accumulated by ``out[mask] += ...`` (index, then ``index_put_``).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from tests.models.llama import LlamaRMSNorm

VOCAB, HIDDEN, FFN, EXPERTS, TOP_K, AUX_COEF = 64, 32, 64, 4, 2, 0.02


class MixtralBlockSparseTop2MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w1 = nn.Linear(HIDDEN, FFN, bias=False)
        self.w2 = nn.Linear(FFN, HIDDEN, bias=False)
        self.w3 = nn.Linear(HIDDEN, FFN, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.w2(self.act_fn(self.w1(hidden_states)) * self.w3(hidden_states))


class MixtralSparseMoeBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden_dim, self.num_experts, self.top_k = HIDDEN, EXPERTS, TOP_K
        self.gate = nn.Linear(HIDDEN, EXPERTS, bias=False)
        self.experts = nn.ModuleList(MixtralBlockSparseTop2MLP() for _ in range(EXPERTS))

    def forward(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)

        final_hidden_states = torch.zeros(
            (batch_size * sequence_length, hidden_dim),
            dtype=hidden_states.dtype,
            device=hidden_states.device,
        )
        expert_mask = F.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            expert_layer = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx, None]
            final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
        final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)
        return final_hidden_states, router_logits


class ScatterMoeBlock(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.top_k = TOP_K
        self.router = nn.Linear(HIDDEN, EXPERTS)
        self.experts = nn.ModuleList(MixtralBlockSparseTop2MLP() for _ in range(EXPERTS))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.router(x)
        top_k_logits, indices = logits.topk(self.top_k, dim=-1)
        zeros = torch.full_like(logits, float("-inf"))
        sparse_logits = zeros.scatter(-1, indices, top_k_logits)
        gating_output = F.softmax(sparse_logits, dim=-1)
        final_output = torch.zeros_like(x)
        flat_x = x.view(-1, x.size(-1))
        flat_gating_output = gating_output.view(-1, gating_output.size(-1))
        for i, expert in enumerate(self.experts):
            expert_mask = (indices == i).any(dim=-1)
            flat_mask = expert_mask.view(-1)
            if flat_mask.any():
                expert_output = expert(flat_x[flat_mask])
                gating_scores = flat_gating_output[flat_mask, i].unsqueeze(1)
                final_output[expert_mask] += expert_output * gating_scores
        return final_output, logits.view(-1, logits.size(-1))


def load_balancing_loss_func(gate_logits: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """HF's auxiliary loss (Switch Transformer eqs. 4-6), without an attention mask."""
    compute_device = gate_logits[0].device
    concatenated = torch.cat([layer_gate.to(compute_device) for layer_gate in gate_logits], dim=0)
    routing_weights = F.softmax(concatenated, dim=-1)
    _, selected_experts = torch.topk(routing_weights, TOP_K, dim=-1)
    expert_mask = F.one_hot(selected_experts, EXPERTS)
    tokens_per_expert = torch.mean(expert_mask.float(), dim=0)
    router_prob_per_expert = torch.mean(routing_weights, dim=0)
    overall_loss = torch.sum(tokens_per_expert * router_prob_per_expert.unsqueeze(0))
    return overall_loss * EXPERTS


class MoeForCausalLM(nn.Module):
    """Embedding, a Mixtral MoE layer and a scatter MoE layer (pre-norm, residual), a head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, HIDDEN)
        self.norm_1 = LlamaRMSNorm(HIDDEN)
        self.mixtral_moe = MixtralSparseMoeBlock()
        self.norm_2 = LlamaRMSNorm(HIDDEN)
        self.scatter_moe = ScatterMoeBlock()
        self.norm = LlamaRMSNorm(HIDDEN)
        self.lm_head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> tuple:
        hidden_states = self.embed_tokens(input_ids)
        moe_output, router_1 = self.mixtral_moe(self.norm_1(hidden_states))
        hidden_states = hidden_states + moe_output
        moe_output, router_2 = self.scatter_moe(self.norm_2(hidden_states))
        hidden_states = hidden_states + moe_output
        logits = self.lm_head(self.norm(hidden_states))
        shift_logits = logits[..., :-1, :].contiguous().view(-1, VOCAB)
        loss = F.cross_entropy(shift_logits, labels[..., 1:].contiguous().view(-1))
        aux_loss = load_balancing_loss_func((router_1, router_2))
        return loss + AUX_COEF * aux_loss, logits


def make_batch(generator: torch.Generator, batch: int = 2, length: int = 8) -> dict:
    input_ids = torch.randint(0, VOCAB, (batch, length), generator=generator)
    return {"input_ids": input_ids, "labels": input_ids.clone()}
