"""torch_mydev.testing.compare: agrees where the devices agree, names every difference.

Differences are planted by functions that branch on ``t.device.type``; truth is the CPU
run of the same function.
"""

from __future__ import annotations

import doctest

import pytest
import torch

import torch_mydev.testing
from torch_mydev.testing import compare


def _on_mydev(t: torch.Tensor) -> bool:
    return t.device.type == "mydev"


def test_module_doctest():
    result = doctest.testmod(torch_mydev.testing, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# ---------------------------------------------------------------------------- agreement


def test_agrees_and_counts_tensors():
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    report = compare(lambda t: (t.sin(), t.sum(dim=1), t * 2), x)
    assert report.ok and report.checked == 4  # three outputs and the input after the call
    assert report.mydev[0].device.type == "mydev" and report.cpu[0].device.type == "cpu"
    assert "agrees" in str(report)


def test_nested_arguments_kwargs_and_results():
    a, b = torch.randn(3, 4), torch.arange(6).reshape(2, 3)

    def fn(pair, *, extra):
        first, second = pair
        return {"sum": first + extra["bias"][0], "items": [second.flip(0), second.max().item()]}

    report = compare(fn, [a, b], extra={"bias": (torch.ones(4),)})
    assert report.ok and isinstance(report.mydev["items"][1], int)


def test_inputs_keep_their_layout_and_sharing():
    base = torch.arange(12.0).reshape(3, 4)

    def fn(whole, view):
        whole.mul_(2)  # visible through `view` only if the copies share storage
        return view.stride(), view.storage_offset(), view.sum(dim=0)

    report = compare(fn, base, base.t())
    assert report.mydev[:2] == ((1, 4), 0)
    assert torch.equal(report.mydev[2].cpu(), (base * 2).sum(dim=1))
    assert compare(lambda t: t.stride(), base[:, 1:3]).mydev == (4, 1)
    assert compare(lambda t: t.storage_offset(), base[1:, 1:3]).mydev == 5
    assert compare(lambda t: t.stride(), base[:, :1].expand(3, 5)).mydev == (4, 0)


def test_the_callers_tensors_are_not_modified():
    x = torch.zeros(3)
    compare(lambda t: t.add_(1), x)
    assert torch.equal(x, torch.zeros(3))


def test_inputs_given_on_mydev():
    x = torch.randn(4).to("mydev")
    report = compare(torch.exp, x)
    assert report.cpu.device.type == "cpu" and report.mydev.device.type == "mydev"


def test_random_functions_agree_when_they_seed():
    def noisy(t):
        torch.manual_seed(0)
        return t + torch.randn_like(t)

    assert compare(noisy, torch.zeros(5)).ok


def test_both_raising_the_same_type_agrees():
    report = compare(lambda t: t[10], torch.zeros(3))
    assert report.ok and isinstance(report.mydev_error, IndexError)
    assert "both raised IndexError" in str(report)


def test_tolerances():
    x = torch.ones(3)
    off = lambda t: t + (1e-3 if _on_mydev(t) else 0.0)  # noqa: E731
    with pytest.raises(AssertionError):
        compare(off, x)
    assert compare(off, x, atol=1e-2, rtol=0).ok
    assert compare(off, x, atol=1e-2).ok  # the other tolerance defaults to 0


# ----------------------------------------------------------------------- differences


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda t: t + (1 if _on_mydev(t) else 0), r"output: Tensor-likes are not close"),
        (lambda t: t.double() if _on_mydev(t) else t, r"output: dtype torch.float64"),
        (lambda t: t[:2] if _on_mydev(t) else t, r"output: shape \(2, 4\), expected \(3, 4\)"),
        (lambda t: t.t().contiguous().t() if _on_mydev(t) else t + 0, r"strides \(1, 3\)"),
        (lambda t: t.cpu(), r"output: device cpu, expected mydev"),
        (lambda t: [t, t] if _on_mydev(t) else [t], r"output: a list of 2, expected a list of 1"),
        (lambda t: t.shape[0] + _on_mydev(t), r"output: 4, expected 3"),
        (lambda t: t.sum().item() + _on_mydev(t), r"output: .*not close"),
        (lambda t: t.mul_(2 if _on_mydev(t) else 1), r"inputs after the call\[0\]\[0\]"),
    ],
    ids=["values", "dtype", "shape", "strides", "device", "structure", "int", "float", "in_place"],
)
def test_each_difference_is_reported(fn, message):
    with pytest.raises(AssertionError, match=message):
        compare(fn, torch.randn(3, 4))


def test_strides_can_be_ignored():
    fn = lambda t: t.t().contiguous().t() if _on_mydev(t) else t + 0  # noqa: E731
    assert compare(fn, torch.randn(3, 4), check_strides=False).ok


def test_gradients_are_compared():
    def fn(w):
        scale = 3.0 if _on_mydev(w) else 2.0
        (w * w * scale).sum().backward()

    with pytest.raises(AssertionError, match=r"\[0\]\[0\]\.grad: Tensor-likes are not close"):
        compare(fn, torch.randn(3, requires_grad=True))
    assert compare(lambda w: (w * w).sum().backward(), torch.randn(3, requires_grad=True)).ok


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (lambda t: t[10] if not _on_mydev(t) else t, r"CPU raised IndexError.*mydev did not"),
        (lambda t: t[10] if _on_mydev(t) else t, r"mydev raised IndexError.*CPU did not"),
        (
            lambda t: (_ for _ in ()).throw(ValueError("v") if _on_mydev(t) else KeyError("k")),
            r"mydev raised ValueError: v; CPU raised KeyError",
        ),
    ],
    ids=["only_cpu", "only_mydev", "different_types"],
)
def test_exception_differences(fn, message):
    with pytest.raises(AssertionError, match=message):
        compare(fn, torch.zeros(3))


def test_all_differences_are_listed():
    def fn(t):
        return (t + 1, t.double()) if _on_mydev(t) else (t, t)

    with pytest.raises(AssertionError) as info:
        compare(fn, torch.randn(2))
    lines = str(info.value).splitlines()
    assert lines[0] == "mydev differs from CPU:"
    assert lines[1].startswith("  output[0]:") and lines[2].startswith("  output[1]: dtype")
