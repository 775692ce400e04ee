"""``-`` and relu on bool tensors raise what CPU raises (ops/elementwise/checks.py
``sub_check``, ``neg_check``, ops/elementwise/relu.py ``_check_relu``): the same message and
the same exception type, which torch changed (``RuntimeError`` in 2.13,
``NotImplementedError`` from 2.14: TORCH_CHECK_NOT_IMPLEMENTED).

Truth: the same call on CPU tensors.
"""

import pytest
import torch

CALLS = {
    "bool - bool": lambda b, i: b - b,
    "bool - long": lambda b, i: b - i,
    "long - bool": lambda b, i: i - b,
    "bool - 1": lambda b, i: b - 1,
    "1 - bool": lambda b, i: 1 - b,
    "bool - True": lambda b, i: b - True,
    "rsub": lambda b, i: torch.rsub(b, b),
    "sub_": lambda b, i: b.clone().sub_(b),
    "sub out=": lambda b, i: torch.sub(i, b, out=torch.empty_like(i)),
    "neg": lambda b, i: -b,
    "neg_": lambda b, i: b.clone().neg_(),
    "relu": lambda b, i: torch.relu(b),
    "relu_": lambda b, i: b.clone().relu_(),
}


def _error(call, device):
    b = torch.tensor([True, False], device=device)
    i = torch.tensor([1, 2], device=device)
    with pytest.raises(Exception) as info:
        call(b, i)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_bool_subtraction_and_negation_raise_cpus_error(call):
    expected = _error(call, "cpu")
    assert issubclass(expected[0], RuntimeError)  # both torches' types are RuntimeErrors
    assert _error(call, "mydev") == expected
