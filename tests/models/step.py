"""One training step of a model on CPU and on mydev, the way users write it, and what differs.

The step is the one a user writes for any device: the optimizer is built over
``model.parameters()`` *before* ``model.to(device)`` (that works on CUDA because ``.to`` keeps
each Parameter object and swaps its data; tied Parameters stay one object), then forward,
loss, backward and one AdamW step, after ``torch.manual_seed(seed)`` (which seeds mydev's
generator too, so random ops of both steps draw alike where they draw in the same order).
Forward hooks record every module's outputs (values and strides, as they leave the module).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils import _pytree as pytree


@dataclass(frozen=True)
class Case:
    """A model as a library writes it: how to build it, a batch, the loss from its output."""

    name: str
    make_model: Callable[[], nn.Module]  # a CPU model; initialised after torch.manual_seed
    make_batch: Callable[[torch.Generator], dict[str, torch.Tensor]]
    dtype: torch.dtype = torch.float32
    seed: int = 0
    lr: float = 1e-2


@dataclass
class Activation:
    """A module output: a copy of its values, and the strides it had."""

    value: torch.Tensor
    stride: tuple[int, ...]


@dataclass
class Step:
    """What one training step did on one device (tensors stay on that device)."""

    kept: dict[str, bool]  # parameter name -> the same object after .to(device)
    tied: dict[str, str]  # parameter name -> the first name holding the same object
    optimizer_holds_model: bool  # every Parameter the optimizer steps is one of the model's
    activations: dict[str, list[Activation]]  # module name -> its outputs, in call order
    loss: torch.Tensor
    grads: dict[str, torch.Tensor | None]
    state: dict[str, torch.Tensor]  # state_dict after the step: parameters and buffers


def tied_names(named: dict[str, nn.Parameter]) -> dict[str, str]:
    """Each parameter name that shares its object with an earlier name -> that earlier name."""
    first: dict[int, str] = {}
    tied = {}
    for name, p in named.items():
        earlier = first.setdefault(id(p), name)
        if earlier != name:
            tied[name] = earlier
    return tied


def _record(store: dict, name: str, module: nn.Module, args, output) -> None:
    for t in pytree.tree_leaves(output):
        if isinstance(t, torch.Tensor):
            store.setdefault(name, []).append(Activation(t.detach().clone(), t.stride()))


def train_step(model: nn.Module, batch: dict, case: Case, device: str) -> Step:
    """Build AdamW over ``model``, move ``model`` to ``device``, and train it one step."""
    before = dict(model.named_parameters(remove_duplicate=False))
    optimizer = torch.optim.AdamW(model.parameters(), lr=case.lr)
    model.to(device)
    after = dict(model.named_parameters(remove_duplicate=False))
    owned = {id(p) for p in after.values()}
    step_params = [p for group in optimizer.param_groups for p in group["params"]]
    activations: dict[str, list[Activation]] = {}
    hooks = [
        module.register_forward_hook(functools.partial(_record, activations, name))
        for name, module in model.named_modules()
    ]
    batch = {key: value.to(device) for key, value in batch.items()}
    torch.manual_seed(case.seed)
    model.train()
    optimizer.zero_grad()
    try:
        loss = model(**batch)[0]  # the loss first, as Hugging Face's outputs give it
    finally:
        for hook in hooks:
            hook.remove()
    loss.backward()
    grads = {
        name: None if p.grad is None else p.grad.detach() for name, p in model.named_parameters()
    }
    optimizer.step()
    return Step(
        kept={name: after.get(name) is p for name, p in before.items()},
        tied=tied_names(after),
        optimizer_holds_model=all(id(p) in owned for p in step_params),
        activations=activations,
        loss=loss.detach(),
        grads=grads,
        state=model.state_dict(),
    )


def run_both(case: Case) -> tuple[Step, Step]:
    """``train_step`` on CPU and on mydev, from one initial model (deep-copied) and batch."""
    torch.manual_seed(case.seed)
    model = case.make_model().to(case.dtype)
    twin = copy.deepcopy(model)
    batch = case.make_batch(torch.Generator().manual_seed(case.seed))
    batch = {k: v.to(case.dtype) if v.is_floating_point() else v for k, v in batch.items()}
    return train_step(model, batch, case, "cpu"), train_step(twin, batch, case, "mydev")


def build_on_both(case: Case) -> tuple[nn.Module, nn.Module]:
    """``case``'s model built on CPU, and built under ``torch.device("mydev")`` (factories
    and initialisers run on mydev), each after ``torch.manual_seed(case.seed)``."""
    torch.manual_seed(case.seed)
    cpu = case.make_model().to(case.dtype)
    torch.manual_seed(case.seed)
    with torch.device("mydev"):
        dev = case.make_model().to(case.dtype)
    return cpu, dev


def module_differences(cpu: nn.Module, dev: nn.Module) -> list[str]:
    """Every parameter and buffer (non-persistent ones too) of ``dev`` against ``cpu``'s,
    and the ties between parameters."""
    problems = []
    for named in ("named_parameters", "named_buffers"):
        c = dict(getattr(cpu, named)(remove_duplicate=False))
        d = dict(getattr(dev, named)(remove_duplicate=False))
        problems += _keys(named, c, d)
        problems += [_compare(name, c[name], d[name]) for name in c.keys() & d.keys()]
    cpu_ties = tied_names(dict(cpu.named_parameters(remove_duplicate=False)))
    dev_ties = tied_names(dict(dev.named_parameters(remove_duplicate=False)))
    if cpu_ties != dev_ties:
        problems.append(f"tied parameters {dev_ties} != CPU's {cpu_ties}")
    return [p for p in problems if p]


def _compare(name: str, cpu: torch.Tensor | None, dev: torch.Tensor | None) -> str | None:
    """Why ``dev`` (mydev) is not ``cpu``: device, shape, dtype, strides, values within
    ``torch.testing.assert_close``'s tolerance for the dtype; None when it is."""
    if cpu is None or dev is None:
        return None if cpu is dev else f"{name}: {dev!r:.60} on mydev, {cpu!r:.60} on CPU"
    if dev.device.type != "mydev":
        return f"{name}: on {dev.device}, not mydev"
    return _compare_values(name, cpu, dev, dev.stride())


def _compare_values(name: str, cpu: torch.Tensor, dev: torch.Tensor, stride) -> str | None:
    if (dev.shape, dev.dtype) != (cpu.shape, cpu.dtype):
        return f"{name}: {dev.dtype}{list(dev.shape)} != CPU's {cpu.dtype}{list(cpu.shape)}"
    if stride != cpu.stride():
        return f"{name}: strides {stride} != CPU's {cpu.stride()}"
    try:
        torch.testing.assert_close(dev.cpu(), cpu)
    except AssertionError as error:
        return f"{name}: {error}"
    return None


def _keys(what: str, cpu: dict, dev: dict) -> list[str]:
    if cpu.keys() == dev.keys():
        return []
    return [f"{what}: mydev has {sorted(dev.keys() ^ cpu.keys())} where CPU has not, or not"]


def identity_differences(cpu: Step, dev: Step) -> list[str]:
    """Parameters ``.to`` replaced, ties that differ from CPU's, an optimizer left holding
    Parameters the model no longer has."""
    problems = []
    replaced = [name for name, kept in dev.kept.items() if not kept]
    if replaced:
        problems.append(f".to('mydev') replaced the Parameter objects of {replaced}")
    if dev.tied != cpu.tied:
        problems.append(f"tied parameters {dev.tied} != CPU's {cpu.tied}")
    if not dev.optimizer_holds_model:
        problems.append("the optimizer built before .to holds Parameters the model lost")
    return problems


def activation_differences(cpu: Step, dev: Step) -> list[str]:
    """Every module output of mydev's forward against CPU's (values, strides)."""
    problems = _keys("modules called", cpu.activations, dev.activations)
    for name, outputs in cpu.activations.items():
        others = dev.activations.get(name, [])
        if len(others) != len(outputs):
            problems.append(f"{name or 'model'}: {len(others)} outputs, CPU {len(outputs)}")
            continue
        for i, (c, d) in enumerate(zip(outputs, others, strict=True)):
            label = f"output {i} of {name or 'model'}"
            problems.append(_compare_values(label, c.value, d.value, d.stride))
    return [p for p in problems if p]


def gradient_differences(cpu: Step, dev: Step) -> list[str]:
    """The loss and every parameter's gradient (by name) against CPU's."""
    problems = [_compare("loss", cpu.loss, dev.loss), *_keys("parameters", cpu.grads, dev.grads)]
    for name in cpu.grads.keys() & dev.grads.keys():
        problems.append(_compare(f"grad {name}", cpu.grads[name], dev.grads[name]))
    return [p for p in problems if p]


def state_differences(cpu: Step, dev: Step) -> list[str]:
    """Every parameter after the optimizer step and every buffer, against CPU's."""
    problems = _keys("state_dict", cpu.state, dev.state)
    for name in cpu.state.keys() & dev.state.keys():
        problems.append(_compare(name, cpu.state[name], dev.state[name]))
    return [p for p in problems if p]


class StepComparisons:
    """One step on mydev against CPU's, four ways; a test module subclasses this as
    ``Test...`` and defines the ``steps`` fixture, ``(case, cpu_step, mydev_step)``."""

    def test_to_keeps_parameters_and_their_ties(self, steps: tuple) -> None:
        _, cpu, mydev = steps
        problems = identity_differences(cpu, mydev)
        assert not problems, "\n".join(problems)

    def test_forward_matches_cpu(self, steps: tuple) -> None:
        _, cpu, mydev = steps
        problems = activation_differences(cpu, mydev)
        assert not problems, "\n".join(problems)

    def test_loss_and_gradients_match_cpu(self, steps: tuple) -> None:
        _, cpu, mydev = steps
        problems = gradient_differences(cpu, mydev)
        assert not problems, "\n".join(problems)

    def test_optimizer_step_and_buffers_match_cpu(self, steps: tuple) -> None:
        _, cpu, mydev = steps
        problems = state_differences(cpu, mydev)
        assert not problems, "\n".join(problems)
