"""Property test: fallback ops on arbitrary strided views, zero-copy and copy path, vs CPU.

Truth: the same op on the same view of the same values on CPU: same result (values, sizes,
strides), same exception type, and the same bytes in the whole storage afterwards (so
in-place writes through views, overlapping or not, land where CPU's land).
"""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.layout.strategies import storage_elements, views
from tests.support.raises import outcome
from tests.support.tensors import same_bits, same_layout, values
from torch_mydev.ops.fallback import boxed as fallback

OPS = {
    "sin": lambda t: torch.sin(t),
    "hardtanh": lambda t: torch.nn.functional.hardtanh(t),
    "cumsum": lambda t: t.cumsum(-1) if t.dim() else t.cumsum(0),
    "cat": lambda t: torch.cat([t.reshape(-1), t.reshape(-1)]),
    "exp_": lambda t: t.exp_(),
    "clamp_": lambda t: t.clamp_(min=0.5),
    "sin_out_self": lambda t: torch.sin(t, out=t),
    "max_dim": lambda t: t.max(-1) if t.dim() else t.max(0),
    "cos_out_empty": lambda t: torch.cos(t, out=t.new_empty(0)),
    "cos_out_wrong_shape": lambda t: torch.cos(t, out=t.new_empty(2, 1).t()),
    "mm": lambda t: t.reshape(t.shape[0], -1) @ t.reshape(t.shape[0], -1).mT if t.dim() else t,
    "sort": lambda t: t.sort(-1) if t.dim() else t.sort(0),
}


def _run(op, base: torch.Tensor, view):
    sizes, strides, offset = view
    t = base.as_strided(sizes, strides, offset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resized-output warnings, the same on both
        return outcome(lambda: op(t))


@pytest.mark.parametrize("zero_copy", [True, False], ids=["zero_copy", "copy"])
@given(view=views(max_dims=4), name=st.sampled_from(sorted(OPS)))
def test_fallback_ops_on_views_like_cpu(zero_copy, view, name):
    saved = fallback.zero_copy
    fallback.zero_copy = zero_copy
    try:
        base = values(max(storage_elements(*view), 1), torch.float32, seed=1)
        cpu_base, dev_base = base.clone(), base.to("mydev")
        expected, cpu_error = _run(OPS[name], cpu_base, view)
        result, dev_error = _run(OPS[name], dev_base, view)
    finally:
        fallback.zero_copy = saved
    assert dev_error is cpu_error
    assert same_bits(cpu_base, dev_base)
    if expected is None:
        return
    pairs = (
        zip(expected, result, strict=True) if isinstance(expected, tuple) else [(expected, result)]
    )
    for c, d in pairs:
        assert d.device.type == "mydev"
        assert same_layout(c, d), (c.shape, c.stride(), d.shape, d.stride())
        assert same_bits(c, d)
