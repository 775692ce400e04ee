"""The worked examples of the design guide, each checked against torch where torch can say.

Truth: the strides torch CPU gives for the same call (``(a + b).stride()``, ``clone``,
``contiguous``, ``copy_``); the iteration internals (stride bytes, perm, coalescing,
DimCounter) are ATen's, worked by hand in the guide.
"""

from __future__ import annotations

import torch

from torch_mydev_rules.iterator import explain
from torch_mydev_rules.iterator.reference import DimCounter
from torch_mydev_rules.iterator.reference.opinferrer import (
    compute_effective_strides,
    compute_memory_format,
    compute_perm,
    dipu_output_strides,
)


def strided(sizes, strides, dtype=torch.float32):
    return torch.empty_strided(sizes, strides, dtype=dtype)


def test_channels_last_plus_contiguous():
    """[2,3,4,5] channels_last + contiguous [3,4,5] -> perm [1,3,2,0], strides (60,1,15,3)."""
    a = strided((2, 3, 4, 5), (60, 1, 15, 3))
    b = torch.empty(3, 4, 5)
    report = explain(torch.add, a, b)
    assert report.perm == (1, 3, 2, 0)
    assert report.output_strides == (60, 1, 15, 3) == (a + b).stride()
    shape = (2, 3, 4, 5)
    effective = compute_effective_strides(shape, [(a.shape, a.stride()), (b.shape, b.stride())])
    assert effective == ((60, 1, 15, 3), (0, 20, 5, 1))
    perm = compute_perm(shape, effective)
    assert perm == (1, 3, 2, 0)
    assert [effective[0][d] for d in perm] == [1, 3, 15, 60]  # ascending
    assert compute_memory_format(shape, perm) == (60, 1, 15, 3)


def test_ambiguous_channels_last_keeps_its_strides():
    """Ambiguous channels_last [2,3,1,1] (3,1,3,3) + [3,1,1] (1,1,1) -> (3,1,3,3)."""
    a = strided((2, 3, 1, 1), (3, 1, 3, 3))
    b = strided((3, 1, 1), (1, 1, 1))
    report = explain(torch.add, a, b)
    assert report.output_strides == (3, 1, 3, 3) == (a + b).stride()
    assert report.fast_setup == "NONE"


def test_channels_last_broadcast_against_a_transposed_operand():
    """[2,3,1,1] channels_last + [3,1,3] strides (1,3,3) -> shape [2,3,1,3], (9,1,3,3)."""
    a = strided((2, 3, 1, 1), (3, 1, 3, 3))
    b = strided((3, 1, 3), (1, 3, 3))
    report = explain(torch.add, a, b)
    assert report.shape == (2, 3, 1, 3)
    shape = report.shape
    effective = compute_effective_strides(shape, [(a.shape, a.stride()), (b.shape, b.stride())])
    assert effective == ((3, 1, 3, 0), (0, 1, 3, 3))
    assert report.perm == compute_perm(shape, effective) == (1, 2, 3, 0)
    assert report.output_strides == (9, 1, 3, 3) == (a + b).stride()
    ascending = sorted(report.output_strides)
    assert ascending == [1, 3, 3, 9]


def test_both_contiguous_and_channels_last():
    """[2,1,4,4]: contiguous(channels_last) returns it unchanged; .to() restrides."""
    t = torch.empty(2, 1, 4, 4)
    report = explain("contiguous", t, memory_format=torch.channels_last)
    assert report.plan is None
    assert report.output_strides == (16, 16, 4, 1)
    assert t.contiguous(memory_format=torch.channels_last) is t
    # .to(memory_format=) is clone(memory_format=) when the layout must change
    report = explain("clone", t, memory_format=torch.channels_last)
    assert report.output_strides == (16, 1, 4, 1)
    assert t.to(memory_format=torch.channels_last).stride() == (16, 1, 4, 1)


def test_nchw_into_channels_last_copy():
    """NCHW [1,64,5,4] into channels_last: bytes [5120,4,1024,256] -> [64,20] coalesced."""
    dst = torch.empty(1, 64, 5, 4).to(memory_format=torch.channels_last)
    src = torch.empty(1, 64, 5, 4)
    report = explain("copy_", dst, src)
    assert report.stride_bytes[0] == (5120, 4, 1024, 256)
    assert report.plan.reordered_shape == (64, 4, 5, 1)
    assert report.coalesced_shape == (64, 20)
    assert report.coalesced_stride_bytes == ((4, 256), (80, 4))


def test_dense_non_contiguous_keeps_input_strides():
    """[3,4] strides (1,3) is dense; torch's fast path keeps its strides, DIPU's does not."""
    a = torch.randn(4, 3).t()
    report = explain(torch.add, a, a)
    assert report.fast_setup == "NON_OVERLAPPING_DENSE"
    assert report.output_strides == (1, 3) == (a + a).stride()
    assert dipu_output_strides([(a.shape, a.stride())] * 2) == (4, 1)
    b = torch.randn(3, 4).t()
    assert explain(torch.add, b, b).output_strides == (1, 4) == (b + b).stride()


def test_overlapping_layout_is_not_dense():
    """[4,2,3] strides (8,3,1) is not dense: clone falls back to infer_dense_strides."""
    t = strided((4, 2, 3), (8, 3, 1))
    report = explain("clone", t)
    assert report.output_strides == t.clone().stride() == (6, 3, 1)


def test_dim_counter_steps():
    """Shape [64,2000,10] from 1066670: values [46,666,8]; steps {18,1} {64,1333} {64,2000}."""
    counter = DimCounter((64, 2000, 10), (1066670, 64 * 2000 * 10))
    assert counter.values == [46, 666, 8]
    steps = []
    while not counter.is_done():
        step = counter.max_2d_step()
        steps.append(step)
        counter.increment(step)
    assert steps == [(18, 1), (64, 1333), (64, 2000)]
    assert counter.offset == 64 * 2000 * 10
    assert counter.values == [0, 0, 0]


def test_clone_preserve_keeps_dimension_order():
    """Guide facts: [2,3,4] (24,1,6) clones to (12,1,3); [1,2,2,2] (24,1,5,1) to (8,2,4,1)."""
    for sizes, strides, expected in (
        ((2, 3, 4), (24, 1, 6), (12, 1, 3)),
        ((1, 2, 2, 2), (24, 1, 5, 1), (8, 2, 4, 1)),
    ):
        t = torch.zeros(200).as_strided(sizes, strides)
        assert explain("clone", t).output_strides == expected == t.clone().stride()
