"""A pre-norm transformer encoder block trained one step on mydev and on CPU, alike.

``nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, batch_first=True,
norm_first=True, activation="gelu")``: LayerNorm, multi-head self-attention (in train mode
``nn.MultiheadAttention`` calls ``F.scaled_dot_product_attention``), residual adds,
LayerNorm, Linear, GELU, Linear; then the mean over the sequence and a linear head,
cross-entropy, backward and one AdamW step. The outputs, the loss, every gradient and every
updated parameter must equal CPU's within float tolerance, with CPU's strides
(``examples/cnn.py``'s ``check``; the step and the report are cnn.py's too). CPU's AdamW
takes its single-tensor loop, mydev's its ``_foreach`` one (torch counts PrivateUse1 as a
foreach device); ``main()`` prints which ops ran through the CPU fallback, and how often.

The two steps are bit-identical (every op is CPU's kernel on the same bytes, or a native
kernel in CPU's order), and the test asserts so. ``check``'s float32 tolerance would not do
as a bound: AdamW's first step moves each parameter by ``lr * g / (|g| + eps)``, and the
gradient of the key projection's bias is zero in exact arithmetic (softmax ignores a
constant added to every score of a row), about 1e-10 in float, so one ulp anywhere upstream
moves those updates by some 1e-5, past float32's ``atol``.

Dropout is 0.0, in train mode. With p > 0 and both steps seeded alike (``step_on_both``
does), every dropout mask matches CPU's: CPU's ``F.dropout`` runs ``_dropout_impl``
(aten/src/ATen/native/Dropout.cpp), which draws its ``bernoulli_`` noise into
``empty_like(input)``, in the input's memory order, and mydev, like CUDA, reaches
``native_dropout``, whose mask (``fallback.random._native_dropout``, the stub's
``csrc_stub/ops/random.cpp``, both CPU's ``native_dropout_cpu``) is laid out as its input too,
so ``dropout1``'s transposed input (``batch_first``) draws in the same order
(``tests/ops/test_transformer.py``). p > 0 also moves attention from CPU's flash kernel to
the math path (CPU's ``_fused_sdp_choice`` for dropout).

Run it with ``python examples/transformer.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

import torch
from torch import nn

import torch_mydev

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cnn  # examples/cnn.py, beside this file

BATCH, SEQUENCE, D_MODEL, HEADS, FEEDFORWARD, CLASSES = 8, 16, 64, 4, 128, 10


class SmallTransformer(nn.Module):
    """One pre-norm encoder block, the mean over the sequence, a linear head."""

    def __init__(self, dropout: float = 0.0, classes: int = CLASSES) -> None:
        super().__init__()
        self.block = nn.TransformerEncoderLayer(
            D_MODEL,
            HEADS,
            dim_feedforward=FEEDFORWARD,
            dropout=dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.head = nn.Linear(D_MODEL, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(x).mean(dim=1))


def make_inputs(
    seed: int = 0, dropout: float = 0.0
) -> tuple[SmallTransformer, torch.Tensor, torch.Tensor]:
    """A CPU model, a (batch, sequence, d_model) batch and its labels, all from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = SmallTransformer(dropout)
    data = torch.randn(BATCH, SEQUENCE, D_MODEL, generator=generator)
    target = torch.randint(0, CLASSES, (BATCH,), generator=generator)
    return model, data, target


def adamw(parameters: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    """The block's optimizer: AdamW with torch's defaults but the learning rate."""
    return torch.optim.AdamW(parameters, lr=1e-3)


def run_both(seed: int = 0, dropout: float = 0.0) -> tuple[cnn.StepResult, cnn.StepResult]:
    """One training step on CPU and on mydev, from the same initial weights, data and seed."""
    return cnn.step_on_both(*make_inputs(seed, dropout), make_optimizer=adamw, seed=seed)


def main() -> None:
    torch_mydev.reset_fallback_stats()
    cnn.report(*run_both())


if __name__ == "__main__":
    main()
