"""explain(torch.abs, ...) against torch CPU, complex inputs included.

Truth: ``torch.abs`` on CPU with the same layouts: the output's sizes, strides and dtype
(functional, ``out=`` of any dtype, shape and strides), and torch's error message where it
raises (an ``out=`` the real dtype cannot be cast to, in-place ``abs_`` of a complex
tensor). ATen's abs of a complex tensor is real (``unary_op_impl_with_complex_to_float``):
``empty_like(self, real dtype)``, or the given ``out``, filled with the real part of a
complex -> complex build; explain() gave the build's complex output.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.layout.strategies import views
from torch_mydev_rules.iterator import explain

from .strategies import DTYPES, layout_for, make_tensor, shapes
from .walker import assert_walk_matches

ABS_DTYPES = (*DTYPES, torch.complex128)


def _torch(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an out= with elements resized
        try:
            return fn()
        except RuntimeError as error:
            return error


def _explain(*args, **kwargs):
    try:
        return explain(torch.abs, *args, **kwargs)
    except RuntimeError as error:
        return error


def _check(report, result, out=None):
    if isinstance(result, Exception) and "not implemented for" in str(result):
        return  # the kernel's refusal of a dtype (bool), after the iterator: not a rule
    if isinstance(result, Exception):
        assert isinstance(report, RuntimeError), report
        assert str(report) == str(result)
        return
    assert not isinstance(report, Exception), report
    expected = result if out is None else out
    assert report.shape == tuple(expected.shape)
    assert report.output_strides == expected.stride()
    assert report.dtype == expected.dtype
    assert_walk_matches(report.plan, [None, report.plan.shape])


@given(views(), st.sampled_from(ABS_DTYPES))
def test_abs_matches_torch(layout, dtype):
    x = make_tensor(layout, dtype)
    _check(_explain(x), _torch(lambda: torch.abs(x)))


@given(views(), st.sampled_from((torch.complex64, torch.complex128)), st.data())
def test_abs_of_complex_into_out_matches_torch(layout, dtype, data):
    """``out=`` of the input's shape or another (resized: contiguous), real, complex or a
    dtype the real one cannot be cast to; explain reads ``out`` before torch resizes it."""
    x = make_tensor(layout, dtype)
    sizes = data.draw(st.sampled_from((tuple(x.shape), (0,))) | shapes())
    out_layout = data.draw(layout_for(sizes, allow_overlap=False))
    out_dtype = data.draw(st.sampled_from(ABS_DTYPES))
    out = make_tensor(out_layout, out_dtype)
    report = _explain(x, out=out)
    _check(report, _torch(lambda: torch.abs(x, out=out)), out)


def test_the_kit_case():
    """The conformance kit's find: complex64 in, float32 out, with empty_like's strides."""
    x = torch.zeros(200, dtype=torch.complex64).as_strided((2, 1, 3, 3, 1), (72, 1, 12, 2, 2), 1)
    report = explain(torch.abs, x)
    assert report.dtype == torch.abs(x).dtype == torch.float32
    assert report.output_strides == torch.abs(x).stride() == (9, 1, 3, 1, 1)
    assert [name for name, _ in report.steps][:2] == ["complex_to_float", "empty_like"]


def test_inplace_abs_of_complex_raises_torchs_error():
    x = torch.zeros(3, dtype=torch.complex64)
    with pytest.raises(RuntimeError) as on_torch:
        x.abs_()
    with pytest.raises(RuntimeError) as on_explain:
        explain(torch.Tensor.abs_, x)
    assert str(on_explain.value) == str(on_torch.value)
