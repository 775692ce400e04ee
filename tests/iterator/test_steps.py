"""Each build step on its own: the rule, its edge cases, and the errors torch raises.

Truth: torch CPU for anything observable (broadcast shapes and messages, output strides,
error messages); ATen's source for internals torch does not expose (perm ties, coalescing,
DimCounter stepping), pinned here by small hand-worked cases.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from torch_mydev_rules.iterator import (
    IteratorConfig,
    OperandSpec,
    binary_op_config,
    build,
    comparison_op_config,
    copy_config,
    explain,
    unary_op_config,
)
from torch_mydev_rules.iterator.reference import DimCounter, serial_for_each
from torch_mydev_rules.iterator.steps.coalesce import coalesce_dimensions, get_dim_to_split
from torch_mydev_rules.iterator.steps.fast_setup import FastSetupType, compute_fast_setup_type
from torch_mydev_rules.iterator.steps.shape import compute_shape, infer_size
from torch_mydev_rules.iterator.steps.strides import compatible_stride, reorder_dimensions

from .strategies import shapes
from .walker import plan_offsets


def torch_error(fn) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as error:
            fn()
    return str(error.value)


def spec(sizes, strides=None, dtype=torch.float32, **kw) -> OperandSpec:
    if strides is None:
        strides = torch.empty(sizes).stride() if sizes else ()
    return OperandSpec(tuple(sizes), tuple(strides), dtype, **kw)


# --- compute_shape / infer_size ---------------------------------------------------------


@given(shapes(), shapes())
def test_infer_size_matches_torch(a, b):
    """Truth: torch.broadcast_shapes, and the message of torch.zeros(a) + torch.zeros(b)."""
    try:
        expected = tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        message = torch_error(lambda: torch.zeros(a) + torch.zeros(b))
        with pytest.raises(RuntimeError) as ours:
            infer_size(a, b)
        assert str(ours.value) == message
        return
    assert infer_size(a, b) == expected


def test_size_one_broadcasts_to_zero():
    assert infer_size((1, 3), (0, 1)) == (0, 3)
    assert infer_size((), (2, 0)) == (2, 0)


def test_non_broadcastable_message_is_torchs():
    a, b = torch.zeros(2, 3), torch.zeros(2, 4)
    with pytest.raises(RuntimeError) as ours:
        explain(torch.add, a, b)
    assert str(ours.value) == torch_error(lambda: a + b)
    assert str(ours.value) == (
        "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1"
    )


def test_resized_outputs_do_not_take_part_in_the_shape():
    out = spec((3,))
    ops = [OperandSpec(out.sizes, out.strides, out.dtype, is_output=True), spec((2, 3))]
    info = compute_shape(ops, binary_op_config())
    assert info.shape == (2, 3)
    assert info.all_ops_same_shape
    # copy_ does not resize: its output takes part, and a too-small one is an error
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        build(ops, copy_config())


def test_scalar_beside_a_tensor_is_not_same_shape():
    info = compute_shape([OperandSpec.output(), spec(()), spec((3,))], binary_op_config())
    assert info.shape == (3,)
    assert not info.all_ops_same_shape
    assert not info.all_ops_are_scalars
    only_scalars = compute_shape([OperandSpec.output(), spec(()), spec(())], binary_op_config())
    assert only_scalars.all_ops_are_scalars and only_scalars.shape == ()


def test_zero_dim_plus_zero_dim_is_zero_dim():
    a = torch.tensor(1.0)
    report = explain(torch.add, a, 2)
    assert report.shape == () == (a + 2).shape
    assert report.fast_setup == "CONTIGUOUS"
    assert report.plan.coalesced_shape == ()
    assert list(serial_for_each((), ((), ()))) != []


# --- compute_types ------------------------------------------------------------------------


def test_cpu_promotes_inputs_through_dense_temporaries():
    """Truth: torch CPU. A float32 expanded input beside a float64 one is copied densely
    first, so the output follows the copy, not the expanded input."""
    a = torch.randn(3, 1).expand(3, 4)
    b = torch.randn(4, 3, dtype=torch.float64).t()
    report = explain(torch.add, a, b)
    assert report.plan.temporaries == (False, True, False)
    assert report.plan.operand_strides[1] == (4, 1)
    assert report.output_strides == (a + b).stride() == (4, 1)
    # Without temporaries (other devices) the broadcast input stays broadcast: like torch
    # with equal dtypes.
    ops = [OperandSpec.output(), spec(a.shape, a.stride()), spec(b.shape, b.stride(), b.dtype)]
    assert build(ops, binary_op_config(), cpu=False).output_strides[0] == (1, 3)
    assert (a + b.float()).stride() == (1, 3)


def test_safe_casting_error_is_torchs():
    f = torch.ones(3)
    out = torch.empty(3, dtype=torch.long)
    with pytest.raises(RuntimeError) as ours:
        explain(torch.add, f, f, out=out)
    assert str(ours.value) == torch_error(lambda: torch.add(f, f, out=out))


def test_same_dtype_check_error_is_torchs():
    f = torch.ones(3)
    out = torch.empty(3, dtype=torch.long)
    with pytest.raises(RuntimeError) as ours:
        explain(torch.neg, f, out=out)
    assert (
        str(ours.value)
        == torch_error(lambda: torch.neg(f, out=out))
        == ("Found dtype Long but expected Float")
    )


def test_out_of_another_dtype_keeps_its_layout_but_iterates_a_temporary():
    """Truth: torch.add(float32, float32, out=float64 transposed) leaves out's strides."""
    a = torch.ones(3, 4)
    out = torch.empty(4, 3, dtype=torch.float64).t()
    report = explain(torch.add, a, a, out=out)
    torch.add(a, a, out=out)
    assert report.output_strides == out.stride() == (1, 3)
    assert report.dtype == torch.float64
    assert report.plan.temporaries[0]
    assert report.plan.operand_strides[0] == (4, 1)  # the contiguous float32 temporary
    assert report.plan.dtypes[0] == torch.float32


def test_comparison_output_is_bool_unless_out_given():
    a = torch.ones(2, dtype=torch.int32)
    assert explain(torch.eq, a, 2.5).dtype == torch.bool
    assert comparison_op_config().static_dtype is torch.bool
    config = comparison_op_config(torch.float32)
    assert config.static_dtype is None and config.cast_common_dtype_to_outputs
    assert not comparison_op_config(torch.bool).cast_common_dtype_to_outputs


def test_config_flags_follow_tensor_iterator_setters():
    assert not binary_op_config().check_all_same_dtype  # promoting switches the check off
    assert unary_op_config().check_all_same_dtype
    with pytest.raises(ValueError, match="declare_static_dtype"):
        IteratorConfig(static_dtype=torch.bool)
    with pytest.raises(ValueError):
        IteratorConfig(promote_integer_inputs_to_float=True)


# --- fast set-up --------------------------------------------------------------------------


def test_ambiguous_nc11_takes_the_contiguous_fast_path():
    """ATen's TODO: N,C,1,1 with channels_last strides counts as contiguous -> (C,1,1,1)."""
    a = torch.empty_strided((2, 3, 1, 1), (3, 1, 3, 3))
    report = explain(torch.mul, a, a)
    assert report.fast_setup == "CONTIGUOUS"
    assert report.output_strides == (a * a).stride() == (3, 1, 1, 1)


def test_channels_last_fast_path():
    a = torch.empty(2, 3, 4, 5).to(memory_format=torch.channels_last)
    report = explain(torch.add, a, a)
    assert report.fast_setup == "CHANNELS_LAST"
    assert report.output_strides == (a + a).stride()
    assert report.coalesced_shape == (120,)
    assert report.coalesced_stride_bytes == ((4,), (4,), (4,))


def test_dense_inputs_with_different_strides_take_no_fast_path():
    a = torch.empty(3, 4)
    b = torch.empty(4, 3).t()
    assert explain(torch.add, a, b).fast_setup == "NONE"
    assert explain(torch.add, a, b).output_strides == (a + b).stride()


def test_a_kept_output_with_other_strides_vetoes_the_fast_path():
    a = torch.empty(4, 3).t()
    out = torch.empty(3, 4)
    ops = [spec(out.shape, out.stride(), is_output=True), spec(a.shape, a.stride())] * 1
    ops.append(spec(a.shape, a.stride()))
    info = compute_shape(ops, binary_op_config())
    setup = compute_fast_setup_type(ops, (False, False, False), True, binary_op_config())
    assert info.all_ops_same_shape and setup is FastSetupType.NONE
    # ...while an output about to be resized is ignored by the check
    empty_out = spec((0,), (1,), is_output=True)
    setup = compute_fast_setup_type(
        [empty_out, *ops[1:]], (True, False, False), True, binary_op_config()
    )
    assert setup is FastSetupType.NON_OVERLAPPING_DENSE


def test_linear_iteration_allows_only_contiguous():
    a = spec((2, 3), (1, 2))
    config = IteratorConfig(enforce_linear_iteration=True)
    assert compute_fast_setup_type([a], (False,), True, config) is FastSetupType.NONE
    assert reorder_dimensions((2, 3), [(4, 8)], enforce_linear_iteration=True) == (1, 0)


# --- reorder_dimensions / allocation / coalescing ----------------------------------------


def test_reorder_skips_broadcast_strides_and_breaks_ties_by_size():
    # equal strides: swap only when the dim placed first is larger, else ambiguous
    assert reorder_dimensions((2, 3), [(4, 4)]) == (0, 1)
    assert reorder_dimensions((3, 2), [(4, 4)]) == (1, 0)
    # in0 cannot order dims 0 and 1; in1 can
    assert reorder_dimensions((3, 2), [(4, 4), (4, 8)]) == (0, 1)
    # a zero stride asks the next operand; no operand decides -> keep C order
    assert reorder_dimensions((2, 3), [(0, 4), (4, 0)]) == (1, 0)
    assert reorder_dimensions((), []) == ()
    assert reorder_dimensions((5,), [(4,)]) == (0,)
    # operands without a layout (None) are skipped
    assert reorder_dimensions((2, 3), [None, (4, 8)]) == (0, 1)


def test_compatible_stride_does_not_clamp_zero_sizes():
    assert compatible_stride((3, 0, 2), 4) == (4, 12, 0)


def test_allocation_with_a_zero_size_dim():
    """Truth: torch. A permuted output keeps compatible strides (zeros after a size-0 dim);
    a C-order one is plain contiguous (sizes clamped to 1)."""
    a = torch.empty_strided((2, 0, 3), (1, 6, 2))
    b = torch.empty(2, 0, 1)
    assert explain(torch.add, a, b).output_strides == (a + b).stride()
    c = torch.empty(2, 0, 3)
    assert explain(torch.add, c, torch.empty(3)).output_strides == (c + torch.empty(3)).stride()


def test_coalesce_merges_dense_neighbours_and_size_one_dims():
    shape, strides = coalesce_dimensions((4, 1, 5), ((4, 99, 16), (8, 7, 32)))
    assert shape == (20,)
    assert strides == ((4,), (8,))
    shape, strides = coalesce_dimensions((1, 4, 5), ((7, 4, 16), (7, 4, 20)))
    assert shape == (4, 5)
    assert strides == ((4, 16), (4, 20))
    assert coalesce_dimensions((3,), ((4,),)) == ((3,), ((4,),))


def test_get_dim_to_split_picks_the_largest_extent():
    assert get_dim_to_split((64, 20), ((4, 256), (80, 4))) == 0  # 63 * 80 > 19 * 256
    assert get_dim_to_split((8, 2), ((4, 32),)) == 1  # 1 * 32 > 7 * 4
    assert get_dim_to_split((0, 2), ((4, 0),)) == 1


# --- DimCounter / serial_for_each --------------------------------------------------------


@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=4),
    st.data(),
)
def test_serial_for_each_covers_any_range_exactly_once(shape, data):
    """Splitting [0, n) at any point and walking both halves visits every element once."""
    numel = 1
    for s in shape:
        numel *= s
    cut = data.draw(st.integers(0, numel))
    strides = []
    running = 4
    for s in shape:
        strides.append(running)
        running *= s
    operand = (tuple(strides),)
    first = plan_offsets(shape, operand, 0, cut)
    second = plan_offsets(shape, operand, cut, numel)
    assert sum(first.values()) == cut
    assert first + second == plan_offsets(shape, operand)
    assert sorted(o for (o,) in (first + second)) == [4 * i for i in range(numel)]


def test_dim_counter_rejects_a_begin_outside_the_shape():
    with pytest.raises(ValueError):
        DimCounter((2, 3), (6, 7))
    counter = DimCounter((4, 3), (0, 12))
    with pytest.raises(ValueError):
        counter.increment((2, 2))  # a 2-D step must span whole rows


# --- bad input ----------------------------------------------------------------------------


def test_negative_sizes_raise_torchs_message():
    with pytest.raises(RuntimeError) as ours:
        OperandSpec((-1, 2), (1, 1), torch.float32)
    assert str(ours.value) == torch_error(lambda: torch.empty(-1, 2))


def test_channels_last_on_a_non_4d_tensor_raises_torchs_message():
    t = torch.empty(3, 4)
    for name, call in (
        ("clone", lambda: t.clone(memory_format=torch.channels_last)),
        ("contiguous", lambda: t.contiguous(memory_format=torch.channels_last)),
        ("empty_like", lambda: torch.empty_like(t, memory_format=torch.channels_last)),
    ):
        with pytest.raises(RuntimeError) as ours:
            explain(name, t, memory_format=torch.channels_last)
        assert str(ours.value) == torch_error(call)


def test_copy_into_an_expanded_tensor_raises_torchs_message():
    dst = torch.zeros(3).expand(2, 3)
    src = torch.ones(2, 3)
    with pytest.raises(RuntimeError) as ours:
        explain("copy_", dst, src)
    assert str(ours.value) == torch_error(lambda: dst.copy_(src))


def test_inplace_output_cannot_broadcast():
    a, b = torch.zeros(4), torch.zeros(3, 4)
    with pytest.raises(RuntimeError) as ours:
        explain(torch.Tensor.add_, a, b)
    assert str(ours.value) == torch_error(lambda: a.add_(b))


def test_operand_spec_validation():
    with pytest.raises(RuntimeError, match="undefined input"):
        OperandSpec(None, None, torch.float32)
    with pytest.raises(ValueError):
        OperandSpec((2,), (1, 1), torch.float32)
    with pytest.raises(ValueError):
        build([spec((2,)), OperandSpec.output()], copy_config())


def test_explain_rejects_what_it_does_not_know():
    with pytest.raises(NotImplementedError):
        explain(torch.matmul, torch.ones(2, 2), torch.ones(2, 2))
    with pytest.raises(NotImplementedError):
        explain("transpose", torch.ones(2))
    with pytest.raises(TypeError):
        explain(torch.add, torch.ones(2), "x")
    with pytest.raises(TypeError):
        explain("clone", torch.ones(2), memory_fmt=torch.channels_last)


# --- explain ------------------------------------------------------------------------------


def test_report_table_lists_every_step_in_build_order():
    a = torch.empty(2, 3, 4, 5).to(memory_format=torch.channels_last)
    report = explain(torch.add, a, torch.empty(3, 4, 5))
    names = [name for name, _ in report.steps]
    assert names == [
        "operands",
        "compute_shape",
        "mark_resize_outputs",
        "compute_types",
        "compute_fast_setup_type",
        "fast_set_up",
        "compute_strides",
        "reorder_dimensions",
        "allocate_or_resize_outputs",
        "coalesce_dimensions",
    ]
    text = str(report)
    positions = [text.index(f"\n{name} ") for name in names]
    assert positions == sorted(positions)
    assert "perm [1, 3, 2, 0]" in text


def test_explain_accepts_operator_and_method_forms():
    a, b = torch.ones(2, 3), torch.ones(3)
    import operator

    for op in (torch.add, torch.Tensor.add, operator.add):
        assert explain(op, a, b).output_strides == (a + b).stride()
    assert explain(operator.truediv, torch.ones(2, dtype=torch.int64), 2).dtype == torch.float32
    assert explain("copy_", a, a).plan is None  # same tensor: nothing to copy
