"""Hugging Face ``transformers`` models, built from tiny configs, train one step on mydev as on CPU.

Truth and checks are ``test_real_models.py``'s (``tests/models/step.py``): the same model,
batch and seed on CPU, AdamW built before ``model.to(device)``; Parameter identity and ties,
every module's outputs with their strides, loss, gradients, parameters after the step and
buffers. Nothing is downloaded: each model is built from its config (hidden size 32, two
layers, a 64-token vocabulary, batch 2, sequence 8 with two padding positions), with the
library's own initialisation, attention (``sdpa``, the default) and losses.

- ``GPT2LMHeadModel``: tied ``lm_head``/``wte`` (``tie_word_embeddings``), ``Conv1D``,
  dropout 0.1 (SDPA's math path on both devices draws the same contiguous masks). float64,
  for its key bias (``test_real_models.py``'s docstring says why).
- ``BertForMaskedLM``: two ties (decoder weight to the word embeddings, decoder bias to
  ``cls.predictions.bias``), ``token_type_ids`` from a buffer, GELU, LayerNorm, dropout 0.1,
  an additive padding mask; float64, for its key bias too.
- ``LlamaForCausalLM``: grouped-query attention, rotary embeddings computed in ``forward``
  under ``torch.autocast(device_type=..., enabled=False)``, RMSNorm, SwiGLU.
- ``MixtralForCausalLM``: router, top-2 experts and the load-balancing loss
  (``output_router_logits``), once with the library's default experts implementation
  (``grouped_mm``: ``sort``, ``histc`` of the expert ids, ``cumsum`` offsets,
  ``F.grouped_mm``) and once with ``experts_implementation="eager"`` (``one_hot``, ``where``,
  ``index_add_``). The default one takes the branch transformers takes for every device but
  CPU and MPS: ``torch.histc`` of int32 ids, which CUDA's kernel supports.
"""

from __future__ import annotations

import pytest
import torch
import transformers

from tests.models.step import (
    Case,
    StepComparisons,
    build_on_both,
    module_differences,
    run_both,
)

transformers.logging.set_verbosity_error()

SIZES = {"vocab_size": 64, "max_position_embeddings": 16}
DECODER = {
    **SIZES,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 64,
    "use_cache": False,
    "bos_token_id": 0,
    "eos_token_id": 0,
    "pad_token_id": 0,
}


def _batch(generator: torch.Generator, batch: int = 2, length: int = 8) -> dict:
    """Token ids, a mask whose second row ends in two pads, labels with -100 at the pads."""
    input_ids = torch.randint(1, SIZES["vocab_size"], (batch, length), generator=generator)
    attention_mask = torch.ones(batch, length, dtype=torch.long)
    attention_mask[1, -2:] = 0
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def gpt2() -> torch.nn.Module:
    config = transformers.GPT2Config(
        n_layer=2,
        n_embd=32,
        n_head=4,
        vocab_size=64,
        n_positions=16,
        use_cache=False,
        bos_token_id=0,
        eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel(config)


def bert() -> torch.nn.Module:
    config = transformers.BertConfig(
        **SIZES,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        pad_token_id=0,
    )
    return transformers.BertForMaskedLM(config)


def llama() -> torch.nn.Module:
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**DECODER))


def mixtral(**implementation: str) -> torch.nn.Module:
    config = transformers.MixtralConfig(
        **DECODER,
        num_local_experts=4,
        num_experts_per_tok=2,
        output_router_logits=True,
        **implementation,
    )
    return transformers.MixtralForCausalLM(config)


def mixtral_eager() -> torch.nn.Module:
    return mixtral(experts_implementation="eager")


CASES = [
    Case("hf_gpt2", gpt2, _batch, dtype=torch.float64),
    Case("hf_bert", bert, _batch, dtype=torch.float64),
    Case("hf_llama", llama, _batch),
    Case("hf_mixtral_grouped_mm", mixtral, _batch),
    Case("hf_mixtral_eager_experts", mixtral_eager, _batch),
]
TIES = {
    "hf_gpt2": {"lm_head.weight": "transformer.wte.weight"},
    "hf_bert": {
        "cls.predictions.decoder.weight": "bert.embeddings.word_embeddings.weight",
        "cls.predictions.decoder.bias": "cls.predictions.bias",
    },
}


@pytest.fixture(scope="module", params=CASES, ids=lambda case: case.name)
def steps(request):
    """One step of the case on CPU and on mydev: ``(case, cpu, mydev)``."""
    cpu, mydev = run_both(request.param)
    yield request.param, cpu, mydev


class TestStepMatchesCpu(StepComparisons):
    """The four comparisons of ``tests/models/step.py`` over this module's cases."""


def test_cpu_step_exercises_what_the_case_is_for(steps):
    """Precondition, on CPU: the library's ties are there, every parameter got a gradient
    (and moved), and dropout, where configured, zeroed elements."""
    case, cpu, _ = steps
    assert cpu.tied == TIES.get(case.name, {})
    for name, grad in cpu.grads.items():
        assert grad is not None and grad.abs().sum() > 0, f"{name} got no gradient"
    if case.name in ("hf_gpt2", "hf_bert"):
        dropouts = [
            a.value for name, outs in cpu.activations.items() if "drop" in name for a in outs
        ]
        assert any((out == 0).any() for out in dropouts), "dropout zeroed nothing"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_building_on_mydev_matches_cpu(case):
    """The model built under ``torch.device("mydev")`` (the library's initialisation runs
    on mydev) has CPU's parameters, buffers and ties."""
    cpu, mydev = build_on_both(case)
    problems = module_differences(cpu, mydev)
    assert not problems, "\n".join(problems)
