"""torch.utils.checkpoint on mydev: the recompute replays the mydev RNG state (dropout masks
equal), so gradients equal the un-checkpointed run and CPU's."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


def _run(device, use_checkpoint, use_reentrant=True, autocast=False):
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8).to(device)
    x = torch.randn(4, 8).to(device).requires_grad_()

    def block(t):
        return F.dropout(torch.tanh(lin(t)), 0.5, training=True) * 3

    torch.manual_seed(1)
    with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
        y = checkpoint(block, x, use_reentrant=use_reentrant) if use_checkpoint else block(x)
    y.float().sum().backward()
    return [t.cpu() for t in (y.detach(), x.grad, lin.weight.grad, lin.bias.grad)]


def test_device_module_is_initialized_for_checkpoint():
    torch.ones(1, device="mydev")
    assert torch.mydev._initialized  # what checkpoint reads before saving the RNG state


@pytest.mark.parametrize("use_reentrant", [True, False], ids=["reentrant", "non-reentrant"])
@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "autocast-bf16"])
def test_checkpoint_dropout_gradients(use_reentrant, autocast):
    plain = _run("mydev", False, autocast=autocast)
    ckpt = _run("mydev", True, use_reentrant, autocast=autocast)
    cpu = _run("cpu", True, use_reentrant, autocast=autocast)
    for p, c, r in zip(plain, ckpt, cpu, strict=True):
        torch.testing.assert_close(c, p, rtol=0, atol=0)
        torch.testing.assert_close(c, r, rtol=0, atol=0)
    # the mask really dropped something: otherwise RNG replay would not be tested
    assert (plain[0] == 0).any() and (plain[0] != 0).any()


def test_checkpoint_without_rng_replay_differs():
    """The control: with preserve_rng_state=False the recompute draws a new mask, so the
    test above can fail."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 64).to("mydev")
    x = torch.randn(16, 64, device="mydev", requires_grad=True)

    def block(t):
        return F.dropout(lin(t), 0.5, training=True)

    grads = []
    for preserve in (True, False):
        x.grad = None
        torch.manual_seed(1)
        y = checkpoint(block, x, use_reentrant=False, preserve_rng_state=preserve)
        y.sum().backward()
        grads.append(x.grad.cpu())
    assert not torch.equal(grads[0], grads[1])
