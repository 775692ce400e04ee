"""Differential tests: explain()/build() against what torch CPU does with the same layouts.

Truth, per test: ``torch.add`` / ``torch.mul`` / ``torch.div`` / ``torch.eq`` / ``torch.neg``
/ ``torch.sqrt`` output strides and dtype (functional, ``out=`` and in-place forms);
``Tensor.clone``, ``Tensor.contiguous`` and ``torch.empty_like`` strides for every memory
format; ``Tensor.copy_`` errors. Where torch raises, explain must raise the same message.
Every plan built is also walked: its coalesced iteration visits the same offsets as a naive
loop over the broadcast shape (``walker``).
"""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.layout.strategies import views
from torch_mydev_rules.iterator import explain

from .strategies import (
    DTYPES,
    MEMORY_FORMATS,
    broadcast_shapes,
    layout_for,
    make_tensor,
    python_scalars,
    shapes,
)
from .walker import assert_walk_matches

BINARY_OPS = (torch.add, torch.mul, torch.div, torch.eq, torch.sub, torch.lt)


def run_torch(fn):
    """torch's result, or the exception it raised (with its message)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn()
        except (RuntimeError, NotImplementedError) as error:
            return error


def operand_sizes(args, plan):
    """Per-operand sizes for the walker: outputs None (the plan's shape), inputs their own."""
    sizes = [None] * plan.num_outputs
    sizes += [tuple(a.shape) if isinstance(a, torch.Tensor) else () for a in args]
    return sizes


def layouts_of(args) -> list:
    """Sizes, strides, offset and dtype of each argument, for failure messages."""
    return [
        (tuple(a.shape), a.stride(), a.storage_offset(), a.dtype)
        if isinstance(a, torch.Tensor)
        else a
        for a in args
    ]


def check_against_torch(op, args, kwargs=None, *, out_tensor=None):
    """explain(op, *args) matches the output torch gives, or torch's error.

    explain runs first: torch resizes an ``out=`` tensor, and explain must see it as given.
    """
    kwargs = kwargs or {}
    try:
        report = explain(op, *args, **kwargs)
    except RuntimeError as error:
        report = error
    result = run_torch(lambda: op(*args, **kwargs))
    if isinstance(result, Exception):
        # Op-specific refusals (bool subtraction, complex ordering) are kernel checks that
        # come after the iterator; only iterator errors must be reproduced.
        message = str(result)
        if "must match the size" in message or "can't be cast" in message:
            assert isinstance(report, RuntimeError)
            assert str(report) == message
        return None
    if isinstance(report, Exception):
        raise report
    expected = out_tensor if out_tensor is not None else result
    assert report.output_strides == expected.stride(), layouts_of(args)
    assert report.dtype == expected.dtype
    assert report.shape == tuple(expected.shape)
    assert_walk_matches(report.plan, operand_sizes(args, report.plan))
    return report


@st.composite
def binary_operands(draw):
    """Two operands broadcasting to one shape: tensors of any layout, 0-dim tensors, numbers."""
    target = draw(shapes())
    same_layout = draw(st.integers(0, 3)) == 0
    operands = []
    first_layout = None
    for position in range(2):
        kind = draw(st.sampled_from(("tensor", "tensor", "tensor", "zero_dim", "number")))
        dtype = draw(st.sampled_from(DTYPES))
        if kind == "number" and position == 1:
            operands.append(draw(python_scalars()))
            continue
        if kind == "zero_dim":
            operands.append(make_tensor(draw(layout_for(())), dtype))
            continue
        if same_layout and first_layout is not None:
            layout = first_layout
        else:
            sizes = target if same_layout else draw(broadcast_shapes(target))
            layout = draw(layout_for(sizes))
        first_layout = first_layout or layout
        operands.append(make_tensor(layout, dtype))
    return operands


@given(binary_operands(), st.sampled_from(BINARY_OPS))
def test_binary_ops_match_torch(operands, op):
    """Truth: torch.add/mul/div/eq/sub/lt(a, b) strides and dtype on CPU."""
    check_against_torch(op, operands)


@given(binary_operands(), st.sampled_from((torch.add, torch.mul, torch.eq)), st.data())
def test_div_with_rounding_mode_and_out(operands, op, data):
    """Truth: torch.div(rounding_mode='floor'), and ``out=`` of the right shape: its strides
    are kept, whatever its dtype (a cast temporary is iterated in its place on CPU)."""
    check_against_torch(torch.div, operands, {"rounding_mode": "floor"})
    result = run_torch(lambda: op(*operands))
    assume(not isinstance(result, Exception))
    out_dtype = data.draw(st.sampled_from((result.dtype, *DTYPES)))
    out = torch.empty_strided(result.shape, tuple(reversed(result.stride())), dtype=out_dtype)
    report = check_against_torch(op, operands, {"out": out}, out_tensor=out)
    if report is not None:
        assert report.plan.will_resize[0] is False
        assert report.plan.temporaries[0] == (report.plan.dtypes[0] != out_dtype)


@given(binary_operands(), st.sampled_from((torch.add, torch.eq)), st.data())
def test_out_resized_from_empty(operands, op, data):
    """Truth: torch.add(a, b, out=torch.empty(0)) -- an output resized by the iterator."""
    result = run_torch(lambda: op(*operands))
    assume(not isinstance(result, Exception))
    assume(result.dim() > 0)
    out = torch.empty(0, dtype=data.draw(st.sampled_from((result.dtype, *DTYPES))))
    report = check_against_torch(op, operands, {"out": out}, out_tensor=out)
    if report is not None:
        assert report.plan.will_resize[0] == (tuple(result.shape) != (0,))


@given(views(), st.sampled_from(DTYPES), st.data())
def test_inplace_ops_match_torch(layout, dtype, data):
    """Truth: a.add_(b), mul_, div_, eq_: in-place keeps a's layout and dtype, or raises
    torch's error (an output that would broadcast, an unsafe cast, an overlapping output)."""
    a = make_tensor(layout, dtype)
    other_sizes = data.draw(broadcast_shapes(layout[0]) | shapes())
    b = make_tensor(data.draw(layout_for(other_sizes)), data.draw(st.sampled_from(DTYPES)))
    inplace_ops = (torch.Tensor.add_, torch.Tensor.mul_, torch.Tensor.div_, torch.Tensor.eq_)
    op = data.draw(st.sampled_from(inplace_ops))
    result = run_torch(lambda: op(a, b))
    if isinstance(result, Exception):
        message = str(result)
        iterator_errors = (
            "broadcast shape",
            "must match",
            "can't be cast",
            "more than one element",
        )
        if any(e in message for e in iterator_errors):
            with pytest.raises(RuntimeError) as ours:
                explain(op, a, b)
            assert str(ours.value) == message
        return
    report = explain(op, a, b)
    assert report.output_strides == a.stride()
    assert report.dtype == a.dtype


@given(views(), st.sampled_from(DTYPES), st.sampled_from((torch.neg, torch.sqrt)))
def test_unary_ops_match_torch(layout, dtype, op):
    """Truth: torch.neg(t) / torch.sqrt(t) strides and dtype (integers go to float for sqrt)."""
    check_against_torch(op, [make_tensor(layout, dtype)])


@given(views(), st.sampled_from(DTYPES), st.sampled_from(MEMORY_FORMATS))
def test_clone_matches_torch(layout, dtype, memory_format):
    """Truth: t.clone(memory_format=...) strides, or torch's error."""
    t = make_tensor(layout, dtype)
    kwargs = {} if memory_format is None else {"memory_format": memory_format}
    result = run_torch(lambda: t.clone(**kwargs))
    if isinstance(result, Exception):
        with pytest.raises(RuntimeError, match=str(result)):
            explain("clone", t, **kwargs)
        return
    report = explain("clone", t, **kwargs)
    assert report.output_strides == result.stride()
    assert_walk_matches(report.plan, [None, t.shape])


@given(views(), st.sampled_from(DTYPES), st.sampled_from(MEMORY_FORMATS))
def test_contiguous_matches_torch(layout, dtype, memory_format):
    """Truth: t.contiguous(memory_format=...) strides; returns self exactly when torch does."""
    t = make_tensor(layout, dtype)
    kwargs = {} if memory_format is None else {"memory_format": memory_format}
    result = run_torch(lambda: t.contiguous(**kwargs))
    if isinstance(result, Exception):
        with pytest.raises(RuntimeError, match=str(result)):
            explain("contiguous", t, **kwargs)
        return
    report = explain("contiguous", t, **kwargs)
    assert report.output_strides == result.stride()
    assert (report.plan is None) == (result is t)


@given(views(), st.sampled_from(MEMORY_FORMATS))
def test_empty_like_matches_torch(layout, memory_format):
    """Truth: torch.empty_like(t, memory_format=...) strides, or torch's error."""
    t = make_tensor(layout, torch.float32)
    kwargs = {} if memory_format is None else {"memory_format": memory_format}
    result = run_torch(lambda: torch.empty_like(t, **kwargs))
    if isinstance(result, Exception):
        with pytest.raises(RuntimeError, match=str(result)):
            explain("empty_like", t, **kwargs)
        return
    assert explain("empty_like", t, **kwargs).output_strides == result.stride()


@given(views(), st.sampled_from(DTYPES), st.sampled_from(DTYPES), st.data())
def test_copy_plan_walks_the_same_offsets(dst_layout, dst_dtype, src_dtype, data):
    """Truth: dst.copy_(src) succeeds or fails as torch does; the plan visits every pair once.

    The coalesced plan must keep numel and visit exactly the (dst offset, src offset) pairs
    of the naive broadcast loop, each as often.
    """
    src_sizes = data.draw(broadcast_shapes(dst_layout[0]) | shapes())
    src = make_tensor(data.draw(layout_for(src_sizes)), src_dtype)
    dst = make_tensor(dst_layout, dst_dtype)
    result = run_torch(lambda: dst.copy_(src))
    if isinstance(result, Exception):
        with pytest.raises(RuntimeError) as ours:
            explain("copy_", dst, src)
        assert str(ours.value) == str(result)
        return
    report = explain("copy_", dst, src)
    plan = report.plan
    assert report.output_strides == dst.stride()
    assert plan.dtypes == (dst_dtype, src_dtype)
    assert plan.temporaries == (False, False)
    assert_walk_matches(plan, [None, src.shape])
    # Coalescing never adds dimensions, and never leaves two mergeable neighbours.
    assert len(plan.coalesced_shape) <= max(len(plan.shape), 1)
    assert all(size != 1 for size in plan.coalesced_shape) or len(plan.coalesced_shape) <= 1
