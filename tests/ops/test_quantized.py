"""Quantized tensors on mydev: one clear ``NotImplementedError`` that says what to do instead.

CUDA runs a few quantized ops (``QuantizedCUDA``); mydev has none (``ops/quantized.py``).
Truth for the way out: the same quantization on CPU, dequantized, then moved to mydev.
"""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor.*deprecated")

MESSAGE = r"mydev does not support quantized tensors \(.*\); quantize on CPU instead"


def _x(device: str = "mydev") -> torch.Tensor:
    return torch.linspace(-1.0, 1.0, 6).reshape(2, 3).to(device)


def _q_cpu() -> torch.Tensor:
    return torch.quantize_per_tensor(_x("cpu"), 0.1, 3, torch.quint8)


def _mydev(values) -> torch.Tensor:
    return torch.tensor(values, device="mydev")


CALLS = {
    "quantize_per_tensor": lambda: torch.quantize_per_tensor(_x(), 0.1, 0, torch.quint8),
    "quantize_per_tensor_qint8": lambda: torch.quantize_per_tensor(_x(), 0.05, 0, torch.qint8),
    "quantize_per_tensor_tensor_qparams": lambda: torch.quantize_per_tensor(
        _x(), _mydev(0.1), _mydev(0), torch.quint8
    ),
    "quantize_per_tensor_dynamic": lambda: torch.quantize_per_tensor_dynamic(
        _x(), torch.quint8, False
    ),
    "quantize_per_channel": lambda: torch.quantize_per_channel(
        _x(), _mydev([0.1, 0.2]), _mydev([0, 1]), 0, torch.quint8
    ),
    "empty_quantized_dtype": lambda: torch.empty(3, dtype=torch.quint8, device="mydev"),
    "empty_affine_quantized": lambda: torch._empty_affine_quantized(
        [3], scale=0.1, zero_point=0, dtype=torch.quint8, device="mydev"
    ),
    "quantized_cpu_tensor_to_mydev": lambda: _q_cpu().to("mydev"),
    "copy_from_quantized_cpu": lambda: torch.empty(2, 3, device="mydev").copy_(_q_cpu()),
}


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_quantized_tensors_are_refused_with_one_clear_error(call):
    with pytest.raises(NotImplementedError, match=MESSAGE) as caught:
        call()
    assert "dequantize()" in str(caught.value)


def test_what_the_error_advises_works():
    q = torch.quantize_per_tensor(_x().cpu(), 0.1, 3, torch.quint8)
    moved = q.dequantize().to("mydev")
    assert moved.device.type == "mydev"
    assert torch.equal(moved.cpu(), _q_cpu().dequantize())


def test_fake_quantization_stays_a_float_op_on_mydev():
    """No quantized tensor is made: the fallback runs it as CPU does."""
    args = (0.1, 3, 0, 255)
    got = torch.fake_quantize_per_tensor_affine(_x(), *args)
    assert got.device.type == "mydev"
    assert torch.equal(got.cpu(), torch.fake_quantize_per_tensor_affine(_x("cpu"), *args))
