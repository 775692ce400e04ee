"""``Tensor.item()`` and ``aten::_local_scalar_dense`` on mydev: CPU's values and errors.

Truth: the same call on the CPU tensor. ``Tensor.item()`` (ATen's ``item``) refuses all but
one element before it calls ``_local_scalar_dense``, whose CPU and CUDA kernels refuse an
empty tensor and otherwise read the first element (``ops/copy/aten.py`` ``local_scalar_dense``).
"""

from __future__ import annotations

import pytest
import torch

from tests.support.dtypes import COPY_DTYPES

SHAPES = [(0,), (0, 3), (2,), (2, 3), (1, 1, 1)]

CALLS = {
    "item": lambda t: t.item(),
    "local_scalar_dense": lambda t: torch.ops.aten._local_scalar_dense(t),
    "float": lambda t: float(t),
    "int": lambda t: int(t),
    "bool": lambda t: bool(t),
    "complex": lambda t: complex(t),
}


def _outcome(call, t: torch.Tensor):
    try:
        return "value", call(t)
    except Exception as error:  # the exception is what is compared
        return type(error), str(error)


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_values_and_errors_equal_cpu(shape, call):
    cpu = torch.arange(1, 1 + torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)
    assert _outcome(call, cpu.to("mydev")) == _outcome(call, cpu)


def test_local_scalar_dense_of_an_empty_tensor_words_its_error_as_cpu():
    for device in ("cpu", "mydev"):
        with pytest.raises(
            RuntimeError, match=r"^_local_scalar_dense: Empty tensor not supported$"
        ):
            torch.ops.aten._local_scalar_dense(torch.empty(0, 2, device=device))


VIEWS = {
    "offset_transposed": lambda t: t.reshape(3, 4).t()[1:],
    "strided": lambda t: t[5::3],
    "conj": lambda t: torch.complex(t, -t).conj()[2:],
    "neg_imag": lambda t: torch.complex(t, t + 1).conj().imag[7:],
}


@pytest.mark.parametrize("view", VIEWS.values(), ids=VIEWS.keys())
def test_local_scalar_dense_reads_the_first_element_of_a_view(view):
    base = torch.arange(12.0) - 4.5
    expected = torch.ops.aten._local_scalar_dense(view(base))
    got = torch.ops.aten._local_scalar_dense(view(base.to("mydev")))
    assert type(got) is type(expected)
    assert got == expected


@pytest.mark.parametrize("dtype", COPY_DTYPES, ids=str)
def test_item_of_every_dtype_equals_cpu(dtype):
    values = torch.tensor([[3.75, -2.0]], dtype=torch.float64)
    cpu = (values * (1 + 1j) if dtype.is_complex else values).to(dtype)[:, 1:]
    got = cpu.to("mydev").item()
    assert type(got) is type(cpu.item())
    assert got == cpu.item()
