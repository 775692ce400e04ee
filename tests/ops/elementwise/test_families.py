"""The op-family table: one source for the registered overloads, the ops' iterator configs and
``explain``. The truth for each overload is torch's own schema registry."""

import pytest
import torch

import torch_mydev
from torch_mydev.ops.elementwise import families
from torch_mydev.ops.registry import KERNELS
from torch_mydev_rules.iterator.families import FAMILIES, family_of, iterator_config


def test_every_overload_is_a_real_aten_overload_with_our_kernel():
    table = families.overload_kernels()
    assert table.items() <= KERNELS.items()
    for name in table:
        op, _, overload = name.partition(".")
        packet = getattr(torch.ops.aten, op)
        assert (overload or "default") in packet.overloads(), name
        key = torch._C.DispatchKey.PrivateUse1
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", key), name


def test_every_native_op_belongs_to_its_family():
    for op in families.NATIVE_OPS:
        assert op.name in FAMILIES[op.family].names, op.name
        assert family_of(op.name) is op.iterator_family


@pytest.mark.parametrize(
    ("name", "kwargs", "expected"),
    [
        ("add", {}, "binary_op_config"),
        ("div", {}, "binary_float_op_config"),
        ("div", {"rounding_mode": "floor"}, "binary_op_config"),
        ("eq", {}, "comparison_op_config"),
        ("eq", {"out_dtype": torch.float32}, "comparison_op_config"),
        ("neg", {}, "unary_op_config"),
        ("sqrt", {}, "unary_float_op_config"),
    ],
)
def test_explain_plans_with_the_config_the_device_uses(name, kwargs, expected):
    from torch_mydev_rules.iterator import operands

    config = iterator_config(name, **kwargs)
    builder = getattr(operands, expected)
    if expected == "comparison_op_config":
        want = builder(kwargs.get("out_dtype"))
    elif expected == "unary_op_config":
        want = builder()
    else:
        want = builder(default_dtype=torch.float32)
    assert config == want


def test_explain_and_device_agree_on_every_native_binary_op():
    a = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    b = torch.randn(3, 4, 5)
    for op in families.NATIVE_OPS:
        if op.family not in ("binary", "division", "floor_divide", "comparison"):
            continue
        fn = getattr(torch, op.name)
        report = torch_mydev.explain(fn, a, b)
        result = fn(a.to("mydev"), b.to("mydev"))
        assert result.stride() == report.output_strides, op.name
        assert result.dtype == report.dtype, op.name
