"""The inductor patches of ``torch_mydev._patches`` still patch what they claim to.

Each test fails loudly when a torch upgrade moves or changes the patched function: the
attribute exists, the original (kept on the patch) behaves as the patch assumes, and the
inductor code that motivated the patch still asks it.
"""

import inspect
import re
import types

import torch

from torch_mydev import _patches
from torch_mydev.compile import backend


def _node_on(device: str) -> types.SimpleNamespace:
    return types.SimpleNamespace(get_device=lambda: torch.device(device))


def _source_with_own_calls(cls: type, name: str) -> str:
    """The source of ``cls.name`` and of the ``cls`` methods it calls on ``self``: where a
    torch release moved the code asked about into a helper method (torch 2.14:
    ``Loops.has_large_inner_fn`` asks ``is_cpu`` through ``get_realize_opcount_threshold``)."""
    source = inspect.getsource(getattr(cls, name))
    called = sorted(set(re.findall(r"self\.(\w+)\(", source)))
    helpers = [getattr(cls, c, None) for c in called]
    return source + "".join(inspect.getsource(f) for f in helpers if inspect.isfunction(f))


def test_scheduler_is_cpu_patch():
    from torch._inductor import scheduler

    backend.register()
    patched = scheduler.BaseSchedulerNode.is_cpu
    assert patched._mydev_patched
    original = patched._mydev_original
    assert original(_node_on("cpu")) is True
    assert original(_node_on("mydev")) is False  # why the patch exists
    assert patched(_node_on("mydev")) is True
    assert patched(_node_on("meta")) is False
    source = inspect.getsource(scheduler.Scheduler._try_reindex_pointwise_for_reduction)
    assert "is_cpu()" in source


def test_ir_is_cpu_patch():
    from torch._inductor import ir

    backend.register()
    assert ir.is_cpu._mydev_patched
    original = ir.is_cpu._mydev_original
    assert original(torch.device("cpu")) is True
    assert original(torch.device("mydev")) is False
    assert ir.is_cpu(torch.device("mydev")) is True
    assert ir.is_cpu(torch.device("meta")) is False
    assert "is_cpu(" in _source_with_own_calls(ir.Loops, "has_large_inner_fn")


def test_device_to_aten_patch():
    from torch._inductor.codegen import cpp_utils

    backend.register()
    assert cpp_utils.DEVICE_TO_ATEN["cpu"] == "at::kCPU"
    assert cpp_utils.DEVICE_TO_ATEN["mydev"] == "at::kPrivateUse1"


def test_patches_apply_once():
    from torch._inductor import scheduler

    before = scheduler.BaseSchedulerNode.is_cpu
    _patches.apply_inductor()
    assert scheduler.BaseSchedulerNode.is_cpu is before


def test_inductor_still_refuses_unknown_devices_in_the_stock_wrapper():
    """Why `backend.PythonWrapperCodegen` overrides ``_generate_kernel_call_helper``."""
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen

    source = inspect.getsource(PythonWrapperCodegen._generate_kernel_call_helper)
    assert 'nyi")' in source and 'device.type == "cpu"' in source


def test_backend_is_registered_through_the_device_module():
    from torch._inductor.codegen import common

    common.init_backend_registration()
    assert common.get_scheduling_for_device("mydev") is backend.Scheduling
    assert common.get_wrapper_codegen_for_device("mydev") is backend.PythonWrapperCodegen
    wrapper = common.get_wrapper_codegen_for_device("mydev", cpp_wrapper=True)
    assert wrapper is backend.CppWrapperCodegen
    assert torch.mydev.Scheduling is backend.Scheduling
    from torch._dynamo.device_interface import get_interface_for_device

    assert get_interface_for_device("mydev") is backend.MydevInterface


def test_device_interface_guards_the_mydev_device():
    iface = backend.MydevInterface
    before, last = torch.mydev.current_device(), torch.mydev.device_count() - 1
    for spec in (last, f"mydev:{last}", torch.device("mydev", last)):
        with iface.device(spec):
            assert iface.current_device() == last
        assert iface.current_device() == before
    with iface.device(None):
        assert iface.current_device() == before
    assert iface.device_count() == torch.mydev.device_count()
