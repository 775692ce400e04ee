"""Benchmark cases of layout changes with a tiny channel dim: NCHW <-> channels_last, C = 1, 3, 4.

The copy kernel's planes loop (``torch_mydev/kernels/copy/_planes.py``) serves them; the
C=3 rows are judged by issue 14's "C=3, every batch size <= 0.7x" target (``report.ISSUE_14``);
the C=1 and C=4 rows are reported beside them.
"""

from __future__ import annotations

import torch
from harness import Mode, Results, Row, copy_path, time_pair

import torch_mydev

CL = torch.channels_last


def _row(mode: Mode, out: Results, shape: tuple[int, int, int, int], to_cl: bool) -> None:
    """One direction for one float32 image batch of ``shape`` (N, C, H, W).

    ``contiguous(memory_format=...)`` as the issue measures it; with C = 1 both formats are
    the same strides and ``contiguous`` returns its input, so that row times
    ``clone(memory_format=...)``, which copies (a plain byte range).
    """
    fmt = CL if to_cl else torch.contiguous_format
    cpu = torch.randn(shape)
    if not to_cl:
        cpu = cpu.contiguous(memory_format=CL)
    dev = cpu.to("mydev")
    if shape[1] == 1:
        op, note = "clone", " (clone: C=1 is both formats)"
        mine, ref, noise = time_pair(
            mode,
            lambda d=dev: torch.clone(d, memory_format=fmt),
            lambda c=cpu: torch.clone(c, memory_format=fmt),
        )
    else:
        op, note = "contiguous", ""
        mine, ref, noise = time_pair(
            mode,
            lambda d=dev: d.contiguous(memory_format=fmt),
            lambda c=cpu: c.contiguous(memory_format=fmt),
        )
    path = copy_path(torch_mydev.explain(op, dev, memory_format=fmt), 4) + note
    case = "NCHW -> channels_last" if to_cl else "channels_last -> NCHW"
    size = "x".join(map(str, shape))
    out.rows.append(Row(f"{case}, C={shape[1]}", size, mine, ref, path=path, noise=noise))
    del cpu, dev


def bench_tiny_channels(mode: Mode, out: Results) -> None:
    """C = 3 images of 512 x 512 at N = 1, 4, 16 both ways; C = 1 and C = 4 at N = 4.

    ``--smoke`` uses 16 x 16 images.
    """
    side = 16 if mode.name == "smoke" else 512
    batches = (1,) if mode.name == "smoke" else (1, 4, 16)
    one = batches[-1] if mode.name == "smoke" else 4
    for to_cl in (True, False):
        for n in batches:
            _row(mode, out, (n, 3, side, side), to_cl)
        for c in (1, 4):
            _row(mode, out, (one, c, side, side), to_cl)
