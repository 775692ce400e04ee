"""examples/transformer.py: one training step of a pre-norm transformer block on mydev equals CPU's.

Truth: the same model (same initial weights), data, seed and AdamW step on CPU. Every op of
the step runs CPU's own kernel on the same bytes (the zero-copy fallback) or a native mydev
kernel that computes in CPU's order, so outputs, loss, gradients and updated parameters are
bit-identical, with CPU's strides, and that is what is asserted: no float tolerance bounds
AdamW's first step, whose update of a parameter with a rounding-noise gradient (the key
bias) flips with one ulp upstream (examples/transformer.py's docstring). The fallback counts
are pinned op by op, so a new native kernel or a regression changes them visibly.
"""

from __future__ import annotations

import dataclasses
import gc
import sys
from pathlib import Path

import pytest
import torch

import torch_mydev
from tests.support.tensors import step_with_counts

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import transformer  # examples/transformer.py, which imports cnn.py beside it

# What the mydev step sends through the CPU fallback (the CPU step adds nothing), torch 2.13.
# 14 parameters: 12 in the block (attention in/out projections, two Linears, two LayerNorms,
# weight and bias each) and the head's weight and bias.
FALLBACK = {
    # matmul family: the five Linears. Forward: addmm 4, and mm for the attention's
    # in-projection, whose input is a transposed view (matmul folds it; bias added natively).
    # Backward: mm 10 (input and weight gradients).
    "aten::addmm": 4,
    "aten::mm": 11,
    # attention: the OVERRIDEABLE backend (CPU would take flash, as dropout is 0), whose
    # kernels are CPU's flash kernel and its backward (the choice itself is the stub's)
    "aten::_scaled_dot_product_fused_attention_overrideable": 1,
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": 1,
    # normalisation, activation, loss
    "aten::native_layer_norm": 2,
    "aten::native_layer_norm_backward": 2,
    "aten::gelu": 1,
    "aten::gelu_backward": 1,
    "aten::_log_softmax": 1,
    "aten::_log_softmax_backward_data": 1,
    "aten::nll_loss_forward": 1,
    "aten::nll_loss_backward": 1,
    # AdamW's _foreach loop, once per parameter (its mul_/add_/div_ are native)
    "aten::lerp.Scalar_out": 14,
    "aten::addcmul.out": 14,
    "aten::sqrt": 14,
    "aten::addcdiv.out": 14,
}


@pytest.fixture(scope="module")
def step():
    """One step on both devices, and the fallback counts of both runs."""
    yield from step_with_counts(lambda: transformer.run_both(seed=1))


def test_step_equals_cpu_bit_for_bit(step):
    cpu, mydev, _ = step
    # check: assert_close's float32 tolerance and CPU's strides for every tensor; the step
    # is in fact bit-exact, and a native kernel that is not must show up here.
    assert transformer.cnn.check(cpu, mydev) == 0.0
    assert torch.equal(mydev.loss.cpu(), cpu.loss)


def test_every_parameter_got_a_gradient_and_moved(step):
    cpu, mydev, _ = step
    initial, _, _ = transformer.make_inputs(seed=1)
    names = {name for name, _ in initial.named_parameters()}
    assert set(mydev.grads) == set(cpu.grads) == names
    for name, before in initial.named_parameters():
        assert mydev.grads[name].abs().sum().item() > 0, name
        after = mydev.state[name]
        assert after.device.type == "mydev" and after.stride() == before.stride(), name
        assert not torch.equal(after.cpu(), before.detach()), f"{name} was not updated"


def test_fallback_ops_are_exactly_these(step):
    _, _, stats = step
    assert stats == FALLBACK


def test_check_sees_a_one_ulp_difference_and_a_stride_change(step):
    cpu, mydev, _ = step
    grad = mydev.grads["block.linear1.weight"]
    nudged = torch.nextafter(grad, torch.full_like(grad, float("inf")))
    off = dataclasses.replace(mydev, grads={**mydev.grads, "block.linear1.weight": nudged})
    assert 0 < transformer.cnn.check(cpu, off) < 1e-6  # within tolerance, but not 0
    wrong = dataclasses.replace(mydev, grads={**mydev.grads, "block.linear1.weight": grad * 2})
    with pytest.raises(AssertionError, match=r"grad block\.linear1\.weight"):
        transformer.cnn.check(cpu, wrong)
    strided = dataclasses.replace(mydev, output=mydev.output.t().contiguous().t())
    with pytest.raises(AssertionError, match="output: strides"):
        transformer.cnn.check(cpu, strided)


def test_memory_returns_to_baseline():
    gc.collect()
    baseline = torch.mydev.memory_allocated()
    cpu, mydev = transformer.run_both(seed=2)
    assert torch.mydev.memory_allocated() > baseline  # the results hold mydev memory
    del cpu, mydev
    # No reference cycle holds mydev memory: it is back without a garbage collection.
    assert torch.mydev.memory_allocated() == baseline


def _difference(cpu, mydev) -> str | None:
    """``check``'s message, or None; the failure's traceback (and its tensors) is let go."""
    try:
        transformer.cnn.check(cpu, mydev)
    except AssertionError as error:
        return str(error)
    return None


def test_seeded_dropout_matches_cpu():
    difference = _difference(*transformer.run_both(seed=1, dropout=0.1))
    assert difference is None, difference


def test_main_prints_losses_difference_and_counts(capsys):
    transformer.main()
    out = capsys.readouterr().out
    assert "loss on cpu:" in out and "loss on mydev:" in out
    assert "max abs difference (outputs, loss, gradients, updated parameters): 0\n" in out
    counts = dict(line.split() for line in out.splitlines() if line.startswith("  aten::"))
    assert list(counts) == sorted(FALLBACK)
    assert {op: int(n) for op, n in counts.items()} == FALLBACK
    torch_mydev.reset_fallback_stats()
