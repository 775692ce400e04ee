"""Warnings of ops that run through the CPU fallback come as often as on CPU.

``x[mask_uint8]`` warned twice on mydev: ``index.Tensor`` is structured, its generated
composite ran the meta function (IndexingUtils.h ``expandTensors``: the uint8 deprecation
warning) on mydev and then CPU's ``out=`` kernel ran it again. ``fallback.META_WARNS_ON_CPU``
runs the functional overload through CPU's functional kernel. Truth: the same call on CPU,
counted with ``warnings.catch_warnings(record=True)``.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import torch_mydev
from tests.support.tensors import same_bits, same_layout
from torch_mydev.ops.fallback import boxed as fallback

X = torch.arange(24.0).reshape(2, 3, 4)
M1 = torch.tensor([1, 0], dtype=torch.uint8)
M2 = torch.tensor([[1, 0, 1], [0, 1, 1]], dtype=torch.uint8)
B2 = M2.bool()

CALLS = {
    "uint8_mask": lambda x, dev: x[M1.to(dev)],
    "uint8_mask_2d": lambda x, dev: x[M2.to(dev)],
    "uint8_mask_after_slice": lambda x, dev: x[:, M2[0].to(dev)],
    "uint8_mask_and_index": lambda x, dev: x[M1.to(dev), torch.tensor([2]).to(dev)],
    "uint8_cpu_mask": lambda x, dev: x[M2],  # CPU index tensors may join mydev (ATen moves them)
    "two_uint8_masks": lambda x, dev: x[M1.to(dev), M2[0].to(dev)],
    "bool_mask": lambda x, dev: x[B2.to(dev)],
    "index_op": lambda x, dev: torch.ops.aten.index.Tensor(x, [M1.to(dev)]),
}


def _run(call, device: str):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = call(X.to(device), device)
    return out, [(w.category, str(w.message)) for w in seen]


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_index_warns_as_often_as_cpu_and_gives_cpu_values(call):
    expected, expected_warnings = _run(call, "cpu")
    got, got_warnings = _run(call, "mydev")
    assert got_warnings == expected_warnings
    assert got.device.type == "mydev"
    assert same_layout(expected, got) and same_bits(expected, got)


def test_uint8_mask_gradient_equals_cpu():
    grads = []
    for device in ("cpu", "mydev"):
        leaf = X.to(device, copy=True).requires_grad_()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (leaf[M2.to(device)] * torch.arange(4.0).to(device)).sum().backward()
        grads.append(leaf.grad)
    assert grads[1].device.type == "mydev"
    assert same_bits(grads[0], grads[1])


def test_index_runs_cpu_functional_kernel_once():
    """One CPU call, counted under its own name (the composite counted ``index.Tensor_out``
    and the ``nonzero`` its meta ran on mydev)."""
    torch_mydev.reset_fallback_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        X.to("mydev")[M2.to("mydev")]
    assert torch_mydev.fallback_stats() == {"aten::index.Tensor": 1}
    torch_mydev.reset_fallback_stats()


def test_meta_warns_on_cpu_assumption():
    """What ``META_WARNS_ON_CPU`` works around: a structured op whose generated composite
    would otherwise serve PrivateUse1 (torch 2.13)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for name in fallback.META_WARNS_ON_CPU:
        qualified = f"aten::{name}"
        assert has(qualified, "CompositeExplicitAutogradNonFunctional"), name
        assert has(qualified, "CPU"), name
        assert has(qualified, "PrivateUse1"), name  # registered by the fallback
