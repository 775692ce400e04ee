"""Benchmark cases of whole eager training steps: the examples' CNN and transformer block."""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable

from harness import ROOT, Mode, Results, try_pair
from torch import nn

sys.path.insert(0, str(ROOT / "examples"))
import cnn
import transformer


def _stepper(model: nn.Module, data, target, make_optimizer) -> Callable[[], None]:
    """One eager training step (zero_grad, forward, cross-entropy, backward, optimizer step)
    of ``model`` with an optimizer made once, as a training loop runs it."""
    optimizer = make_optimizer(model.parameters())
    model.train()

    def step() -> None:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(data), target).backward()
        optimizer.step()

    return step


def bench_train_steps(mode: Mode, out: Results) -> None:
    """``examples/cnn.py`` (channels_last CNN, SGD) and ``examples/transformer.py`` (pre-norm
    encoder block, AdamW): one step on mydev against the same step on CPU, both eager with
    torch's default threads (what a user's eager loop costs per step, fallback included)."""
    cases = (
        ("train step: examples/cnn.py", cnn.make_inputs(), cnn.sgd),
        ("train step: examples/transformer.py", transformer.make_inputs(), transformer.adamw),
    )
    for case, (model, data, target), make_optimizer in cases:
        mydev_model = copy.deepcopy(model).to("mydev")
        mine = _stepper(mydev_model, data.to("mydev"), target.to("mydev"), make_optimizer)
        theirs = _stepper(model, data, target, make_optimizer)
        size = "x".join(str(n) for n in data.shape)
        try_pair(mode, out, case, size, mine, theirs, lambda: "eager, fallback included")
        del mydev_model, mine
