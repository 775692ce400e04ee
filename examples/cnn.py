"""A small CNN trained one step on mydev and on CPU, from the same weights and data.

Conv2d, BatchNorm2d, ReLU, MaxPool2d, AdaptiveAvgPool2d, Linear and cross-entropy, all in
channels_last; forward, backward and one SGD step (momentum, weight decay). The outputs,
the loss, every gradient, every updated parameter and the BatchNorm running statistics
must equal CPU's within float tolerance, with CPU's strides. Most ops have no mydev kernel
and run through the CPU fallback; ``main()`` prints how often each did.

Run it with ``python examples/cnn.py``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

import torch_mydev

BATCH, CHANNELS, SIZE, CLASSES = 8, 3, 16, 10


class SmallCNN(nn.Module):
    """Two conv blocks (conv, batch norm, ReLU), max and adaptive average pooling, a linear head."""

    def __init__(self, classes: int = CLASSES) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(CHANNELS, 8, kernel_size=3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


@dataclass
class StepResult:
    """What one training step produced on one device (tensors stay on that device)."""

    output: torch.Tensor
    loss: torch.Tensor
    grads: dict[str, torch.Tensor]
    state: dict[str, torch.Tensor]  # parameters after the SGD step, and the buffers


def make_inputs(seed: int = 0) -> tuple[SmallCNN, torch.Tensor, torch.Tensor]:
    """A CPU model in channels_last, a channels_last batch and its labels, all from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = SmallCNN().to(memory_format=torch.channels_last)
    data = torch.randn(BATCH, CHANNELS, SIZE, SIZE, generator=generator)
    data = data.contiguous(memory_format=torch.channels_last)
    target = torch.randint(0, CLASSES, (BATCH,), generator=generator)
    return model, data, target


def sgd(parameters: Iterable[nn.Parameter]) -> torch.optim.Optimizer:
    """The CNN's optimizer: SGD with momentum and weight decay."""
    return torch.optim.SGD(parameters, lr=0.1, momentum=0.9, weight_decay=1e-4)


def train_step(
    model: nn.Module,
    data: torch.Tensor,
    target: torch.Tensor,
    make_optimizer: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer] = sgd,
) -> StepResult:
    """Forward, cross-entropy, backward and one step of ``make_optimizer(parameters)``, on
    whatever device ``model`` is on."""
    model.train()
    optimizer = make_optimizer(model.parameters())
    optimizer.zero_grad()
    output = model(data)
    loss = nn.functional.cross_entropy(output, target)
    loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    optimizer.step()
    return StepResult(output.detach(), loss.detach(), grads, model.state_dict())


def step_on_both(
    model: nn.Module,
    data: torch.Tensor,
    target: torch.Tensor,
    make_optimizer: Callable[[Iterable[nn.Parameter]], torch.optim.Optimizer] = sgd,
    seed: int = 0,
) -> tuple[StepResult, StepResult]:
    """``train_step`` on the CPU ``model`` and on a mydev copy of it (same weights and data).

    Each step starts after ``torch.manual_seed(seed)``, which seeds mydev's generators too,
    so random ops of the two steps draw from equal streams.
    """
    mydev_model = copy.deepcopy(model).to("mydev")
    torch.manual_seed(seed)
    cpu = train_step(model, data, target, make_optimizer)
    torch.manual_seed(seed)
    mydev = train_step(mydev_model, data.to("mydev"), target.to("mydev"), make_optimizer)
    return cpu, mydev


def run_both(seed: int = 0) -> tuple[StepResult, StepResult]:
    """One training step on CPU and on mydev, from the same initial weights and data."""
    return step_on_both(*make_inputs(seed), seed=seed)


def _pairs(cpu: StepResult, mydev: StepResult):
    yield "output", cpu.output, mydev.output
    yield "loss", cpu.loss, mydev.loss
    for name in cpu.grads:
        yield f"grad {name}", cpu.grads[name], mydev.grads[name]
    for name in cpu.state:
        yield name, cpu.state[name], mydev.state[name]


def check(cpu: StepResult, mydev: StepResult) -> float:
    """Assert mydev's step equals CPU's (values within tolerance, same strides, on mydev).

    Returns the largest absolute difference over every compared float tensor.
    """
    worst = 0.0
    for name, c, m in _pairs(cpu, mydev):
        assert m.device.type == "mydev", f"{name} is on {m.device}"
        assert m.stride() == c.stride(), f"{name}: strides {m.stride()} != CPU's {c.stride()}"
        torch.testing.assert_close(m.cpu(), c, msg=lambda text, name=name: f"{name}: {text}")
        if c.is_floating_point() and c.numel():
            worst = max(worst, (m.cpu() - c).abs().max().item())
    return worst


def report(cpu: StepResult, mydev: StepResult) -> None:
    """``check`` the two steps, then print both losses, the largest difference and the
    fallback counts (``torch_mydev.fallback_stats()``), sorted by op."""
    worst = check(cpu, mydev)
    print(f"loss on cpu:   {cpu.loss.item():.6f}")
    print(f"loss on mydev: {mydev.loss.item():.6f}")
    print(f"max abs difference (outputs, loss, gradients, updated parameters): {worst:.3g}")
    print("ops that ran on CPU through the fallback (count):")
    stats = torch_mydev.fallback_stats()
    width = max([50, *map(len, stats)])
    for op, count in sorted(stats.items()):
        print(f"  {op:{width}s} {count}")


def main() -> None:
    torch_mydev.reset_fallback_stats()
    report(*run_both())


if __name__ == "__main__":
    main()
