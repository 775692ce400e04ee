"""``torch.compile`` (inductor) on mydev tensors against ``torch.compile`` on CPU tensors.

Truth: the same function compiled for CPU tensors of the same values and layouts. Outputs
must be mydev tensors with CPU's sizes and strides and, where the generated code is the
same, bit-equal values; no op of a compiled graph may go through the CPU fallback
(``torch_mydev.fallback_stats()`` unchanged), except the fallback kernels named in
docs/compile.md (``sort``).
"""

from __future__ import annotations

import torch

import torch_mydev
from tests.support.subprocess_run import run_python


def compile_both(fn, *cpu_args, device="mydev", **options):
    """``(mydev result, CPU result, fallback counts of the mydev call)``."""
    dev_args = [a.to(device) if isinstance(a, torch.Tensor) else a for a in cpu_args]
    torch_mydev.reset_fallback_stats()
    mine = torch.compile(fn, **options)(*dev_args)
    stats = dict(torch_mydev.fallback_stats())
    theirs = torch.compile(fn, **options)(*cpu_args)
    return mine, theirs, stats


def assert_same(mine: torch.Tensor, theirs: torch.Tensor) -> None:
    assert mine.device.type == "mydev"
    assert mine.shape == theirs.shape
    assert mine.stride() == theirs.stride()
    assert mine.dtype == theirs.dtype
    assert torch.equal(mine.cpu(), theirs), (mine.cpu() - theirs).abs().max()


def test_fused_pointwise_chain_with_reduction():
    a, b = torch.randn(64, 32), torch.randn(64, 32)
    mine, theirs, stats = compile_both(lambda x, y: (x * 2 + y).relu().sum(1), a, b)
    assert_same(mine, theirs)
    assert stats == {}


def test_channels_last_input_keeps_cpu_strides():
    a = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    b = torch.randn(2, 3, 4, 5)
    mine, theirs, stats = compile_both(lambda x, y: (x * y).sigmoid() - y, a, b)
    assert theirs.stride() == (60, 1, 15, 3)
    assert_same(mine, theirs)
    assert stats == {}


def test_backward_gradients_equal_compiled_cpu():
    def loss(x, y):
        return ((x * 2 + y).relu().sum(1) ** 2).sum()

    a, b = torch.randn(8, 4), torch.randn(8, 4)
    grads = []
    for device in ("mydev", "cpu"):
        x = a.to(device).requires_grad_()
        y = b.to(device).requires_grad_()
        torch_mydev.reset_fallback_stats()
        torch.compile(loss)(x, y).backward()
        if device == "mydev":
            assert torch_mydev.fallback_stats() == {}
        grads.append((x.grad, y.grad))
    for mine, theirs in zip(grads[0], grads[1], strict=True):
        assert_same(mine, theirs)


def test_sgd_training_steps_equal_compiled_cpu():
    """Two SGD steps of a tiny MLP: forward, backward (mm/addmm extern calls) and the step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    data, target = torch.randn(5, 6), torch.randn(5, 3)
    results = []
    for device in ("mydev", "cpu"):
        net = __import__("copy").deepcopy(model).to(device)
        opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        x, t = data.to(device), target.to(device)

        @torch.compile
        def step(x, t, net=net, opt=opt):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(net(x), t)
            loss.backward()
            opt.step()
            return loss

        torch_mydev.reset_fallback_stats()
        losses = [step(x, t) for _ in range(2)]
        if device == "mydev":
            assert torch_mydev.fallback_stats() == {}
        results.append((losses, [p.detach() for p in net.parameters()]))
        del step, opt, net
    (my_losses, my_params), (cpu_losses, cpu_params) = results
    for mine, theirs in zip(my_losses + my_params, cpu_losses + cpu_params, strict=True):
        assert_same(mine, theirs)


def test_extern_calls_mm_on_aliases_sort_through_the_fallback():
    """``mm``/``addmm`` (extern ``out=`` calls) run the CPU op on aliases of the mydev buffers:
    never counted by the fallback. ``aten.sort.stable`` is a FallbackKernel (inductor calls
    the op, which allocates its outputs): on mydev it reaches the CPU fallback, counted."""
    a, b, c = torch.randn(16, 8), torch.randn(8, 4), torch.randn(4)

    def fn(x, y, z):
        return (x @ y).relu() + torch.addmm(z, x, y).sin(), torch.sort(x * 2, dim=1)[0] + 1

    last = torch.mydev.device_count() - 1  # outputs on the inputs' device, not the current one
    mine, theirs, stats = compile_both(fn, a, b, c, device=f"mydev:{last}")
    for m, t in zip(mine, theirs, strict=True):
        assert_same(m, t)
        assert m.device.index == last
    assert set(stats) == {"aten::sort.stable"}


def test_gpu_variants_division_by_a_constant_and_var_mean():
    """Two lowerings take their non-CPU branch on mydev (docs/compile.md):

    - ``x / c`` becomes ``x * (1 / c)`` off CPU (``lowering.py``, ``div``,
      ``a.get_device().type != "cpu"``): mydev equals eager ``x * (1 / c)`` and differs
      from compiled CPU by at most an ulp;
    - ``var_mean``: within float32 rounding of compiled CPU.
    """
    a = torch.randn(10, 100, generator=torch.Generator().manual_seed(0))
    mine, theirs, stats = compile_both(lambda x: (x / 3.0, *torch.var_mean(x, dim=1)), a)
    assert stats == {}
    for m, t in zip(mine, theirs, strict=True):
        assert m.device.type == "mydev" and m.stride() == t.stride()
    assert torch.equal(mine[0].cpu(), a * (1 / 3.0))
    torch.testing.assert_close(mine[0].cpu(), theirs[0], rtol=1.2e-7, atol=0)
    assert not torch.equal(mine[0].cpu(), theirs[0])  # the documented difference
    for m, t in zip(mine[1:], theirs[1:], strict=True):
        torch.testing.assert_close(m.cpu(), t, rtol=2e-6, atol=1e-7)


def test_cpp_wrapper_mode():
    """The C++ wrapper; ``mm`` runs through ``aoti_torch_cpu_mm_out`` on the mydev buffers."""
    a, b = torch.randn(16, 8), torch.randn(16, 8)
    last = torch.mydev.device_count() - 1
    with torch._inductor.config.patch(cpp_wrapper=True):
        mine, theirs, stats = compile_both(
            lambda x, y: ((x * 2 + y).relu().sum(1), x @ y.t()), a, b, device=f"mydev:{last}"
        )
    for m, t in zip(mine, theirs, strict=True):
        assert_same(m, t)
        assert m.device.index == last
    assert stats == {}


def test_dynamic_shapes_one_graph_for_all_sizes():
    fn = torch.compile(lambda x, y: (x * 2 + y).relu().sum(1), dynamic=True)
    torch._dynamo.utils.counters.clear()
    torch_mydev.reset_fallback_stats()
    for n in (5, 7, 9):
        a, b = torch.randn(n, 8), torch.randn(n, 8)
        mine = fn(a.to("mydev"), b.to("mydev"))
        assert mine.device.type == "mydev" and mine.shape == (n,)
        assert torch.equal(mine.cpu(), fn(a, b))
    assert torch_mydev.fallback_stats() == {}
    frames = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    assert frames == 2  # one graph for mydev, one for CPU: sizes are symbolic


def test_import_does_not_load_dynamo_or_inductor():
    """Importing torch_mydev stays cheap: the backend waits for inductor's first use."""
    code = (
        "import sys, torch, torch_mydev; "
        "print(sorted(m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules))"
    )
    done = run_python(code)
    assert done.stdout.strip() == "[]"


def test_other_backends_do_not_trace_mydev_kernels():
    """``aot_eager`` never loads the inductor backend; eager mydev ops inside the compiled
    function (backward, the optimizer step after a graph break) must still run untraced:
    dynamo skips torch_mydev's files from the moment it loads (``dynamo_skip``)."""
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 3)
    x = torch.randn(5, 4)
    params = []
    for device in ("mydev", "cpu"):
        model = __import__("copy").deepcopy(net).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)

        @torch.compile(backend="aot_eager")
        def step(x, model=model, opt=opt):
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()

        step(x.to(device))
        params.append([p.detach() for p in model.parameters()])
        del step, opt, model
    for mine, theirs in zip(*params, strict=True):
        assert_same(mine, theirs)
