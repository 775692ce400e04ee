"""``Module.to("mydev")`` keeps Parameter objects and ties, and ``p.data = t`` crosses devices.

Truth: what torch does for two dense backends it calls compatible (CPU and CUDA; c10's
``TensorImpl::has_compatible_shallow_copy_type``). With no GPU here, a CPU-to-CPU
conversion (``.double()``) goes through the same ``Module._apply`` branch as ``.to("cuda")``,
and CPU training gives the values. ``ops/tensor_type.py`` is what makes mydev answer yes.
"""

import pytest
import torch
from torch import nn

import torch_mydev  # noqa: F401


class Tied(nn.Module):
    """A language-model head sharing the embedding's Parameter (GPT-2's ``wte``/``lm_head``),
    with a normalisation layer for buffers."""

    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(10, 4)
        self.norm = nn.BatchNorm1d(4)
        self.lm_head = nn.Linear(4, 10, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm_head(self.norm(self.wte(ids)))


def _model() -> Tied:
    torch.manual_seed(0)
    return Tied()


def _parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    return dict(model.named_parameters(remove_duplicate=False))


def _same_objects(before: dict, after: dict) -> dict[str, bool]:
    return {name: after[name] is before[name] for name in before}


CONVERSIONS = {  # name: (conversion, where the parameters end)
    "to_mydev": (lambda m: m.to("mydev"), "mydev"),
    "to_mydev_and_back": (lambda m: m.to("mydev").to("cpu"), "cpu"),
    "mydev_method": (lambda m: m.mydev(), "mydev"),
}


@pytest.mark.parametrize(("convert", "device"), CONVERSIONS.values(), ids=CONVERSIONS.keys())
def test_parameters_and_ties_are_kept_as_for_a_compatible_backend(convert, device):
    expected_model = _model()
    expected_before = _parameters(expected_model)
    expected_model.double()  # the same _apply branch as .to("cuda")
    model = _model()
    before = _parameters(model)
    moved = convert(model)
    assert moved is model
    assert model.lm_head.weight is model.wte.weight
    assert _same_objects(before, _parameters(model)) == _same_objects(
        expected_before, _parameters(expected_model)
    )
    assert all(_same_objects(before, _parameters(model)).values())
    assert len(list(model.parameters())) == len(list(expected_model.parameters())) == 3
    for p in model.parameters():
        assert p.device.type == device
        assert isinstance(p, nn.Parameter) and p.is_leaf and p.requires_grad


def test_buffers_move_and_are_replaced_as_on_cpu():
    """``_apply`` replaces buffers (``self._buffers[key] = fn(buf)``) for every backend."""
    model = _model()
    mean = model.norm.running_mean
    model.norm.running_mean.add_(1.5)
    model.to("mydev")
    assert model.norm.running_mean is not mean
    assert {b.device.type for b in model.buffers()} == {"mydev"}
    assert torch.equal(model.norm.running_mean.cpu(), mean)
    assert model.norm.num_batches_tracked.dtype == torch.int64
    state = model.state_dict()
    assert state["norm.running_mean"].data_ptr() == model.norm.running_mean.data_ptr()


def test_an_optimizer_built_before_the_move_updates_the_moved_parameters():
    """The optimizer holds the Parameter objects; ``.to`` keeps them, so it steps them."""
    ids = torch.tensor([1, 2, 3, 4, 5, 9])
    expected = _model()
    opt = torch.optim.SGD(expected.parameters(), lr=0.5, momentum=0.9)
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    model.to("mydev")
    for m, o, i in ((expected, opt, ids), (model, optimizer, ids.to("mydev"))):
        for _ in range(2):
            o.zero_grad()
            m(i).square().mean().backward()
            o.step()
    assert optimizer.param_groups[0]["params"][0] is model.wte.weight
    assert model.wte.weight.device.type == "mydev"
    for name, p in _parameters(expected).items():
        torch.testing.assert_close(_parameters(model)[name].cpu(), p, rtol=1e-6, atol=1e-6)
    assert not torch.equal(model.wte.weight.cpu(), _model().wte.weight)  # it did step


def test_gradients_of_the_tied_model_equal_cpu():
    ids = torch.tensor([0, 3, 3, 7, 9, 2])
    expected = _model()
    expected(ids).square().mean().backward()
    model = _model().to("mydev")
    model(ids.to("mydev")).square().mean().backward()
    assert model.lm_head.weight.grad is model.wte.weight.grad
    for name, p in _parameters(expected).items():
        got = _parameters(model)[name].grad
        assert got.device.type == "mydev"
        torch.testing.assert_close(got.cpu(), p.grad, rtol=1e-6, atol=1e-7)


def test_a_gradient_moves_with_its_parameter_in_place():
    """``_apply`` sets ``out_param.grad.data`` too when the types are compatible."""
    model = _model()
    model(torch.tensor([1, 2])).sum().backward()
    grad = model.wte.weight.grad
    values = grad.clone()
    model.to("mydev")
    assert model.wte.weight.grad is grad
    assert grad.device.type == "mydev"
    assert torch.equal(grad.cpu(), values)


@pytest.mark.parametrize(
    ("source", "target"), [("cpu", "mydev"), ("mydev", "cpu"), ("mydev", "mydev")]
)
def test_setting_data_across_devices_works_as_for_cuda(source, target):
    param = nn.Parameter(torch.arange(3.0, device=source))
    new = torch.tensor([7.0, 8.0, 9.0], device=target)
    param.data = new
    assert param.device.type == target
    assert param.data_ptr() == new.data_ptr()
    assert isinstance(param, nn.Parameter) and param.requires_grad
    param.sum().backward()
    assert param.grad.device.type == target


def _on(t: torch.Tensor, device: str) -> torch.Tensor:
    return t if device == "cpu" else t.to(device)


KINDS = {
    "dense": lambda d: _on(torch.ones(2, 2), d),
    "dense_grad": lambda d: _on(torch.ones(2, 2), d).requires_grad_(),
    "double": lambda d: _on(torch.ones(2, 2, dtype=torch.float64), d),
    "sparse_cpu": lambda d: torch.ones(2, 2).to_sparse(),
    "csr_cpu": lambda d: torch.ones(2, 2).to_sparse_csr(),
    "meta": lambda d: torch.ones(2, 2, device="meta"),
}


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("a", KINDS)
@pytest.mark.parametrize("b", KINDS)
def test_the_rule_answers_as_for_cpu(a, b):
    """mydev in place of CPU gives CPU's answer: dense with dense yes, dense with sparse or
    meta no (c10's rule, of which the CUDA answers are the same)."""
    expected = torch._has_compatible_shallow_copy_type(KINDS[a]("cpu"), KINDS[b]("cpu"))
    for left, right in (("mydev", "cpu"), ("cpu", "mydev"), ("mydev", "mydev")):
        got = torch._has_compatible_shallow_copy_type(KINDS[a](left), KINDS[b](right))
        assert got is expected, (left, right)


def test_dense_data_into_a_sparse_parameter_is_refused_as_on_cpu():
    param = nn.Parameter(torch.ones(2, 2).to_sparse())
    for device in ("cpu", "mydev"):
        with pytest.raises(RuntimeError, match="incompatible tensor type"):
            param.data = _on(torch.ones(2, 2), device)


@pytest.mark.parametrize("flag", ["overwrite", "swap"])
def test_future_flags_behave_as_for_a_compatible_backend(flag):
    """``torch.__future__``: overwrite makes new Parameters (ties break, as ``.double()``
    breaks them); swap keeps the objects through ``swap_tensors``."""
    setter = getattr(torch.__future__, f"set_{flag}_module_params_on_conversion")
    getter = getattr(torch.__future__, f"get_{flag}_module_params_on_conversion")
    assert getter() is False
    setter(True)
    try:
        expected_model, model = _model(), _model()
        expected_before, before = _parameters(expected_model), _parameters(model)
        expected_model.double()
        model.to("mydev")
    finally:
        setter(False)
    kept = _same_objects(before, _parameters(model))
    assert kept == _same_objects(expected_before, _parameters(expected_model))
    assert all(kept.values()) is (flag == "swap")
    assert (model.lm_head.weight is model.wte.weight) is (flag == "swap")
    assert {p.device.type for p in model.parameters()} == {"mydev"}


def test_a_sparse_parameter_moves_as_a_new_parameter():
    """The one departure from CUDA: a sparse COO Parameter moved to mydev is a new Parameter.

    ``SparseTensorImpl::shallow_copy_from`` asserts c10's own rule (TensorImpl.h), whose
    sparse backends do not include PrivateUse1, so mydev cannot say yes for sparse tensors
    (``set_data`` would fail that assert); ``_apply`` then makes a new Parameter.
    """
    dense = torch.tensor([[0.0, 1.5], [-2.0, 0.0]])
    module = nn.Module()
    module.w = nn.Parameter(dense.to_sparse())
    before = module.w
    module.to("mydev")
    assert module.w is not before
    assert (module.w.device.type, module.w.layout) == ("mydev", torch.sparse_coo)
    assert isinstance(module.w, nn.Parameter) and module.w.requires_grad
    assert torch.equal(module.w.to_dense().cpu(), dense)
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        module.w.data = torch.zeros(2, 2, device="mydev")
