"""Large reductions on numba's threads write the bytes of their runs made one after another.

Truth: the same reduction with one part (``threads.count() == 1``: the runs in order on the
caller), itself checked here against torch CPU in float64 (exact for max/min and integers,
within 1% of the sum of magnitudes for float sums; ``tests/ops/reduction/test_reduction.py`` holds
the bounds that matter). With 2, 3 and
5 parts each walk (``inner``: one span per output; ``outer``: chunks along the input's
fastest dim; ``split``: one output's span in chunks combined in order) must write the same
bits, and the count of parallel regions shows it ran on threads. Sizes are above
``PARALLEL_MIN_NUMEL``: the real thresholds, the real path.
"""

from __future__ import annotations

import pytest
import torch

from torch_mydev.kernels.parallel import threads

CASES = [
    ("sum", (1,), torch.float32),  # inner
    ("sum", (0,), torch.float32),  # outer
    ("sum", None, torch.float32),  # split
    ("mean", (0,), torch.bfloat16),
    ("amax", (1,), torch.float16),
    ("amin", None, torch.float64),
    ("sum", (1,), torch.int32),
    ("sum", None, torch.int64),
]


def _reduce(x: torch.Tensor, op: str, dim) -> torch.Tensor:
    fn = getattr(x, op)
    return fn() if dim is None else fn(dim)


def _near_cpu(got: torch.Tensor, cpu: torch.Tensor, op: str, dim) -> None:
    ref = _reduce(cpu.double(), op, dim)
    if op in ("amax", "amin") or not cpu.dtype.is_floating_point:
        assert torch.equal(got.double().nan_to_num(7.5), ref.nan_to_num(7.5))
        return
    scale = _reduce(cpu.double().abs(), op, dim)
    assert ((got.double() - ref).abs() <= 0.01 * scale).all()


def _bytes(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1).view(torch.uint8)


@pytest.mark.parametrize(("op", "dim", "dtype"), CASES)
def test_parts_write_the_bytes_of_one_part(monkeypatch, op, dim, dtype):
    g = torch.Generator().manual_seed(3)
    if dtype.is_floating_point:
        cpu = (torch.randn(300, 513, generator=g) * 100).to(dtype)
        cpu[7, 9] = float("nan") if op in ("amax", "amin") else cpu[7, 9]
    else:
        cpu = torch.randint(-(2**20), 2**20, (300, 513), generator=g, dtype=dtype)
    x = cpu.to("mydev")
    monkeypatch.setattr(threads, "count", lambda: 1)
    expected = _reduce(x, op, dim).cpu()
    _near_cpu(expected, cpu, op, dim)
    for parts in (2, 3, 5):
        monkeypatch.setattr(threads, "count", lambda parts=parts: parts)
        before = threads.regions()
        got = _reduce(x, op, dim).cpu()
        assert threads.regions() > before, parts
        assert torch.equal(_bytes(got), _bytes(expected)), parts
