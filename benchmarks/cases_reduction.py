"""Benchmark cases of the reductions: sum over the last and the first dim, mean of all, amax."""

from __future__ import annotations

import torch
from harness import Mode, Results, native_path, try_pair

_CASES = (
    ("sum(1)", "sum.dim_IntList", lambda t: t.sum(1)),
    ("sum(0)", "sum.dim_IntList", lambda t: t.sum(0)),
    ("mean()", "mean", lambda t: t.mean()),
    ("amax(1)", "amax", lambda t: t.amax(1)),
)


def bench_reductions(mode: Mode, out: Results) -> None:
    """Each case on a contiguous float32 matrix: 64x32 (a latency row: 2048 elements, the
    exact serial path) and 2048x2048 (4M elements: the parallel loops; 256x256 in smoke)."""
    shapes = ((64, 32), (256, 256) if mode.name == "smoke" else (2048, 2048))
    for rows, cols in shapes:
        x = torch.randn(rows, cols)
        dx = x.to("mydev")
        for case, op, fn in _CASES:
            try_pair(
                mode,
                out,
                f"reduction: {case}",
                f"{rows}x{cols}",
                lambda d=dx, f=fn: f(d),
                lambda c=x, f=fn: f(c),
                lambda op=op: native_path(op),
            )
        del dx
