"""A small channels_last CNN written as timm writes its models (an EfficientNet-style net).

What real code does here: ``ConvNormAct`` (bias-free ``Conv2d``, ``BatchNorm2d``, SiLU or
in-place ReLU), a depthwise convolution (``groups=channels``), squeeze-and-excitation
(``x.mean((2, 3), keepdim=True)``, two 1x1 convolutions, ``sigmoid`` gate), inverted-residual
blocks whose residual branch goes through timm's ``drop_path`` (stochastic depth: a per-sample
``x.new_empty(shape).bernoulli_(keep_prob)`` mask, ``div_(keep_prob)``, ``x * mask``), a
linear stochastic-depth schedule from ``torch.linspace(...).tolist()``, global average
pooling, ``flatten`` and a Linear classifier. The model and the batch are channels_last;
BatchNorm trains (running statistics and ``num_batches_tracked`` move).
"""

from __future__ import annotations

import torch
from torch import nn

IN_CHANNELS, SIZE, CLASSES, DROP_PATH_RATE = 3, 8, 10, 0.5


def drop_path(
    x: torch.Tensor, drop_prob: float = 0.0, training: bool = False, scale_by_keep: bool = True
) -> torch.Tensor:
    """timm.layers.drop_path: drop whole samples of a residual branch, per sample."""
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)  # work with diff dim tensors, not just 2D ConvNets
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    if keep_prob > 0.0 and scale_by_keep:
        random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    """timm.layers.DropPath: ``drop_path`` as a module."""

    def __init__(self, drop_prob: float = 0.0, scale_by_keep: bool = True) -> None:
        super().__init__()
        self.drop_prob, self.scale_by_keep = drop_prob, scale_by_keep

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return drop_path(x, self.drop_prob, self.training, self.scale_by_keep)


class ConvNormAct(nn.Module):
    def __init__(
        self, cin: int, cout: int, kernel: int = 1, stride: int = 1, groups: int = 1, act=True
    ) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = nn.SiLU(inplace=True) if act else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))


class SqueezeExcite(nn.Module):
    def __init__(self, channels: int, reduced: int) -> None:
        super().__init__()
        self.conv_reduce = nn.Conv2d(channels, reduced, 1, bias=True)
        self.act1 = nn.ReLU(inplace=True)
        self.conv_expand = nn.Conv2d(reduced, channels, 1, bias=True)
        self.gate = nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x_se = x.mean((2, 3), keepdim=True)
        x_se = self.conv_expand(self.act1(self.conv_reduce(x_se)))
        return x * self.gate(x_se)


class InvertedResidual(nn.Module):
    """timm's InvertedResidual: 1x1 expand, depthwise 3x3, SE, 1x1 project, drop path."""

    def __init__(self, channels: int, expand: int, drop_path_rate: float) -> None:
        super().__init__()
        mid = channels * expand
        self.conv_pw = ConvNormAct(channels, mid)
        self.conv_dw = ConvNormAct(mid, mid, kernel=3, groups=mid)
        self.se = SqueezeExcite(mid, max(1, channels // 4))
        self.conv_pwl = ConvNormAct(mid, channels, act=False)
        self.drop_path = DropPath(drop_path_rate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x
        x = self.conv_pwl(self.se(self.conv_dw(self.conv_pw(x))))
        return self.drop_path(x) + shortcut


class TinyEfficientNet(nn.Module):
    def __init__(self, width: int = 8, depth: int = 2) -> None:
        super().__init__()
        self.conv_stem = ConvNormAct(IN_CHANNELS, width, kernel=3, stride=2)
        # stochastic depth decay rule, as timm's builders write it
        dpr = [x.item() for x in torch.linspace(0, DROP_PATH_RATE, depth + 1)[1:]]
        self.blocks = nn.Sequential(*(InvertedResidual(width, 2, rate) for rate in dpr))
        self.global_pool = nn.AdaptiveAvgPool2d(1)
        self.flatten = nn.Flatten(1)
        self.classifier = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.classifier(self.flatten(self.global_pool(self.blocks(self.conv_stem(x)))))
        return nn.functional.cross_entropy(x, target), x


def make_model() -> TinyEfficientNet:
    """The model in channels_last, as ``model.to(memory_format=torch.channels_last)`` makes it."""
    return TinyEfficientNet().to(memory_format=torch.channels_last)


def make_batch(generator: torch.Generator, batch: int = 4) -> dict:
    """A channels_last batch of images and its class labels."""
    x = torch.randn(batch, IN_CHANNELS, SIZE, SIZE, generator=generator)
    target = torch.randint(0, CLASSES, (batch,), generator=generator)
    return {"x": x.contiguous(memory_format=torch.channels_last), "target": target}
