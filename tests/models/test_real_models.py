"""Model code written as real libraries write it trains one step on mydev as on CPU.

Truth: the same model (deep-copied before the step), batch and seed on CPU, through the
same user code (``tests/models/step.py``): AdamW built over ``model.parameters()`` before
``model.to(device)``, forward, loss, backward, ``optimizer.step()``. Asserted for each model:

- ``.to("mydev")`` keeps every Parameter object and tied Parameters stay one object (GPT-2's
  ``lm_head.weight is transformer.wte.weight``), so the optimizer built before the move
  steps the model's own parameters. That is CUDA's behaviour (``nn.Module._apply`` swaps
  ``param.data`` when ``torch._has_compatible_shallow_copy_type`` allows it); CPU's is
  trivially the same;
- every module's outputs (values, and the strides they leave the module with);
- the loss and every gradient, by parameter name (a tied weight gets one, summed, gradient);
- every parameter after the AdamW step and every buffer (BatchNorm's running statistics and
  ``num_batches_tracked``), by ``state_dict`` name, with CPU's strides.

Values are compared with ``torch.testing.assert_close``'s default tolerance for the dtype.
GPT-2 runs in float64: its key bias has a gradient that is zero in exact arithmetic and
rounding noise in float, and AdamW's first step moves a parameter by about ``lr * sign(g)``
whatever ``|g|``'s size, so float32 noise in that gradient would move the bias by ``lr``
(``examples/transformer.py``'s docstring); in float64 the noise is under AdamW's ``eps``.

Random draws: ``torch.manual_seed`` seeds mydev's generator too, and mydev draws what CPU
draws for the same op on the same shape and layout (``docs/fallback.md``). GPT-2's dropout
(p 0.1: ``nn.Dropout`` reaches ``native_dropout`` on mydev, as on CUDA, and CPU's
``_dropout_impl`` elsewhere, both a ``bernoulli_`` draw into a mask laid out as the input)
and timm's ``drop_path`` (``bernoulli_`` into a ``(batch, 1, 1, 1)`` tensor) therefore
drop the same elements and samples on both devices, and the tests compare them as drawn, in
train mode (a transposed dropout input too: ``tests/ops/test_transformer.py``). The
precondition tests
check on CPU that each model exercises what it is here for (samples dropped and kept, every
expert used, BatchNorm statistics moved).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.models import convnet, gpt2, llama, mixtral
from tests.models.step import (
    Activation,
    Case,
    Step,
    StepComparisons,
    activation_differences,
    build_on_both,
    gradient_differences,
    identity_differences,
    module_differences,
    run_both,
    state_differences,
)

CASES = [
    Case("gpt2_tied_lm_head", gpt2.GPT2LMHeadModel, gpt2.make_batch, dtype=torch.float64),
    Case("llama_rope_gqa_swiglu", llama.LlamaForCausalLM, llama.make_batch),
    Case("mixtral_moe_routing", mixtral.MoeForCausalLM, mixtral.make_batch),
    Case("convnet_channels_last_drop_path", convnet.make_model, convnet.make_batch),
]
BY_NAME = {case.name: case for case in CASES}


@pytest.fixture(scope="module", params=CASES, ids=lambda case: case.name)
def steps(request):
    """One step of the case on CPU and on mydev: ``(case, cpu, mydev)``."""
    cpu, mydev = run_both(request.param)
    yield request.param, cpu, mydev


class TestStepMatchesCpu(StepComparisons):
    """The four comparisons of ``tests/models/step.py`` over this module's cases."""


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_building_on_mydev_matches_cpu(case):
    """``with torch.device("mydev"): model = Model()`` (factories, ``nn.init`` and the
    models' own initialisation on mydev, drawing from mydev's generator) gives CPU's
    parameters and buffers, values and strides, with the same ties."""
    cpu, mydev = build_on_both(case)
    problems = module_differences(cpu, mydev)
    assert not problems, "\n".join(problems)


def test_module_differences_sees_a_changed_value_and_a_lost_tie():
    cpu, mydev = build_on_both(BY_NAME["gpt2_tied_lm_head"])
    assert module_differences(cpu, mydev) == []
    with torch.no_grad():
        mydev.transformer.wpe.weight[0, 0] += 1e-3
    untied = torch.nn.Parameter(mydev.lm_head.weight.detach().clone())
    mydev.lm_head.weight = untied
    problems = module_differences(cpu, mydev)
    assert len(problems) == 2
    assert "transformer.wpe.weight" in problems[0] and "tied" in problems[1]


def _outputs(step: Step, suffix: str) -> list[torch.Tensor]:
    """The outputs recorded for every module whose name ends with ``suffix``."""
    return [
        a.value for name, outs in step.activations.items() if name.endswith(suffix) for a in outs
    ]


def _gpt2_exercises(cpu: Step) -> None:
    """GPT-2 is tied (one gradient for both names) and its dropout zeroed elements."""
    assert cpu.tied == {"lm_head.weight": "transformer.wte.weight"}
    assert "lm_head.weight" in cpu.state and "lm_head.weight" not in cpu.grads
    dropped = [out for out in _outputs(cpu, "dropout") if (out == 0).any()]
    assert len(dropped) >= 4, "dropout zeroed nothing"


def _llama_exercises(cpu: Step) -> None:
    """Rotary caches are buffers (non-persistent) and attention has fewer key/value heads."""
    assert llama.KV_HEADS < llama.HEADS
    assert "layers.0.self_attn.rotary_emb" in cpu.activations
    assert not any("cached" in name or "inv_freq" in name for name in cpu.state)


def _moe_exercises(cpu: Step) -> None:
    """Every expert of both MoE layers got tokens (each routing path ran for each)."""
    for layer in ("mixtral_moe", "scatter_moe"):
        for i in range(mixtral.EXPERTS):
            assert f"{layer}.experts.{i}" in cpu.activations, f"{layer} expert {i} got no token"


def _convnet_exercises(cpu: Step) -> None:
    """Drop path dropped some samples and kept others, BatchNorm's statistics moved, and
    the activations are channels_last."""
    per_sample = [out.flatten(1).abs().sum(1) for out in _outputs(cpu, "drop_path")]
    assert any((sums == 0).any() for sums in per_sample), "no sample was dropped"
    assert all((sums != 0).any() for sums in per_sample), "every sample was dropped"
    assert cpu.state["conv_stem.bn.num_batches_tracked"].item() == 1
    assert not torch.equal(cpu.state["conv_stem.bn.running_var"], torch.ones(8))
    stem = cpu.activations["conv_stem.conv"][0].value
    assert stem.is_contiguous(memory_format=torch.channels_last) and not stem.is_contiguous()


EXERCISES = {
    "gpt2_tied_lm_head": _gpt2_exercises,
    "llama_rope_gqa_swiglu": _llama_exercises,
    "mixtral_moe_routing": _moe_exercises,
    "convnet_channels_last_drop_path": _convnet_exercises,
}


def test_cpu_step_exercises_what_the_case_is_for(steps):
    """Precondition, on CPU: every parameter got a gradient and moved, and the case's own
    features ran (``EXERCISES``), so the comparisons above are not vacuous."""
    case, cpu, _ = steps
    torch.manual_seed(case.seed)
    initial = case.make_model().to(case.dtype).state_dict()
    for name, grad in cpu.grads.items():
        assert grad is not None and grad.abs().sum() > 0, f"{name} got no gradient"
        assert not torch.equal(cpu.state[name], initial[name]), f"{name} did not move"
    EXERCISES[case.name](cpu)


def test_the_comparisons_see_a_difference(steps):
    """Each check fails on a gradient off by 0.1 %, a module output restrided, a state entry
    missing, a replaced Parameter and a lost tie."""
    _, cpu, mydev = steps
    name, grad = next((n, g) for n, g in mydev.grads.items() if g is not None)
    off = dataclasses.replace(mydev, grads={**mydev.grads, name: grad * 1.001})
    assert any(name in p for p in gradient_differences(cpu, off))
    module, outputs = next(
        (m, outs) for m, outs in mydev.activations.items() if outs[0].value.dim() > 1
    )
    strided = Activation(outputs[0].value, (*outputs[0].stride[:-2], 0, 0))
    changed = {**mydev.activations, module: [strided, *outputs[1:]]}
    assert any(
        "strides" in p
        for p in activation_differences(cpu, dataclasses.replace(mydev, activations=changed))
    )
    state = dict(mydev.state)
    missing = next(iter(state))
    del state[missing]
    assert any(
        missing in p for p in state_differences(cpu, dataclasses.replace(mydev, state=state))
    )
    name = next(iter(mydev.kept))
    replaced = dataclasses.replace(mydev, kept={**mydev.kept, name: False})
    assert any(name in p for p in identity_differences(cpu, replaced))
    untied = dataclasses.replace(mydev, tied={**mydev.tied, "x": "y"})
    assert any("tied" in p for p in identity_differences(cpu, untied))
