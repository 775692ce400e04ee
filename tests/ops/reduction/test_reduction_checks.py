"""sum, mean, amax and amin of empty tensors raise CPU's exception, in CPU's order.

Truth: the same call on CPU. ATen's ``amax`` / ``amin`` meta function checks ``out``'s
dtype, then (for an empty input) ``zero_numel_check_dims``: every named dim must have a
non-zero size (``IndexError``), and only then ``resize_reduction`` wraps the dims and
refuses a repeated one (``RuntimeError``). That order holds for every dtype; mydev checked
the empty dims only for the dtypes its own loops take, so a complex, uint16/32/64 or
float8 input raised the repeated dim's ``RuntimeError`` where CPU raises ``IndexError``
(the conformance kit's ``amin(empty(0, 4, 1, complex128), (-1, 1, 0, -1))``).
"""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.iterator.strategies import shapes

DTYPES = (
    torch.bool,
    torch.uint8,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
    torch.complex32,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float8_e4m3fn,
)


def _outcome(call, device: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = call(device)
        except Exception as error:  # type and message are what is compared
            return type(error), str(error)
    return result.dtype, tuple(result.shape)


@st.composite
def calls(draw):
    """An op, an empty (or 0-dim) input, dims with repeats, out-of-range and empty dims,
    keepdim, and now and then an ``out=`` of the input's dtype or another."""
    sizes = draw(shapes(0, 4))
    if sizes and 0 not in sizes and draw(st.booleans()):
        sizes = (*sizes[:-1], 0)
    rank = max(len(sizes), 1)
    dims = tuple(draw(st.lists(st.integers(-rank - 1, rank), max_size=4)))
    op = draw(st.sampled_from(("amax", "amin", "sum", "mean")))
    dtype = draw(st.sampled_from(DTYPES))
    keepdim = draw(st.booleans())
    out_dtype = draw(st.sampled_from((None, dtype, torch.float32)))

    def call(device):
        x = torch.empty(sizes, dtype=dtype, device=device)
        kwargs = (
            {} if out_dtype is None else {"out": torch.empty(0, dtype=out_dtype, device=device)}
        )
        return getattr(torch, op)(x, dims, keepdim, **kwargs)

    call.__name__ = f"{op}(empty({sizes}, {dtype}), {dims}, {keepdim}, out={out_dtype})"
    return call


@given(call=calls())
def test_errors_of_empty_reductions_like_cpu(call):
    assert _outcome(call, "mydev") == _outcome(call, "cpu"), call.__name__


@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("dtype", [torch.complex128, torch.complex64, torch.uint16])
@pytest.mark.parametrize(
    ("sizes", "dims"),
    [((0, 4, 1), (-1, 1, 0, -1)), ((0, 3), (0, 0)), ((2, 0), (0, 0, 1)), ((2, 0), (1, 1, 0))],
)
def test_an_empty_dim_before_a_repeated_one(op, dtype, sizes, dims):
    """Each of these dims lists repeats a dim and names an empty one: IndexError first."""
    messages = []
    for device in ("cpu", "mydev"):
        x = torch.empty(sizes, dtype=dtype, device=device)
        with pytest.raises(IndexError, match=rf"{op}\(\): Expected reduction dim") as error:
            getattr(torch, op)(x, dims)
        messages.append(str(error.value))
    assert messages[0] == messages[1]
