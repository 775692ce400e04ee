"""Benchmark cases of the relu family: relu and relu's backward (threshold_backward)."""

from __future__ import annotations

import torch
from harness import Mode, Results, native_path, nchw, try_pair


def bench_relu(mode: Mode, out: Results) -> None:
    """``torch.relu`` of a contiguous float32 tensor at every size, and
    ``threshold_backward`` (relu's derivative) of a channels_last pair at the big size."""
    for label, n in mode.sizes.items():
        x = torch.randn(n)
        dx = x.to("mydev")
        try_pair(
            mode,
            out,
            "relu",
            label,
            lambda d=dx: torch.relu(d),
            lambda c=x: torch.relu(c),
            lambda: native_path("relu"),
        )
        del dx
    big = next(k for k, v in mode.sizes.items() if v == mode.big)
    g = torch.randn(nchw(mode.big)).contiguous(memory_format=torch.channels_last)
    s = torch.randn(nchw(mode.big)).contiguous(memory_format=torch.channels_last)
    dg, ds = g.to("mydev"), s.to("mydev")
    backward = torch.ops.aten.threshold_backward
    try_pair(
        mode,
        out,
        "threshold_backward (relu's grad), channels_last",
        big,
        lambda a=dg, b=ds: backward(a, b, 0),
        lambda a=g, b=s: backward(a, b, 0),
        lambda: native_path("threshold_backward"),
    )
    del dg, ds
