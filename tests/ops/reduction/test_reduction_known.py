"""Known mismatches of the native reductions against CPU, kept as strict xfails.

Each fails today; a fix makes it pass, and the strict mark then fails the suite, so the
entry is removed with the fix.
"""

from __future__ import annotations

import pytest
import torch

from tests.support.tensors import same_bits


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="a full sum of an input expanded along a reduced dim: CPU's walk adds the "
    "stride-0 dim's rows one after another (out += row sum, 4 times), mydev's plan sums "
    "all 240 elements as one row; one ulp apart (found 2026-11-28)",
)
def test_full_sum_of_an_expanded_input_equals_cpu() -> None:
    g = torch.Generator().manual_seed(5)
    row = torch.randn(1, 6, 10, generator=g) * 30
    cpu = row.expand(4, 6, 10)
    for call in (torch.sum, torch.mean):
        assert same_bits(call(cpu.to("mydev")).cpu(), call(cpu))
