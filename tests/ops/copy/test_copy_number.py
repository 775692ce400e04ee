"""``t.copy_(number)`` on mydev: a Python number as the source, as CPU takes it.

torch's argument parser wraps the number (``scalar_to_tensor``: bool, int64, double or
complex double) and the dispatcher hands our Python kernel the number itself
(``ops/copy/aten.py`` ``wrapped_number``). Truth: the same ``copy_`` on a CPU tensor, bit for bit.
"""

from __future__ import annotations

import contextlib
import math
import warnings

import pytest
import torch

from tests.support.dtypes import COPY_DTYPES
from tests.support.tensors import same_bits
from torch_mydev.ops.copy import aten as copy_ops
from torch_mydev.ops.copy.aten import wrapped_number

NAN = float("nan")
NUMBERS = [
    NAN,
    -NAN,
    math.inf,
    -math.inf,
    0.0,
    -0.0,
    0.1,
    2.7,
    -2.7,
    65520.0,
    1e10,
    1e-40,
    True,
    False,
    0,
    1,
    -1,
    255,
    2**40,
    -(2**63),
    1 + 2j,
    complex(NAN, -0.0),
    -0.5j,
]


def _undefined(value: bool | int | float | complex, dtype: torch.dtype) -> bool:
    """A float -> integer conversion out of range (or of NaN/inf): undefined in C++, and
    the copy tests do not compare them (docs/ops.md)."""
    if dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        return False
    if isinstance(value, (bool, int)):
        return False
    real = value.real if isinstance(value, complex) else value
    if not math.isfinite(real):
        return True
    info = torch.iinfo(dtype)
    return not info.min <= math.trunc(real) <= info.max


@contextlib.contextmanager
def _warn_always():
    """``torch.set_warn_always(True)``: CPU's ``TORCH_WARN_ONCE`` warns on every call."""
    before = torch.is_warn_always_enabled()
    torch.set_warn_always(True)
    try:
        yield
    finally:
        torch.set_warn_always(before)


def _copy(device: str, dtype: torch.dtype, value) -> tuple[torch.Tensor, list[tuple]]:
    dst = torch.zeros(2, 3, dtype=dtype, device=device).t()  # a strided destination
    with warnings.catch_warnings(record=True) as seen, _warn_always():
        warnings.simplefilter("always")
        result = dst.copy_(value)
    assert result is dst
    # CPU's C++ warning ends with where it was raised: "(Triggered internally at ...)".
    return dst, [(w.category, str(w.message).split(" (Triggered")[0]) for w in seen]


@pytest.mark.parametrize("dtype", COPY_DTYPES, ids=str)
def test_copy_of_a_python_number_equals_cpu_bit_for_bit(dtype):
    for value in NUMBERS:
        if _undefined(value, dtype):
            continue
        expected, expected_warnings = _copy("cpu", dtype, value)
        got, got_warnings = _copy("mydev", dtype, value)
        assert got.device.type == "mydev"
        assert got.stride() == expected.stride()
        assert same_bits(got, expected), (value, got.cpu(), expected)
        assert got_warnings == expected_warnings, value  # complex -> real warns once


def _complex_to_real_warnings(device: str, calls: int) -> int:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(calls):
            torch.zeros(2, device=device).copy_(torch.tensor([1 + 2j, 3j]).to(device))
    return sum("discards the imaginary part" in str(w.message) for w in seen)


def test_complex_to_real_warns_once_as_cpu(monkeypatch):
    """Copy.cpp's warning is ``TORCH_WARN_ONCE``: once per process, every time while
    ``torch.set_warn_always(True)``. CPU's own flag cannot be reset: it warns once at most."""
    monkeypatch.setattr(copy_ops, "_complex_to_real_warned", False)
    assert _complex_to_real_warnings("cpu", 3) <= 1
    assert _complex_to_real_warnings("mydev", 3) == 1
    assert _complex_to_real_warnings("mydev", 2) == 0
    with _warn_always():
        assert _complex_to_real_warnings("cpu", 2) == _complex_to_real_warnings("mydev", 2) == 2


def test_wrapped_numbers_have_the_dtypes_of_scalar_to_tensor():
    """ATen's ``scalar_to_tensor``: the dtype decides the cast (a double NaN's bits, an
    int64's wrap-around into uint8)."""
    kinds = {True: torch.bool, 3: torch.int64, 2.5: torch.float64, 1j: torch.complex128}
    for value, dtype in kinds.items():
        t = wrapped_number(value)
        assert (t.dtype, t.shape, t.device.type) == (dtype, (), "cpu")
        assert t.item() == value
    with pytest.raises(TypeError, match="must be a Tensor or a Python number"):
        wrapped_number("1")


def test_the_number_stays_on_cpu_under_a_mydev_default_device():
    with torch.device("mydev"):
        dst = torch.zeros(3)
        dst.copy_(-math.inf)
    assert dst.device.type == "mydev"
    assert same_bits(dst, torch.full((3,), -math.inf))


def test_copying_a_number_into_an_empty_and_a_0_dim_tensor():
    empty = torch.empty(0, 4, device="mydev")
    assert empty.copy_(NAN) is empty
    scalar = torch.zeros((), dtype=torch.float16, device="mydev")
    scalar.copy_(65520.0)  # rounds to inf in half, as on CPU
    assert same_bits(scalar, torch.zeros((), dtype=torch.float16).copy_(65520.0))


def _scaled_step(device: str, poison: bool) -> tuple[list[torch.Tensor], float]:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**4)
    scaler.scale(model(torch.randn(3, 4).to(device)).sum()).backward()
    if poison:
        model.weight.grad[0, 0] = math.inf
    scaler.unscale_(optimizer)
    grads = [p.grad.cpu() for p in model.parameters()]
    scaler.step(optimizer)
    scaler.update()
    return grads + [p.detach().cpu() for p in model.parameters()], scaler.get_scale()


@pytest.mark.parametrize("poison", [False, True], ids=["finite", "inf_grad"])
def test_grad_scaler_unscales_and_skips_an_inf_step_as_on_cpu(poison):
    """End to end: ``GradScaler("mydev")`` unscales, finds an inf gradient, skips that step
    and halves its scale exactly as on CPU."""
    expected, expected_scale = _scaled_step("cpu", poison)
    got, scale = _scaled_step("mydev", poison)
    assert scale == expected_scale == (8.0 if poison else 16.0)
    for g, e in zip(got, expected, strict=True):
        assert same_bits(g, e)
