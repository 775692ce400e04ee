"""The fused RNN cells, which torch's RNN composites pick on every device but CPU.

``aten/src/ATen/native/RNN.cpp`` (``LSTMCell`` / ``GRUCell`` ``operator()``) takes the fused
path when ``input.is_cuda() || input.is_xpu() || input.is_privateuseone()``:
``_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell`` on the gate pre-activations, and their
backward kernels through autograd. Those ops have CUDA kernels only, so the CPU fallback
cannot run them; CPU itself never calls them. ``KERNELS`` holds the same math as CUDA's
kernels (``aten/src/ATen/native/cuda/RNN.cu``: ``lstm_cell_forward``,
``lstm_cell_backward``, ``gru_cell_forward``, ``gru_cell_backward``), written with CPU torch
ops; the fallback runs them on CPU aliases of the mydev arguments like any CPU kernel. Values
match CPU's LSTM/GRU to rounding (the gates are summed in CUDA's order).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

__all__ = ["KERNELS"]


def _gates(gates: Tensor, other: Tensor, bias1: Tensor | None, bias2: Tensor | None) -> Tensor:
    total = gates + other
    if bias1 is not None:
        total = total + bias1
    if bias2 is not None:
        total = total + bias2
    return total


def lstm_cell(
    input_gates: Tensor,
    hidden_gates: Tensor,
    cx: Tensor,
    input_bias: Tensor | None = None,
    hidden_bias: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """aten::_thnn_fused_lstm_cell: (hy, cy, workspace = the activated gates i, f, g, o)."""
    i, f, g, o = _gates(input_gates, hidden_gates, input_bias, hidden_bias).chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    return hy, cy, torch.cat([i, f, g, o], 1)


def lstm_cell_backward(
    grad_hy: Tensor | None,
    grad_cy: Tensor | None,
    cx: Tensor,
    cy: Tensor,
    workspace: Tensor,
    has_bias: bool,
) -> tuple[Tensor, Tensor, Tensor]:
    """aten::_thnn_fused_lstm_cell_backward_impl: (grad_gates, grad_cx, grad_bias)."""
    i, f, g, o = workspace.chunk(4, 1)
    zeros = torch.zeros_like(cx)
    grad_hy = zeros if grad_hy is None else grad_hy
    grad_cy = zeros if grad_cy is None else grad_cy
    tanh_cy = cy.tanh()
    grad_o = grad_hy * tanh_cy * o * (1 - o)
    grad_c = grad_hy * o * (1 - tanh_cy * tanh_cy) + grad_cy
    grad_i = grad_c * g * i * (1 - i)
    grad_f = grad_c * cx * f * (1 - f)
    grad_g = grad_c * i * (1 - g * g)
    grad_gates = torch.cat([grad_i, grad_f, grad_g, grad_o], 1)
    grad_bias = grad_gates.sum(0) if has_bias else torch.empty(0, dtype=cx.dtype)
    return grad_gates, grad_c * f, grad_bias


def gru_cell(
    input_gates: Tensor,
    hidden_gates: Tensor,
    hx: Tensor,
    input_bias: Tensor | None = None,
    hidden_bias: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """aten::_thnn_fused_gru_cell: (hy, workspace = r, z, n, hx, hidden n gate)."""
    if input_bias is not None:
        input_gates = input_gates + input_bias
    if hidden_bias is not None:
        hidden_gates = hidden_gates + hidden_bias
    ir, ii, in_ = input_gates.chunk(3, 1)
    hr, hi, hn = hidden_gates.chunk(3, 1)
    r = (ir + hr).sigmoid()
    z = (ii + hi).sigmoid()
    n = (in_ + r * hn).tanh()
    hy = n + z * (hx - n)
    return hy, torch.cat([r, z, n, hx, hn], 1)


def gru_cell_backward(
    grad_hy: Tensor, workspace: Tensor, has_bias: bool
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """aten::_thnn_fused_gru_cell_backward: grads of input/hidden gates, hx, biases."""
    r, z, n, hx, hn = workspace.chunk(5, 1)
    grad_z = grad_hy * (hx - n) * (1 - z) * z
    grad_hx = grad_hy * z
    grad_in = grad_hy * (1 - z) * (1 - n * n)
    grad_hn = grad_in * r
    grad_r = grad_in * hn * (1 - r) * r
    grad_input_gates = torch.cat([grad_r, grad_z, grad_in], 1)
    grad_hidden_gates = torch.cat([grad_r, grad_z, grad_hn], 1)
    if has_bias:
        biases = (grad_input_gates.sum(0), grad_hidden_gates.sum(0))
    else:
        biases = (torch.empty(0, dtype=hx.dtype), torch.empty(0, dtype=hx.dtype))
    return grad_input_gates, grad_hidden_gates, grad_hx, *biases


KERNELS: dict[str, Callable] = {
    "aten::_thnn_fused_lstm_cell": lstm_cell,
    "aten::_thnn_fused_lstm_cell_backward_impl": lstm_cell_backward,
    "aten::_thnn_fused_gru_cell": gru_cell,
    "aten::_thnn_fused_gru_cell_backward": gru_cell_backward,
}
