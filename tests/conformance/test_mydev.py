"""The kit on mydev: the device against torch CPU, and the rules against both.

Truth: torch CPU's result for the same call on the same layout and values. With an empty
numba cache every new (op, dtype, layout kind) compiles in the suite's sync mode, so the
suite runs subsets whose compiles are cheap (docs/conformance.md gives the default run's
numbers): the copy family in three dtypes, the native elementwise ops in float32, and the
curated ops (CPU's kernels through the fallback) in float32.
"""

import torch

from torch_mydev_rules.conformance import run, select
from torch_mydev_rules.conformance.report import table

MYDEV = torch.device("mydev")
SUBSETS = (
    (["layout"], (torch.float32, torch.int64, torch.bool), 40),
    (["add", "add_", "add_out", "neg", "relu", "sqrt", "exp"], (torch.float32,), 30),
    (
        [op.name for op in select(["curated"]) if op.name not in ("adaptive_avg_pool2d", "sdpa")],
        (torch.float32,),
        10,
    ),
)


def test_mydev_agrees_with_cpu():
    checked = 0
    for ops, dtypes, rounds in SUBSETS:
        result = run(MYDEV, select(ops), seed=0, rounds=rounds, dtypes=dtypes)
        assert not result.divergences, table(result)
        assert not [k for k in result.skipped if "device" in k[1]], result.skipped
        checked += result.checked
    assert checked >= 10_000, checked
