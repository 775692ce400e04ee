"""A backward through mydev tensors runs on the calling thread, as CPU's does.

Truth: torch CPU, where the autograd engine runs every function of a backward on the
thread that called it. Without ``_patches.patch_backward_on_the_calling_thread`` the engine
would run mydev's functions on its per-device worker thread (as for CUDA), whose OpenMP
team competes with the caller's for the cores.
"""

from __future__ import annotations

import threading

import pytest
import torch


def _threads_of_backward(device: str, run) -> set[int]:
    """The threads the backward functions of ``(x * 3).sum()`` ran on, ``run`` calling the
    backward of the loss."""
    seen: set[int] = set()
    x = torch.randn(4, 3).to(device).requires_grad_()
    y = x * 3
    y.register_hook(lambda grad: seen.add(threading.get_ident()))
    run(y.sum(), x)
    return seen


RUNS = {
    "Tensor.backward": lambda loss, x: loss.backward(),
    "autograd.grad": lambda loss, x: torch.autograd.grad(loss, x),
}


@pytest.mark.parametrize("how", RUNS)
def test_backward_runs_on_the_calling_thread_as_on_cpu(how: str) -> None:
    caller = {threading.get_ident()}
    assert _threads_of_backward("cpu", RUNS[how]) == caller
    assert _threads_of_backward("mydev", RUNS[how]) == caller


def test_the_engine_alone_would_use_its_device_thread() -> None:
    """The patch is what moves it: the original entry runs mydev's backward elsewhere."""
    import torch.autograd as autograd

    original = autograd._engine_run_backward._mydev_original
    caller = threading.get_ident()

    def run(loss: torch.Tensor, x: torch.Tensor) -> None:
        original(
            (loss,), (torch.ones_like(loss),), False, False, (),
            allow_unreachable=True, accumulate_grad=True,
        )  # fmt: skip

    seen = _threads_of_backward("mydev", run)
    assert seen and caller not in seen


def test_gradients_equal_cpu() -> None:
    x = torch.randn(5, 4)  # requires no grad: each device's leaf is its own
    for device in ("cpu", "mydev"):
        leaf = x.detach().to(device).requires_grad_()
        (leaf.sin() * leaf).sum().backward()
        if device == "cpu":
            expected = leaf.grad
        else:
            assert torch.equal(leaf.grad.cpu(), expected)
