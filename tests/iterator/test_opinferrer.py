"""DIPU's OpInferrer rules, kept beside ours: where they agree with torch, and where not.

Truth: ``(a + b).stride()`` on torch CPU for same-dtype inputs (no cast temporaries). DIPU's
answer must equal torch's except in its documented departure -- dense, same-strided,
neither contiguous nor channels_last inputs, where DIPU allocates
``suggest_memory_format`` -- and in two corners where only size-1 or size-0 strides differ:
a zero-dim first input (DIPU's shape check lets it through to the fast path) and a size-0
dimension under the C-order perm (ATen clamps contiguous strides, DIPU does not).
"""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from torch_mydev_rules import layout
from torch_mydev_rules.iterator import OperandSpec, binary_op_config, build, explain
from torch_mydev_rules.iterator.reference.opinferrer import (
    compute_memory_format,
    dipu_output_strides,
    fast_compute_memory_format,
)
from torch_mydev_rules.iterator.steps.strides import allocate_or_resize_outputs, permute

from .strategies import broadcast_shapes, layout_for, make_tensor, shapes


def test_the_departure_torch_keeps_dense_strides_dipu_suggests_a_format():
    """Truth: torch. randn(3,4).t() + itself keeps (1,4); DIPU's rule gives (3,1)."""
    a = torch.randn(3, 4).t()
    inputs = [(tuple(a.shape), a.stride())] * 2
    assert (a + a).stride() == (1, 4)
    assert explain(torch.add, a, a).output_strides == (1, 4)
    assert fast_compute_memory_format(inputs, True) is layout.MemoryFormat.CONTIGUOUS
    assert dipu_output_strides(inputs) == (3, 1)


def test_dipu_fast_path_agrees_on_contiguous_and_channels_last():
    a = torch.empty(2, 3, 4, 5).to(memory_format=torch.channels_last)
    inputs = [(tuple(a.shape), a.stride())] * 2
    assert fast_compute_memory_format(inputs, True) is layout.MemoryFormat.CHANNELS_LAST
    assert dipu_output_strides(inputs) == (a + a).stride()
    assert fast_compute_memory_format(inputs, False) is None


@st.composite
def same_dtype_pairs(draw):
    target = draw(shapes())
    a = draw(layout_for(draw(broadcast_shapes(target))))
    b = a if draw(st.integers(0, 3)) == 0 else draw(layout_for(draw(broadcast_shapes(target))))
    return a, b


@given(same_dtype_pairs())
def test_dipu_matches_torch_outside_its_departure(pair):
    """Truth: (a + b).stride() for float32 a, b; DIPU equal except where documented."""
    a, b = (make_tensor(layout_, torch.float32) for layout_ in pair)
    expected = (a + b).stride()
    inputs = [(tuple(a.shape), a.stride()), (tuple(b.shape), b.stride())]
    ops = [OperandSpec.output(), *(OperandSpec(s, st_, torch.float32) for s, st_ in inputs)]
    plan = build(ops, binary_op_config(), cpu=False)
    assert plan.output_strides[0] == expected  # no temporaries: CPU and non-CPU agree
    dipu = dipu_output_strides(inputs)
    if plan.fast_setup == "NON_OVERLAPPING_DENSE":
        fmt = layout.suggest_memory_format(*inputs[-1])
        assert dipu == layout.strides_for_memory_format(plan.shape, fmt)
    elif inputs[0][0] == () and inputs[1][0] != ():
        # DIPU counts a zero-dim first input as "same shape" and may take its fast path;
        # torch does not. The memory order agrees, only size-1 strides may differ.
        differ = [d for d in range(len(dipu)) if dipu[d] != expected[d]]
        assert all(plan.shape[d] == 1 for d in differ) or 0 in plan.shape
    elif 0 not in plan.shape:
        assert dipu == expected


@given(shapes(min_dims=1), st.data())
def test_dipu_memory_format_is_tensor_iterators_allocation(shape, data):
    """DIPU's compute_memory_format == allocate_or_resize_outputs for any perm, except
    that ATen gives plain contiguous strides (sizes clamped to 1) for the C-order perm."""
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    ours = allocate_or_resize_outputs(
        [OperandSpec.output(torch.float32)], (False,), permute(shape, perm), perm, [None]
    ).output_strides[0]
    dipu = compute_memory_format(shape, perm)
    c_order = perm == tuple(range(len(shape) - 1, -1, -1))
    if c_order:
        assert ours == layout.contiguous_strides(shape)
    if not c_order or 0 not in shape:
        assert ours == dipu


# ---- explain() sets DIPU's answer beside torch's where the two differ ---------------------
# (torch's side is the CPU op itself; DIPU's is ``dipu_output_strides``, pinned above)


def test_dense_non_contiguous_inputs_show_dipus_fast_path():
    a = torch.randn(3, 4).t()
    report = explain(torch.add, a, a, dipu=True)
    assert "DIPU" not in str(explain(torch.add, a, a))  # the row only when asked for
    assert report.output_strides == (a + a).stride() == (1, 4)
    assert report.dipu_strides == (3, 1)
    row = next(line for line in str(report).splitlines() if line.startswith("DIPU OpInferrer"))
    assert row.endswith("| would allocate strides (3, 1); torch (followed here) gives (1, 4)")


def test_no_row_where_dipu_agrees():
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    report = explain(torch.mul, x, torch.randn(3, 4, 5), dipu=True)
    assert report.dipu_strides == report.output_strides == (60, 1, 15, 3)
    assert "DIPU" not in str(report)


def test_only_new_outputs_have_a_dipu_answer():
    a = torch.randn(3, 4).t()
    assert explain(torch.add, a, a, out=torch.empty(4, 3)).dipu_strides is None
    assert explain(torch.Tensor.add_, a.clone(), a).dipu_strides is None
    assert explain("copy_", torch.empty(4, 3), a).dipu_strides is None
