"""The fallback's plain calls run in the stub's C++ (csrc_stub/ops/fallback.cpp), the rest in
Python.

Which path served a call is read from the counts each keeps: the C++ path's
(``_C._fallback_counts``) and Python's (``boxed._stats``); ``fallback_stats`` is their sum.
Setting ``TORCH_MYDEV_FALLBACK_WARN=1`` sends every call to Python (it warns), so the two
paths can be compared on the same calls.
"""

from __future__ import annotations

import threading
import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.layout.strategies import storage_elements, views
from tests.support.raises import outcome
from tests.support.tensors import same_bits, same_layout, values
from torch_mydev import _C
from torch_mydev.ops.fallback import boxed as fallback


@pytest.fixture(autouse=True)
def _fresh_counts():
    fallback.reset_fallback_stats()
    yield
    fallback.reset_fallback_stats()


def _python_counts() -> dict[str, int]:
    return dict(fallback._stats)


def test_plain_calls_run_in_cpp_and_are_counted_once():
    x = torch.randn(64, 32).to("mydev")
    torch.sin(x)  # structured, functional: CPU's functional kernel
    x @ x.mT
    x.softmax(-1)
    x.exp_()  # in place: its composite, then exp.out
    assert _C._fallback_counts() == {
        "aten::sin": 1,
        "aten::mm": 1,
        "aten::_softmax": 1,
        "aten::exp.out": 1,
    }
    assert _python_counts() == {}
    assert fallback.fallback_stats() == {
        "aten::_softmax": 1,
        "aten::exp.out": 1,
        "aten::mm": 1,
        "aten::sin": 1,
    }


def test_warning_mode_runs_every_call_in_python(monkeypatch):
    monkeypatch.setenv(fallback.WARN_ENV, "1")
    x = torch.randn(8).to("mydev")
    with pytest.warns(fallback.FallbackWarning, match="aten::sin"):
        torch.sin(x)
    assert _C._fallback_counts() == {}
    assert _python_counts() == {"aten::sin": 1}


def test_calls_that_are_not_plain_run_in_python():
    x = torch.randn(4, 4).to("mydev")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.atan2(x, torch.randn(4, 4))  # a CPU tensor of more than 0 dims
    x.clone().uniform_()  # random: the mydev generator (lent in Python; random.cpp has only
    # native_dropout's plain call)
    y = torch.randn(4, 4)
    cow = y.to("mydev")._lazy_clone()
    torch.exp(x, out=cow)  # a written copy-on-write tensor: materialised in Python first
    assert torch.equal(cow.cpu(), x.cpu().exp())
    assert _C._fallback_counts() == {}
    assert "aten::exp.out" in _python_counts()


def test_an_empty_out_grows_on_the_cpp_path_like_cpu():
    """An empty out= the op must grow: its growable alias moves to new CPU memory, and
    Python's write_back gives the mydev tensor CPU's sizes, strides and values."""
    x = torch.randn(4, 4)
    cases = [
        (lambda t, out: torch.cos(t, out=out), lambda: x),
        (lambda t, out: torch.arange(0, 9, out=out), lambda: torch.empty(0)),
        (lambda t, out: torch.cat([t, t.t()], 1, out=out), lambda: x),
    ]
    for call, make in cases:
        expected = call(make(), torch.empty(0))
        out = torch.empty(0, device="mydev")
        got = call(make().to("mydev"), out)
        assert got is out
        assert out.shape == expected.shape and out.stride() == expected.stride()
        assert torch.equal(out.cpu(), expected)
    assert _python_counts() == {}
    assert set(_C._fallback_counts()) == {
        "aten::cos.out",
        "aten::arange.start_out",
        "aten::cat.out",
    }


def test_a_zero_dim_cpu_input_stays_plain():
    x = torch.randn(5).to("mydev")
    out = torch.atan2(x, torch.tensor(0.5))
    assert torch.equal(out.cpu(), torch.atan2(x.cpu(), torch.tensor(0.5)))
    assert _C._fallback_counts() == {"aten::atan2": 1}


def test_the_copy_path_setting_reaches_cpp():
    x = torch.randn(8).to("mydev")
    fallback.zero_copy = False
    try:
        torch.sin(x)
    finally:
        fallback.zero_copy = True
    assert _C._fallback_counts() == {}
    torch.sin(x)
    assert _C._fallback_counts() == {"aten::sin": 1}


def test_results_are_adopted_and_memory_returns_to_baseline():
    x = torch.randn(256, 256).to("mydev")
    base = torch.mydev.memory_allocated()
    y = x @ x
    assert torch.mydev.memory_allocated() == base + y.numel() * 4
    outs = torch.sort(x, -1)  # two new results in one call
    assert torch.equal(outs.values.cpu(), torch.sort(x.cpu(), -1).values)
    del y, outs
    assert torch.mydev.memory_allocated() == base


def test_lists_in_and_written():
    xs = [torch.randn(3, 4).to("mydev") for _ in range(3)]
    cpu = [x.cpu() for x in xs]
    assert torch.equal(torch.cat(xs).cpu(), torch.cat(cpu))
    found, scale = torch.zeros(1), torch.full((1,), 0.5)
    found_d, scale_d = found.to("mydev"), scale.to("mydev")
    torch._amp_foreach_non_finite_check_and_unscale_(xs, found_d, scale_d)  # writes the list
    torch._amp_foreach_non_finite_check_and_unscale_(cpu, found, scale)
    for x, c in zip(xs, cpu, strict=True):
        assert torch.equal(x.cpu(), c)
    assert torch.equal(found_d.cpu(), found)
    assert _C._fallback_counts() == {
        "aten::cat": 1,
        "aten::_amp_foreach_non_finite_check_and_unscale_": 1,
    }


def test_a_return_that_is_an_input_is_that_tensor():
    x = torch.randn(6).to("mydev")
    out = torch.empty(6, device="mydev")
    result = torch.sin(x, out=out)
    assert result is out
    assert torch.equal(out.cpu(), torch.sin(x.cpu()))


def test_threads_run_plain_calls_at_once():
    """Plain calls hold no Python lock: eight threads run them together (the first calls of
    ops this process has not seen ask Python once each) and each gets CPU's values."""
    ops = [torch.sin, torch.cos, torch.tanh, torch.erf, torch.expm1, torch.log1p]
    x = torch.rand(1000) + 0.1
    dx = x.to("mydev")
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            start.wait()
            for i in range(200):
                op = ops[(k + i) % len(ops)]
                assert torch.equal(op(dx).cpu(), op(x))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sum(_C._fallback_counts().values()) == 8 * 200


OPS = {
    "sin": lambda t: torch.sin(t),
    "exp_": lambda t: t.exp_(),
    "clamp_": lambda t: t.clamp_(min=0.5),
    "sin_out_self": lambda t: torch.sin(t, out=t),
    "cos_out_wrong_shape": lambda t: torch.cos(t, out=t.new_empty(2, 1).t()),
    "max_dim": lambda t: t.max(-1) if t.dim() else t.max(0),
    "cumsum": lambda t: t.cumsum(-1) if t.dim() else t.cumsum(0),
    "cat": lambda t: torch.cat([t.reshape(-1), t.reshape(-1)]),
    "mm": lambda t: t.reshape(t.shape[0], -1) @ t.reshape(t.shape[0], -1).mT if t.dim() else t,
}


def _run(op, base, view):
    sizes, strides, offset = view
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the warning mode's own, and resize warnings
        return outcome(lambda: op(base.as_strided(sizes, strides, offset)))


@given(view=views(max_dims=4), name=st.sampled_from(sorted(OPS)))
def test_cpp_and_python_paths_give_the_same_tensors(view, name):
    base = values(max(storage_elements(*view), 1), torch.float32, seed=3)
    cpp_base, py_base = base.to("mydev"), base.to("mydev")
    cpp, cpp_error = _run(OPS[name], cpp_base, view)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(fallback.WARN_ENV, "1")
        py, py_error = _run(OPS[name], py_base, view)
    assert cpp_error is py_error
    assert same_bits(cpp_base.cpu(), py_base.cpu())
    cpp = cpp if isinstance(cpp, tuple) else (cpp,)
    py = py if isinstance(py, tuple) else (py,)
    for a, b in zip(cpp, py, strict=True):
        if isinstance(a, torch.Tensor):
            assert a.device == b.device
            assert same_layout(a, b)
            assert same_bits(a.cpu(), b.cpu())


@pytest.mark.parametrize(
    ("make", "shape"),
    [
        (lambda: torch.nn.Conv2d(3, 8, 3, padding=1), (2, 3, 8, 8)),
        (lambda: torch.nn.Conv2d(4, 8, 3, groups=2, bias=False), (2, 4, 7, 7)),
        (lambda: torch.nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2), (2, 4, 5, 5)),
        (lambda: torch.nn.Conv1d(4, 4, 2, dilation=2), (2, 4, 9)),
    ],
    ids=["conv", "grouped_no_bias", "transposed_grouped", "conv1d_dilated"],
)
def test_convolutions_run_cpus_convolution_in_cpp(make, shape):
    """``convolution_overrideable`` runs ``aten::convolution`` and its backward
    ``aten::convolution_backward`` with ``bias_sizes`` made as boxed.py makes it."""
    torch.manual_seed(0)
    cpu = make()
    dev = make().to("mydev")
    dev.load_state_dict(cpu.state_dict())
    x = torch.randn(shape, requires_grad=True)
    dx = x.detach().to("mydev").requires_grad_()
    y, dy = cpu(x), dev(dx)
    (y * y).sum().backward()
    (dy * dy).sum().backward()
    assert same_layout(y, dy) and same_bits(y, dy.cpu())
    assert same_bits(x.grad, dx.grad.cpu())
    for p_cpu, p_dev in zip(cpu.parameters(), dev.parameters(), strict=True):
        assert same_bits(p_cpu.grad, p_dev.grad.cpu())
    assert _C._fallback_counts() == {
        "aten::convolution_overrideable": 1,
        "aten::convolution_backward_overrideable": 1,
    }
    assert _python_counts() == {}


def test_index_ops_run_in_cpp_with_mydev_or_cpu_indices(monkeypatch):
    """``index`` and ``index_put_`` (their ``Tensor?[]`` indices, which CUDA also takes on
    CPU: ``fallback.devices.CPU_ALLOWED``) are plain calls with mydev indices or CPU ones of
    any dims; results and errors are CPU's, and the warning path (all Python) agrees."""
    x = torch.randn(6, 5)
    rows = torch.tensor([4, 0, 4, 1])
    mask = x[:, 0] > 0
    values_ = torch.randn(4, 5)
    dx = x.to("mydev")

    def calls(t, index, boolean, source):
        return [
            t[index],
            t[boolean],
            t[:, [1, 3]],
            t.clone().index_put_((index,), source, accumulate=True),
            t.clone().index_put_((boolean,), torch.zeros(())),
        ]

    expected = calls(x, rows, mask, values_)
    for index, boolean in ((rows.to("mydev"), mask.to("mydev")), (rows, mask)):
        fallback.reset_fallback_stats()
        got = calls(dx, index, boolean, values_.to("mydev"))
        assert _python_counts() == {}, (index.device, _python_counts())
        for a, b in zip(got, expected, strict=True):
            assert a.device.type == "mydev" and same_layout(a.cpu(), b)
            assert same_bits(a.cpu(), b)
    with pytest.raises(IndexError, match="out of bounds"):
        dx[torch.tensor([9])]
    with pytest.raises(RuntimeError, match="same device"):
        dx[torch.tensor([0], device="mydev:1")]
    monkeypatch.setenv(fallback.WARN_ENV, "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fallback.FallbackWarning)
        got = calls(dx, rows, mask, values_.to("mydev"))
    for a, b in zip(got, expected, strict=True):
        assert same_bits(a.cpu(), b)
