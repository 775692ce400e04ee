"""Random ops in the CPU fallback: each generator's stream depends only on its own calls.

Truth: a single-threaded run with the same seeds. The fallback lends a mydev generator's
state to a CPU generator argument and never touches CPU's default generator
(torch_mydev/ops/fallback/random.py).
"""

from __future__ import annotations

import threading

import pytest
import torch

import torch_mydev
from torch_mydev.ops.fallback import boxed as fallback

DRAWS = 20


def _explicit(seed: int) -> list[torch.Tensor]:
    g = torch.Generator(device="mydev").manual_seed(seed)
    out = []
    for _ in range(DRAWS):
        out.append(torch.randn(8, generator=g, device="mydev").cpu())
        out.append(torch.empty(5, device="mydev").uniform_(generator=g).cpu())
    return out


def _mydev_default() -> list[torch.Tensor]:
    return [torch.randn(8, device="mydev").cpu() for _ in range(DRAWS)]


def _cpu_default() -> list[torch.Tensor]:
    return [torch.randn(8) for _ in range(DRAWS)]


@pytest.mark.parametrize("zero_copy", [True, False], ids=["zero_copy", "copy"])
def test_eight_threads_draw_what_one_thread_draws(zero_copy, monkeypatch):
    monkeypatch.setattr(fallback, "zero_copy", zero_copy)
    seeds = [101 + i for i in range(6)]
    torch.manual_seed(7)  # CPU and mydev default generators
    expected = {"cpu": _cpu_default(), "mydev": _mydev_default()}
    for seed in seeds:
        expected[seed] = _explicit(seed)

    torch.manual_seed(7)
    results: dict = {}
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def run(key, fn):
        try:
            barrier.wait()
            results[key] = fn()
        except BaseException as error:  # reported below, with its thread's key
            errors.append(error)

    jobs = [("cpu", _cpu_default), ("mydev", _mydev_default)]
    jobs += [(seed, lambda s=seed: _explicit(s)) for seed in seeds]
    threads = [threading.Thread(target=run, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for key, values in expected.items():
        for a, b in zip(values, results[key], strict=True):
            assert torch.equal(a, b), key


def test_explicit_generator_leaves_default_streams_alone():
    torch.manual_seed(3)
    reference_mydev = torch.randn(4, device="mydev").cpu()
    reference_cpu = torch.randn(4)
    torch.manual_seed(3)
    g = torch.Generator(device="mydev").manual_seed(9)
    torch.randn(100, generator=g, device="mydev")
    torch.randperm(10, generator=g, device="mydev")
    assert torch.equal(torch.randn(4, device="mydev").cpu(), reference_mydev)
    assert torch.equal(torch.randn(4), reference_cpu)


def test_random_op_without_generator_argument_uses_mydev_default():
    torch.manual_seed(5)
    cpu_first = torch.randn(3)
    torch.manual_seed(5)
    expected = [torch.randperm(9), torch.randint(0, 5, (6,)), torch.rand(3)]
    torch.manual_seed(5)
    result = [
        torch.randperm(9, device="mydev"),
        torch.randint(0, 5, (6,), device="mydev"),
        torch.rand(3, device="mydev"),
    ]
    for a, b in zip(expected, result, strict=True):
        assert b.device.type == "mydev" and torch.equal(a, b.cpu())
    assert torch.equal(torch.randn(3), cpu_first)  # CPU's default generator did not move


def test_native_dropout_draws_like_cpu():
    x = torch.randn(50)
    torch.manual_seed(2)
    out, mask = torch.native_dropout(x, 0.3, True)
    torch.manual_seed(2)
    dev_out, dev_mask = torch.native_dropout(x.to("mydev"), 0.3, True)
    assert torch.equal(out, dev_out.cpu()) and torch.equal(mask, dev_mask.cpu())
    assert dev_mask.dtype == mask.dtype == torch.bool
    assert "aten::native_dropout" in torch_mydev.fallback_stats()


def test_a_random_ops_new_results_are_adopted_not_copied(monkeypatch):
    """native_dropout's output and mask are new CPU tensors of its special form: they
    become mydev memory without a copy (``_C._adopt``), as a plain op's results do."""
    from torch_mydev.ops.fallback import copy as fallback_copy

    def refuse(*args, **kwargs):
        raise AssertionError("a random op's new result was copied to mydev")

    x = torch.randn(50)
    torch.manual_seed(3)
    out, mask = torch.native_dropout(x, 0.3, True)
    monkeypatch.setattr(fallback_copy, "to_mydev", refuse)
    torch.manual_seed(3)
    dev_out, dev_mask = torch.native_dropout(x.to("mydev"), 0.3, True)
    assert dev_out.device.type == dev_mask.device.type == "mydev"
    assert torch.equal(out, dev_out.cpu()) and torch.equal(mask, dev_mask.cpu())


def test_cpu_generator_for_a_mydev_op_is_refused():
    with pytest.raises(RuntimeError, match="Expected a 'mydev' device type for generator"):
        torch.randn(3, generator=torch.Generator(), device="mydev")


def test_a_seeded_op_without_a_generator_argument_runs_as_on_cpu():
    """``_scaled_dot_product_flash_attention_for_cpu`` is tagged nondeterministic_seeded but
    takes no generator and has no overload with one: the fallback runs it as CPU runs it (it
    used to fail binding a lent generator). (``_fused_sdp_choice``, the earlier example, now
    has a mydev kernel: docs/fallback.md.)"""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g) for _ in range(3))
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    torch_mydev.reset_fallback_stats()
    out, lse = op(q.to("mydev"), k.to("mydev"), v.to("mydev"))
    expected_out, expected_lse = op(q, k, v)
    assert torch.equal(out.cpu(), expected_out) and torch.equal(lse.cpu(), expected_lse)
    assert "aten::_scaled_dot_product_flash_attention_for_cpu" in torch_mydev.fallback_stats()


def _dropout_layouts() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(CPU input, mydev input) pairs, each view made on its own device (``.to()`` of a
    view that is not dense would give a contiguous copy)."""
    base = torch.randn(6, 10) * 7
    views = (
        lambda t: t,
        lambda t: t.t(),
        lambda t: t[1:, ::3],
        lambda t: t.half(),  # CPU scales in float16: 1 / 0.6 rounds first
        lambda t: t.bfloat16().t(),
        lambda t: t.double()[:, 2:],
    )
    return [(view(base), view(base.to("mydev"))) for view in views]


def test_native_dropout_runs_in_the_stub_and_draws_like_cpu(monkeypatch):
    """A plain native_dropout (csrc_stub/ops/random.cpp) never enters the Python fallback; it
    draws CPU's mask from the mydev generator, counts as a fallback call, and its results
    are mydev memory laid out as CPU's (the mask as the input). Inputs sliced, transposed
    and float16 included."""
    from torch_mydev.ops.fallback import random as fallback_random

    def refuse(*args, **kwargs):
        raise AssertionError("the Python fallback ran a plain native_dropout")

    monkeypatch.setitem(fallback_random.SPECIAL, "aten::native_dropout", refuse)
    for x, mine in _dropout_layouts():
        assert mine.stride() == x.stride()
        torch.manual_seed(11)
        out, mask = torch.native_dropout(x, 0.4, True)
        torch.manual_seed(11)
        before = torch_mydev.fallback_stats().get("aten::native_dropout", 0)
        dev_out, dev_mask = torch.native_dropout(mine, 0.4, None)
        assert torch_mydev.fallback_stats()["aten::native_dropout"] == before + 1
        assert dev_out.device.type == dev_mask.device.type == "mydev"
        assert dev_out.stride() == out.stride() and dev_mask.stride() == mask.stride()
        assert torch.equal(out, dev_out.cpu()) and torch.equal(mask, dev_mask.cpu())


def test_native_dropout_in_python_draws_like_cpu(monkeypatch):
    """The Python fallback's native_dropout (the copying path) gives the same layouts and
    draws."""
    monkeypatch.setattr(fallback, "zero_copy", False)
    for x, mine in _dropout_layouts():
        torch.manual_seed(12)
        out, mask = torch.native_dropout(x, 0.4, True)
        torch.manual_seed(12)
        dev_out, dev_mask = torch.native_dropout(mine, 0.4, True)
        assert dev_out.stride() == out.stride() and dev_mask.stride() == mask.stride()
        assert torch.equal(out, dev_out.cpu()) and torch.equal(mask, dev_mask.cpu())


def test_native_dropout_steps_aside_outside_training_and_for_lazy_bits():
    """Not training, or a lazy negation: the Python fallback answers, as CPU does."""
    x = torch.randn(5, 4)
    out, mask = torch.native_dropout(x.to("mydev"), 0.5, False)
    assert torch.equal(out.cpu(), x) and bool(mask.cpu().all())
    torch.manual_seed(4)
    expected, expected_mask = torch.native_dropout(-x, 0.5, True)
    torch.manual_seed(4)
    got, got_mask = torch.native_dropout(x.to("mydev")._neg_view(), 0.5, True)
    assert torch.equal(got.cpu(), expected) and torch.equal(got_mask.cpu(), expected_mask)


def test_the_stubs_lend_and_pythons_exclude_each_other():
    """Eight threads released together, half running the stub's native_dropout and half a
    random op lent in Python, on one generator: its final state is a sequential run's (a
    lend that read the state another lend had not yet given back would repeat numbers and
    end elsewhere), whatever the order."""
    x = torch.randn(64).to("mydev")

    def stub_lend():
        torch.native_dropout(x, 0.5, True)

    def python_lend():
        torch.empty(16, device="mydev").uniform_()

    jobs = [stub_lend, python_lend] * 4
    rounds = 20
    torch.manual_seed(21)
    for _ in range(rounds):
        for job in jobs:
            job()
    expected = torch_mydev._C._default_generator(0).get_state()

    torch.manual_seed(21)
    barrier = threading.Barrier(len(jobs))
    errors: list[BaseException] = []

    def run(job):
        try:
            for _ in range(rounds):
                barrier.wait()
                job()
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert torch.equal(torch_mydev._C._default_generator(0).get_state(), expected)
