"""Structured ops through the fallback: CPU's functional kernel, CPU's output layout.

Truth: the same op on the same layout and values on CPU (sizes, strides, dtype, contiguity
flags, bits). Through their generated composite mydev's functional structured ops took the
strides TensorIterator gives without CPU's cast temporaries (CUDA's), which differ for a
non-dense input of another dtype than the common one (docs/fallback.md); the composite now
runs only for dense calls (``ops/fallback/structured.py``), which path ran is read from the
fallback's counts.
"""

from __future__ import annotations

import warnings

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


def _counts(call) -> tuple[dict[str, int], dict[str, int]]:
    """What ``call()`` added to the fallback's counts: the stub's C++ path's and Python's."""
    torch_mydev.reset_fallback_stats()
    call()
    return torch_mydev._C._fallback_counts(), dict(fallback._stats)


def test_functional_calls_run_cpus_functional_kernel():
    """Dense or not, a functional call runs CPU's functional kernel, counted under its own
    name; a Python number for a tensor goes to Python, which picks the overload called."""
    x = torch.arange(12, dtype=torch.int32, device="mydev").reshape(3, 4)
    calls = lambda: (torch.exp(x), torch.exp(x.t()), torch.exp(x[:, ::2]))  # noqa: E731
    assert _counts(calls) == ({"aten::exp": 3}, {})
    assert _counts(lambda: x % 3) == ({}, {"aten::remainder.Scalar": 1})


@pytest.mark.parametrize("warn", [False, True], ids=["stub", "python"])
def test_large_dense_calls_run_the_composite(warn, monkeypatch):
    """From ``_COMPOSITE_BYTES`` in one mydev tensor a dense call allocates its output on
    mydev and runs the ``out=`` overload (mydev's allocator keeps such blocks); a non-dense
    one still runs CPU's functional kernel. Python's path (every call, under
    ``TORCH_MYDEV_FALLBACK_WARN``) draws the same line as the stub's."""
    if warn:
        monkeypatch.setenv(fallback.WARN_ENV, "1")
    limit = torch_mydev._C._COMPOSITE_BYTES // 4
    big = torch.arange(limit + 2, dtype=torch.float32, device="mydev")
    x = big[:limit]  # exactly the limit: dense, large
    cases = [
        (lambda: torch.exp(x), "aten::exp.out"),
        (lambda: torch.exp(big[: limit - 1]), "aten::exp"),  # a lane short of it
        (lambda: torch.atan2(x, x), "aten::atan2.out"),
        (lambda: torch.exp(big[::2]), "aten::exp"),  # large, not dense
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", torch_mydev.FallbackWarning)
        for call, name in cases:
            stub, python = _counts(call)
            assert (python if warn else stub) == {name: 1}, name
            assert (stub if warn else python) == {}, name
        for got, expected in (
            (torch.exp(x), x.cpu().exp()),
            (torch.exp(big[::2]), big.cpu()[::2].exp()),
        ):
            assert same_layout(got, expected) and same_bits(got, expected)


def test_an_out_kernel_of_mydev_takes_dense_calls():
    """A mydev kernel for the ``out=`` overload (a user's) runs the op's dense calls through
    the composite, from the call after it is registered until it is removed."""
    x = torch.linspace(-1, 1, 12, device="mydev").reshape(3, 4)
    seen = []

    def traced_exp_out(t, *, out):
        seen.append(tuple(t.shape))
        return out.copy_(torch.exp(t.cpu()))

    library = torch.library.Library("aten", "IMPL")
    library.impl("exp.out", traced_exp_out, "PrivateUse1")
    try:
        assert _counts(lambda: torch.exp(x)) == ({}, {})  # the user's kernel ran
        assert seen == [(3, 4)]
        assert _counts(lambda: torch.exp(x[:, ::2])) == ({"aten::exp": 1}, {})  # not dense
        assert seen == [(3, 4)]
    finally:
        del library
    assert _counts(lambda: torch.exp(x)) == ({"aten::exp": 1}, {})


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
    assert {"aten.mm.default", "aten._softmax.default", "aten.sqrt.default"} <= names
    # in-place forms write self's own layout; these run CPU's kernel always (CPU_KERNEL_OPS)
    assert not {"aten.exp_.default", "aten.mse_loss.default", "aten.index.Tensor"} & names
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
