"""torch.autocast("mydev") against torch.autocast("cpu"): dtypes and values, fp32 ops,
enabled=False, GradScaler; the op lists against the ones torch gives AutocastCPU."""

import copy

import pytest
import torch
import torch.nn.functional as F

from torch_mydev.runtime import autocast


def test_op_lists_are_exactly_cpus():
    """A torch upgrade that changes CPU's autocast lists must fail here."""
    cpu = {
        n.removeprefix("aten::")
        for n in torch._C._dispatch_get_all_op_names()
        if n.startswith("aten::")
        and torch._C._dispatch_has_kernel_for_dispatch_key(n, "AutocastCPU")
    }
    ours = {n.removesuffix(".default") for n in autocast.policies()}
    assert ours == cpu
    for name in ours:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", autocast.KEY)


def test_register_autocast_private_use1_has_no_fallthrough_in_torch():
    """What `register` supplies: torch itself registers no AutocastPrivateUse1 fallback
    (only ours), while it does for AutocastCPU."""
    table = torch._C._dispatch_dump_table("aten::sin")
    cpu = [line for line in table.splitlines() if line.startswith("AutocastCPU:")]
    assert cpu and "fallthrough" in cpu[0]


def test_supported_dtypes():
    assert torch.mydev.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.mydev.is_bf16_supported()
    assert torch.amp.autocast_mode.is_autocast_available("mydev")


def _both(fn, *tensors, dtype=torch.bfloat16):
    with torch.autocast("cpu", dtype=dtype):
        expected = fn(*tensors)
    with torch.autocast("mydev", dtype=dtype):
        got = fn(*[t.to("mydev") for t in tensors])
    return expected, got


def _check(expected, got):
    assert got.device.type == "mydev"
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)


@pytest.mark.parametrize(
    "case",
    [
        (torch.mm, [(5, 7), (7, 3)]),
        (torch.matmul, [(2, 5, 7), (7, 3)]),
        (lambda x, w, b: F.linear(x, w, b), [(4, 6), (3, 6), (3,)]),
        (lambda x, w: F.conv2d(x, w, padding=1), [(2, 3, 6, 6), (4, 3, 3, 3)]),
        (torch.bmm, [(2, 3, 4), (2, 4, 5)]),
        (lambda c, a, b: torch.addmm(c, a, b), [(3, 5), (3, 4), (4, 5)]),
    ],
    ids=["mm", "matmul", "linear", "conv2d", "bmm", "addmm"],
)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_lower_precision_ops_match_cpu(case, dtype):
    fn, shapes = case
    torch.manual_seed(0)
    tensors = [torch.randn(s) for s in shapes]
    expected, got = _both(fn, *tensors, dtype=dtype)
    assert expected.dtype == dtype
    _check(expected, got)


def test_fp32_and_unlisted_ops():
    x = torch.randn(4, 5)
    target = torch.randn(4, 5)

    def fn(x, target):
        low = x @ x.t()  # lower precision
        return low, torch.sin(low), F.l1_loss(x.bfloat16(), target), torch.prod(x.bfloat16())

    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = fn(x, target)
    with torch.autocast("mydev", dtype=torch.bfloat16):
        got = fn(x.to("mydev"), target.to("mydev"))
    assert [g.dtype for g in got] == [e.dtype for e in expected]
    assert [g.dtype for g in got] == [torch.bfloat16, torch.bfloat16, torch.float32, torch.float32]
    for e, g in zip(expected, got, strict=True):
        _check(e, g)


@pytest.mark.skipif(
    not hasattr(torch.ops.aten, "linalg_matrix_sqrth"), reason="an op torch 2.14 added"
)
def test_an_op_torch_added_to_cpus_fp32_list_casts_like_cpu():
    x = (torch.eye(3) * 4 + 0.5).bfloat16()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = torch.ops.aten.linalg_matrix_sqrth(x)
    with torch.autocast("mydev", dtype=torch.bfloat16):
        got = torch.ops.aten.linalg_matrix_sqrth(x.to("mydev"))
    assert expected.dtype == got.dtype == torch.float32
    _check(expected, got)


def test_promote_and_float64():
    a, b = torch.randn(2, 3), torch.randn(2, 3, dtype=torch.float64)
    with torch.autocast("mydev", dtype=torch.bfloat16):
        low = torch.mm(a.to("mydev"), a.t().to("mydev"))
        cat = torch.cat([low, a.to("mydev")[:, :2]])
        mm64 = torch.mm(b.to("mydev"), b.t().to("mydev"))
    assert cat.dtype == torch.float32  # promote: float32 wins over bfloat16
    assert mm64.dtype == torch.float64  # float64 is never cast
    with torch.autocast("cpu", dtype=torch.bfloat16):
        cpu_low = torch.mm(a, a.t())
        assert torch.cat([cpu_low, a[:, :2]]).dtype == cat.dtype


def test_promote_of_two_lower_precision_dtypes_raises_like_cpu():
    a, b = torch.ones(2, dtype=torch.bfloat16), torch.ones(2, dtype=torch.float16)
    for device in ("cpu", "mydev"):
        with (
            pytest.raises(RuntimeError, match="Unexpected floating ScalarType"),
            torch.autocast(device, dtype=torch.bfloat16),
        ):
            torch.cat([a.to(device), b.to(device)])


def test_small_model_forward_backward_matches_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(16, 2)
    )
    x = torch.randn(2, 3, 4, 4)
    dev_model = copy.deepcopy(model).to("mydev")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = model(x)
    with torch.autocast("mydev", dtype=torch.bfloat16):
        got = dev_model(x.to("mydev"))
    _check(expected, got)
    expected.float().sum().backward()
    got.float().sum().backward()
    for p, q in zip(model.parameters(), dev_model.parameters(), strict=True):
        assert q.grad.dtype == p.grad.dtype == torch.float32
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=0, atol=0)


def test_disabled_and_nested():
    a = torch.randn(3, 3, device="mydev")
    with torch.autocast("mydev", enabled=False):
        assert not torch.is_autocast_enabled("mydev")
        assert torch.mm(a, a).dtype == torch.float32
    with torch.autocast("mydev", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("mydev")
        assert torch.get_autocast_dtype("mydev") == torch.bfloat16
        with torch.autocast("mydev", enabled=False):
            assert torch.mm(a, a).dtype == torch.float32
        with torch.autocast("mydev", dtype=torch.float16):
            assert torch.mm(a, a).dtype == torch.float16
        assert torch.mm(a, a).dtype == torch.bfloat16
        # CPU tensors are not cast by mydev's autocast, as CUDA's leaves CPU tensors alone
        assert torch.mm(a.cpu(), a.cpu()).dtype == torch.float32
    assert torch.mm(a, a).dtype == torch.float32


def test_unsupported_dtype_warns_and_disables_like_cuda():
    with pytest.warns(UserWarning, match="not supported"), torch.autocast("mydev", torch.float32):
        assert not torch.is_autocast_enabled("mydev")


def test_grad_scaler_matches_cpu():
    results = {}
    for dev in ("cpu", "mydev"):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(dev, init_scale=16.0)
        x = torch.randn(3, 4).to(dev)
        scales = []
        for factor in (1.0, 1.0, float("inf")):
            with torch.autocast(dev, dtype=torch.bfloat16):
                loss = model(x).float().pow(2).mean() * factor
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            scales.append(scaler.get_scale())
        results[dev] = (model.weight.detach().cpu(), scales)
    assert results["mydev"][1] == results["cpu"][1] == [16.0, 16.0, 8.0]
    torch.testing.assert_close(results["mydev"][0], results["cpu"][0], rtol=0, atol=0)
