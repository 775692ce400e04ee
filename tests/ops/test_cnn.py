"""examples/cnn.py: one training step of a channels_last CNN on mydev equals the step on CPU.

Truth: the same model (same initial weights), data and SGD step on CPU. Outputs, loss,
gradients, updated parameters and BatchNorm buffers must match within float tolerance and
keep CPU's strides; native ops must never show up in the fallback counts.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

import torch_mydev
from tests.support.tensors import step_with_counts
from torch_mydev.ops.registry import KERNELS

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cnn.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("cnn_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it executes
    spec.loader.exec_module(module)
    return module


cnn = _load_example()


@pytest.fixture(scope="module")
def step():
    """One step on both devices, and the fallback counts of both runs."""
    yield from step_with_counts(lambda: cnn.run_both(seed=1))


def test_step_matches_cpu(step):
    cpu, mydev, _ = step
    worst = cnn.check(cpu, mydev)
    assert worst < 1e-4
    torch.testing.assert_close(mydev.loss.cpu(), cpu.loss)


def test_parameters_stay_on_mydev_in_channels_last(step):
    cpu, mydev, _ = step
    for name, value in mydev.state.items():
        assert value.device.type == "mydev", name
        assert value.stride() == cpu.state[name].stride(), name
    conv = mydev.state["features.0.weight"]
    assert conv.is_contiguous(memory_format=torch.channels_last)
    assert not conv.is_contiguous()
    assert set(mydev.grads) == {name for name, _ in cnn.SmallCNN().named_parameters()}
    for name, grad in mydev.grads.items():
        assert grad.device.type == "mydev" and grad.stride() == cpu.grads[name].stride(), name


def test_running_statistics_were_updated(step):
    _, mydev, _ = step
    mean = mydev.state["features.1.running_mean"]
    assert mean.abs().sum().item() > 0
    assert mydev.state["features.1.num_batches_tracked"].item() == 1


def test_convolution_goes_through_the_explicit_registrations(step):
    _, _, stats = step
    assert stats["aten::convolution_overrideable"] == 2
    assert stats["aten::convolution_backward_overrideable"] == 2


def test_native_ops_never_fall_back(step):
    _, _, stats = step
    for op in ("copy_", "clone", "_to_copy", "empty.memory_format", "empty_strided"):
        assert f"aten::{op}" not in stats
    # Whatever registry.KERNELS lists when the test runs (the elementwise ops included).
    native = {f"aten::{op}" for op in KERNELS}
    assert native.isdisjoint(stats), sorted(native & set(stats))


def test_main_prints_losses_difference_and_counts(capsys):
    cnn.main()
    out = capsys.readouterr().out
    assert "loss on cpu:" in out and "loss on mydev:" in out
    assert "max abs difference" in out
    lines = [line.split()[0] for line in out.splitlines() if line.startswith("  aten::")]
    assert "aten::convolution_overrideable" in lines
    assert lines == sorted(lines)
    torch_mydev.reset_fallback_stats()
