"""Named tensors: torch 2.13 has none, and mydev refuses them exactly as CPU does.

``aten::empty.names`` and the ``names=`` keyword of the factories are gone from torch
2.13 (``torch.ops.aten.empty`` has only ``memory_format`` and ``out``), and so are
``Tensor.names``, ``rename`` and ``refine_names``. A user's ``torch.empty(2, 3,
names=("a", "b"), device="mydev")`` therefore fails in torch's argument parser, before any
dispatch: there is no kernel for mydev to add. This checks that the refusal is CPU's.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

CALLS: dict[str, Callable[[str], object]] = {
    "empty": lambda d: torch.empty(2, 3, names=("a", "b"), device=d),
    "empty_size_tuple": lambda d: torch.empty((2, 3), names=None, device=d),
    "zeros": lambda d: torch.zeros(2, names=("a",), device=d),
    "names": lambda d: torch.ones(2, device=d).names,
    "rename": lambda d: torch.ones(2, device=d).rename("a"),
}


def _error(call: Callable[[str], object], device: str) -> tuple[type, str]:
    with pytest.raises(Exception) as info:  # its type is compared below
        call(device)
    return type(info.value), str(info.value)


def test_the_op_has_no_names_overload():
    assert "names" not in torch.ops.aten.empty.overloads()


@pytest.mark.parametrize("name", list(CALLS))
def test_named_tensors_are_refused_as_on_cpu(name):
    assert _error(CALLS[name], "mydev") == _error(CALLS[name], "cpu")
