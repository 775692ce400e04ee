"""Structured ops through the fallback get CPU's output layout for non-dense inputs.

Truth: the same op on the same layout and values on CPU (sizes, strides, dtype, contiguity
flags, bits). Without ``ops/fallback/structured.py`` mydev's functional structured ops took
the strides TensorIterator gives without CPU's cast temporaries (CUDA's), which differ for a
non-dense input of another dtype than the common one (docs/fallback.md).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import torch_mydev
from tests.iterator.strategies import layout_for, make_tensor, shapes
from tests.support.tensors import same_bits, same_layout
from torch_mydev.ops.fallback import boxed as fallback
from torch_mydev.ops.fallback.structured import all_dense

# unary ops whose integer input is promoted to float (unary_float_op_config)
UNARY_FLOAT = {
    "exp": torch.exp,
    "sin": torch.sin,
    "log1p": torch.log1p,
    "erf": torch.erf,
    "reciprocal": torch.reciprocal,
}
# binary ops that promote their inputs to a common dtype (binary_op_config and friends)
BINARY = {
    "atan2": torch.atan2,
    "maximum": torch.maximum,
    "fmod": torch.fmod,
    "copysign": torch.copysign,
    "hypot": torch.hypot,
    "bitwise_or": torch.bitwise_or,
}
INTEGRAL = (torch.int32, torch.int64, torch.uint8, torch.int16, torch.bool)


def _both(call, *cpu_inputs):
    """``call`` on the CPU inputs and on mydev copies with the same layouts: the results
    or the exception types."""
    dev_inputs = [_same_layout_on_mydev(t) for t in cpu_inputs]
    out = []
    for inputs in (cpu_inputs, dev_inputs):
        try:
            out.append(call(*inputs))
        except Exception as error:  # the type is what is compared
            out.append(type(error))
    return out


def _storage(t: torch.Tensor) -> torch.Tensor:
    return t.as_strided((t.untyped_storage().nbytes() // t.element_size(),), (1,), 0)


def _filled(t: torch.Tensor, value: int) -> torch.Tensor:
    _storage(t).fill_(value)
    return t


def _same_layout_on_mydev(t: torch.Tensor) -> torch.Tensor:
    return _storage(t).to("mydev").as_strided(t.shape, t.stride(), t.storage_offset())


def _assert_like_cpu(cpu, dev):
    if isinstance(cpu, type):
        assert dev is cpu
        return
    assert same_layout(dev, cpu), (dev.shape, dev.stride(), cpu.shape, cpu.stride())
    assert same_bits(dev, cpu)


@given(
    layout=shapes(1, 5).flatmap(layout_for),
    name=st.sampled_from(sorted(UNARY_FLOAT)),
    dtype=st.sampled_from(INTEGRAL),
)
def test_unary_float_ops_of_integer_views_like_cpu(layout, name, dtype):
    x = make_tensor(layout, dtype)  # zeros: every op is defined on them
    cpu, dev = _both(UNARY_FLOAT[name], x)
    _assert_like_cpu(cpu, dev)


@given(
    layouts=shapes(1, 4).flatmap(lambda s: st.tuples(layout_for(s), layout_for(s))),
    name=st.sampled_from(sorted(BINARY)),
    dtypes=st.tuples(
        st.sampled_from((torch.float32, torch.int64, torch.int32)),
        st.sampled_from((torch.float64, torch.int16, torch.uint8)),
    ),
)
def test_binary_ops_with_mixed_dtypes_like_cpu(layouts, name, dtypes):
    a = _filled(make_tensor(layouts[0], dtypes[0]), 1)  # no zero divisor
    b = _filled(make_tensor(layouts[1], dtypes[1]), 2)
    cpu, dev = _both(BINARY[name], a, b)
    _assert_like_cpu(cpu, dev)


def test_the_kit_reproducer():
    """The conformance kit's case (docs/conformance.md): CPU's cast temporary of the int32
    input is contiguous, so CPU's output is; the input's own order gives (9, 1, 3, 1, 1)."""
    x = torch.zeros(200, dtype=torch.int32).as_strided((2, 1, 3, 3, 1), (72, 1, 12, 2, 2), 1)
    for op in (torch.exp, torch.sin):
        cpu, dev = _both(op, x)
        assert cpu.stride() == (9, 9, 3, 1, 1)
        _assert_like_cpu(cpu, dev)
    cpu, dev = _both(torch.atan2, x, torch.ones(3, 1, dtype=torch.float64))
    _assert_like_cpu(cpu, dev)


def test_dense_inputs_keep_the_composite():
    """A dense call runs the generated composite and CPU's ``out=`` kernel, as before; a
    non-dense one (or a Python number for a tensor) runs CPU's functional kernel."""
    x = torch.arange(12, dtype=torch.int32, device="mydev").reshape(3, 4)
    torch_mydev.reset_fallback_stats()
    torch.exp(x)
    torch.exp(x.t())  # a transpose is dense
    assert torch_mydev.fallback_stats() == {"aten::exp.out": 2}
    torch_mydev.reset_fallback_stats()
    torch.exp(x[:, ::2])
    x % 3
    assert torch_mydev.fallback_stats() == {"aten::exp": 1, "aten::remainder.Scalar": 1}


def test_a_non_dense_call_runs_cpus_kernel_in_the_stub():
    """CPU's functional kernel for a non-dense input runs on the stub's plain path (aliases,
    the CPU op, the result adopted), as ``run_on_cpu`` would in Python; a Python number for
    a tensor still goes to Python, which picks the overload the caller called."""
    x = torch.arange(24, dtype=torch.int32, device="mydev").reshape(4, 6)
    half = x[:, 3:]
    torch_mydev.reset_fallback_stats()
    torch.exp(x[:, ::2])
    joined = torch.cat((-half, x[:, :3]), dim=-1)  # rotary attention's rotate_half
    assert torch_mydev._C._fallback_counts() == {"aten::exp": 1, "aten::cat": 1}
    assert dict(fallback._stats) == {}
    x % 3
    assert dict(fallback._stats) == {"aten::remainder.Scalar": 1}
    c = x.cpu()
    expected = torch.cat((-c[:, 3:], c[:, :3]), dim=-1)
    assert same_layout(joined, expected) and same_bits(joined, expected)


def test_every_structured_functional_overload_is_registered():
    """The list is the dispatcher's; spot checks of what it must and must not hold."""
    names = {str(op) for op in fallback.STRUCTURED_OPS}
    assert {"aten.exp.default", "aten.sin.default", "aten.atan2.default"} <= names
    assert {"aten.maximum.default", "aten.remainder.Tensor", "aten.cat.default"} <= names
    # in-place forms write self's own layout; FAST_FUNCTIONAL ones run CPU's kernel always
    assert not {"aten.exp_.default", "aten.sqrt.default", "aten.mm.default"} & names
    for op in fallback.STRUCTURED_OPS:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "PrivateUse1")


@pytest.mark.parametrize(
    ("sizes", "strides", "dense"),
    [
        ((2, 3), (3, 1), True),
        ((2, 3), (1, 2), True),
        ((2, 1, 3, 3), (9, 1, 3, 1), True),  # channels_last
        ((2, 3), (6, 1), False),  # a gap
        ((2, 3), (0, 1), False),  # expanded
        ((2, 2), (1, 1), False),  # overlapping
        ((0, 3), (7, 5), True),  # no elements
    ],
)
def test_all_dense(sizes, strides, dense):
    t = torch.zeros(32, device="mydev").as_strided(sizes, strides)
    assert all_dense([t]) is dense
    assert all_dense([[torch.zeros(32).as_strided(sizes, strides)]])  # CPU ones do not count
    assert all_dense([1, None, (t, t)]) is dense
