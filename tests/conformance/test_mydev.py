"""The kit on mydev: the device against torch CPU, and the rules against both.

Truth: torch CPU's result for the same call on the same layout and values. With an empty
numba cache every new (op, dtype, layout kind) compiles in the suite's sync mode, so the
suite runs subsets whose compiles are cheap (docs/conformance.md gives the default run's
numbers): the copy family in three dtypes, the native elementwise ops in float32, and the
curated ops (CPU's kernels through the fallback) in float32.
"""

import pytest
import torch

from torch_mydev_rules.conformance import run, select
from torch_mydev_rules.conformance.report import table
from torch_mydev_rules.conformance.runner import run_key

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


# The two mydev divergences the kit's first default run found (docs/conformance.md,
# "mydev"), fixed since; the kit's own reproducers.


def test_exp_of_an_integer_tensor_has_cpus_strides():
    """CPU casts a non-dense integer input to a preserve_format float temporary first; so
    does mydev now (ops/fallback/structured.py runs CPU's functional kernel for it): it
    took the strides TensorIterator gives without the temporary (size-1 dims)."""

    def exp_strides(device):
        buffer = torch.zeros(200, dtype=torch.int32, device=device)
        return torch.exp(buffer.as_strided((2, 1, 3, 3, 1), (72, 1, 12, 2, 2), 1)).stride()

    assert exp_strides("mydev") == exp_strides("cpu") == (9, 9, 3, 1, 1)


def test_amin_of_an_empty_tensor_raises_cpus_error_first():
    """CPU checks the empty dim (IndexError) before the repeated one (RuntimeError), for
    every dtype; mydev did for its native dtypes only (ops/reduction/aten.py)."""
    for device in ("cpu", "mydev"):
        x = torch.empty(0, 4, 1, dtype=torch.complex128, device=device)
        with pytest.raises(IndexError, match="Expected reduction dim 0 to have non-zero size"):
            torch.amin(x, (-1, 1, 0, -1))


# What the CUDA run found about CPU (docs/conformance.md, "CUDA"): CPU's own oneDNN
# convolutions compute some grouped channels_last layouts wrong; mydev runs CPU's kernel,
# so it gives CPU's values, bit for bit, wrong ones included.


def test_a_grouped_channels_last_conv_transpose_gives_cpus_values():
    """The reproducer of the docs' ``conv_transpose2d`` row: a channels_last weight whose
    size-1 kernel dim has stride 1. Against the weight's contiguous copy CPU is off by
    about 2.76 (torch 2.13.0, oneDNN; without oneDNN it is not); mydev equals CPU."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 2, 7, 1, generator=g).contiguous(memory_format=torch.channels_last)
    w = torch.randn(2, 3, 2, 1, generator=g)
    odd = torch.empty_strided((2, 3, 2, 1), (6, 1, 3, 1)).copy_(w)

    def transposed(device):
        return torch.nn.functional.conv_transpose2d(x.to(device), odd.to(device), groups=2)

    cpu, mydev = transposed("cpu"), transposed("mydev").cpu()
    assert torch.equal(cpu.view(torch.int32), mydev.view(torch.int32))
    assert cpu.stride() == mydev.stride()
    with torch.backends.mkldnn.flags(enabled=False):
        right = torch.nn.functional.conv_transpose2d(x, odd, groups=2)
    if torch.__version__.startswith("2.13.0"):  # the docs' number, for the pinned torch
        assert abs((cpu - right).abs().max().item() - 2.7564) < 1e-3


@pytest.mark.parametrize("key", ["2/conv_transpose2d/28", "2/convolution_backward/142"])
def test_the_cases_where_cpu_is_wrong_agree_on_mydev(key):
    """The kit's two cases where CUDA and a float64 reference agree and CPU does not."""
    result = run_key(MYDEV, key, select(None))
    assert result.cases == 1 and not result.divergences, table(result)
