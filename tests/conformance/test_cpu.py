"""The kit on CPU: the rules against torch CPU itself (what tools/cuda_layout_check.py did
before the kit replaced it).

Truth: torch CPU's results for the mission's ops, every dtype, seeded layouts. The device
side is CPU too, so what can diverge here is the rules: ``explain()``'s TensorIterator build,
the memory-format rules, c10's predicates, the reduction rules.
"""

import torch

from torch_mydev_rules.conformance import run, select
from torch_mydev_rules.conformance.report import table


def test_the_rules_agree_with_cpu_on_the_mission_ops():
    result = run(torch.device("cpu"), select(["mission"]), seed=0, rounds=40)
    assert not result.divergences, table(result)
    assert result.checked >= 10_000, result.checked
    assert not [k for k in result.skipped if "device" in k[1]], result.skipped


def test_the_curated_ops_run_on_cpu():
    """Every curated op draws, runs and compares (CPU against CPU: no divergence can
    come from the ops, so this proves the catalogue itself runs)."""
    ops = select(["curated"])
    result = run(torch.device("cpu"), ops, seed=0, rounds=2)
    assert not result.divergences, table(result)
    compared = {op for op, _ in result.skipped} | set(result.op_seconds)
    assert compared == {op.name for op in ops}
