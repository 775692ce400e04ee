"""A GPT-2 language model written as Hugging Face's ``modeling_gpt2.py`` writes it.

What real code does here, and the tests run on mydev: ``Conv1D`` (a transposed Linear through
``torch.addmm`` over a ``view``), ``c_attn(...).split`` into query, key and value, heads split
with ``view`` + ``permute`` and merged with ``permute`` + ``contiguous`` + ``view``, the
causal mask as a boolean ``tril`` buffer sliced per call and applied with ``torch.where``
against ``torch.finfo(dtype).min``, a padding mask turned additive, ``gelu_new`` (the tanh
formula), dropout on contiguous tensors (so both devices draw their masks alike), learned
position embeddings over ``torch.arange(..., device=...)``, and the language-model head tied
to the token embedding (``lm_head.weight = wte.weight``, as ``tie_weights`` does), with the
shifted cross-entropy loss and ``-100`` labels at padding.
"""

from __future__ import annotations

import math

import torch
from torch import nn

VOCAB, POSITIONS, EMBED, HEADS, LAYERS, DROPOUT = 64, 16, 32, 4, 2, 0.1


class Conv1D(nn.Module):
    """HF's ``pytorch_utils.Conv1D``: a Linear whose weight is stored (in, out)."""

    def __init__(self, nf: int, nx: int) -> None:
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size_out = x.size()[:-1] + (self.nf,)  # noqa: RUF005 (HF's code, a torch.Size)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class NewGELUActivation(nn.Module):
    """HF's ``gelu_new``: the tanh approximation written out."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
        return 0.5 * x * (1.0 + torch.tanh(inner))


class GPT2Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        causal = torch.tril(torch.ones((POSITIONS, POSITIONS), dtype=torch.bool))
        self.register_buffer("bias", causal.view(1, 1, POSITIONS, POSITIONS), persistent=False)
        self.embed_dim, self.num_heads = EMBED, HEADS
        self.head_dim = EMBED // HEADS
        self.split_size = EMBED
        self.c_attn = Conv1D(3 * EMBED, EMBED)
        self.c_proj = Conv1D(EMBED, EMBED)
        self.attn_dropout = nn.Dropout(DROPOUT)
        self.resid_dropout = nn.Dropout(DROPOUT)

    def _attn(self, query, key, value, attention_mask):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        attn_weights = attn_weights / torch.full(
            [], value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device
        )
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length : key_length, :key_length]
        mask_value = torch.finfo(attn_weights.dtype).min
        mask_value = torch.full(
            [], mask_value, dtype=attn_weights.dtype, device=attn_weights.device
        )
        attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)
        attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.type(value.dtype)
        attn_weights = self.attn_dropout(attn_weights)
        return torch.matmul(attn_weights, value)

    def _split_heads(self, tensor: torch.Tensor) -> torch.Tensor:
        new_shape = tensor.size()[:-1] + (self.num_heads, self.head_dim)  # noqa: RUF005
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)

    def _merge_heads(self, tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (self.num_heads * self.head_dim,)  # noqa: RUF005
        return tensor.view(new_shape)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query, key, value = map(self._split_heads, (query, key, value))
        attn_output = self._merge_heads(self._attn(query, key, value, attention_mask))
        return self.resid_dropout(self.c_proj(attn_output))


class GPT2MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_fc = Conv1D(4 * EMBED, EMBED)
        self.c_proj = Conv1D(EMBED, 4 * EMBED)
        self.act = NewGELUActivation()
        self.dropout = nn.Dropout(DROPOUT)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.act(self.c_fc(hidden_states))))


class GPT2Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(EMBED, eps=1e-5)
        self.attn = GPT2Attention()
        self.ln_2 = nn.LayerNorm(EMBED, eps=1e-5)
        self.mlp = GPT2MLP()

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden_states = self.attn(self.ln_1(hidden_states), attention_mask) + hidden_states
        return hidden_states + self.mlp(self.ln_2(hidden_states))


class GPT2Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, EMBED)
        self.wpe = nn.Embedding(POSITIONS, EMBED)
        self.drop = nn.Dropout(DROPOUT)
        self.h = nn.ModuleList(GPT2Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(EMBED, eps=1e-5)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        batch_size, length = input_ids.shape
        dtype = self.wte.weight.dtype
        position_ids = torch.arange(0, length, dtype=torch.long, device=input_ids.device)
        position_ids = position_ids.unsqueeze(0)
        attention_mask = attention_mask.view(batch_size, -1)[:, None, None, :]
        attention_mask = attention_mask.to(dtype=dtype)
        attention_mask = (1.0 - attention_mask) * torch.finfo(dtype).min
        hidden_states = self.drop(self.wte(input_ids) + self.wpe(position_ids))
        for block in self.h:
            hidden_states = block(hidden_states, attention_mask)
        return self.ln_f(hidden_states)


class GPT2LMHeadModel(nn.Module):
    """The LM: ``transformer`` and a bias-free ``lm_head`` tied to ``transformer.wte``."""

    def __init__(self) -> None:
        super().__init__()
        self.transformer = GPT2Model()
        self.lm_head = nn.Linear(EMBED, VOCAB, bias=False)
        self.apply(self._init_weights)
        self.lm_head.weight = self.transformer.wte.weight  # PreTrainedModel.tie_weights

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        """GPT2PreTrainedModel._init_weights: N(0, 0.02) weights, zero biases, unit
        LayerNorms, and the residual projections (``c_proj``) at 0.02 / sqrt(2 * layers)."""
        if isinstance(module, (nn.Linear, Conv1D)):
            module.weight.data.normal_(mean=0.0, std=0.02)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)
        for name, p in module.named_parameters():
            if name == "c_proj.weight":
                p.data.normal_(mean=0.0, std=0.02 / math.sqrt(2 * LAYERS))

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, labels: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        lm_logits = self.lm_head(self.transformer(input_ids, attention_mask))
        shift_logits = lm_logits[..., :-1, :].contiguous()
        shift_labels = labels[..., 1:].contiguous()
        loss = nn.CrossEntropyLoss()(shift_logits.view(-1, VOCAB), shift_labels.view(-1))
        return loss, lm_logits


def make_batch(generator: torch.Generator, batch: int = 2, length: int = 8) -> dict:
    """Token ids, a padding mask whose second row ends in two pads, and labels (-100 at pads)."""
    input_ids = torch.randint(0, VOCAB, (batch, length), generator=generator)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    attention_mask[1, -2:] = 0
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
