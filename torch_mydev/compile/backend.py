"""The inductor backend of mydev: CPU C++ scheduling, wrappers that call kernels as for CPU.

Importing this module imports inductor; `torch_mydev.compile` imports it only when inductor
asks for the backend. `register` puts in place what inductor looks up per device type:
the device interface (``torch._dynamo.device_interface``), the device op overrides and the
scheduling/wrapper classes (``torch._inductor.codegen.common``), and the scheduler patches
of `torch_mydev._patches`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._dynamo import device_interface
from torch._inductor.codegen.common import (
    register_backend_for_device,
    register_device_op_overrides,
)
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.codegen.cpu_device_op_overrides import CpuDeviceOpOverrides
from torch._inductor.codegen.wrapper import ExternKernelMultiOutLine, SubgraphPythonWrapperCodegen
from torch._inductor.codegen.wrapper import PythonWrapperCodegen as _PythonWrapper
from torch._inductor.codegen.wrapper_fxir import WrapperFxCodegen

from torch_mydev import _patches
from torch_mydev._names import DEVICE
from torch_mydev.compile import interface
from torch_mydev.compile.interface import MydevInterface

#: Kernels are the C++/OpenMP kernels inductor generates for CPU.
Scheduling = CppScheduling


class PythonWrapperCodegen(_PythonWrapper):
    """Inductor's Python wrapper; kernels of a mydev graph are called as CPU kernels are, and
    extern ``out=`` calls (``mm``, ``addmm``, ...) run the CPU op on aliases of the mydev
    buffers (`torch_mydev.compile.extern.run_out`): no copy and no trip through the fallback.

    Mirrors ``PythonWrapperCodegen._generate_kernel_call_helper``, which raises
    ``device mydev nyi`` for any non-Triton kernel off cpu/mps/cuda/xpu.
    """

    @staticmethod
    def create(
        is_subgraph: bool,
        subgraph_name: str | None,
        parent_wrapper: _PythonWrapper | None,
        partition_signatures: Any = None,
    ) -> _PythonWrapper:
        if is_subgraph:
            return SubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return PythonWrapperCodegen()

    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline(
            "from torch_mydev.compile.extern import run_multi_out as mydev_run_multi_out"
        )
        self.imports.writeline("from torch_mydev.compile.extern import run_out as mydev_run_out")

    def _generate_kernel_call_helper(
        self, kernel_name: str, call_args, *, device=None, triton=True, **kwargs
    ):
        if not triton and device is not None and device.type == DEVICE:
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))
            return
        super()._generate_kernel_call_helper(
            kernel_name, call_args, device=device, triton=triton, **kwargs
        )

    def _generate_extern_kernel_out_helper(
        self,
        kernel: str,
        out: str,
        out_view: str | None,
        args: list[str],
        device: str,
        stack_traces=None,
    ) -> None:
        if str(device).split(":")[0] != DEVICE:
            super()._generate_extern_kernel_out_helper(
                kernel, out, out_view, args, device, stack_traces
            )
            return
        args = [kernel, *args, f"out={out_view if out_view else out}"]
        self.writeline(f"mydev_run_out({', '.join(args)})")

    def make_allocation(self, name, device, dtype, shape, stride, *args: Any, **kwargs: Any):
        # Inductor names only the device type off cpu/cuda/xpu/mtia and relies on a device
        # guard (GPUs only) for the index: mydev:1 buffers would land on the current device.
        line = super().make_allocation(name, device, dtype, shape, stride, *args, **kwargs)
        if device.type == DEVICE and device.index is not None:
            line = line.replace(f"device='{DEVICE}'", f"device='{device}'", 1)
        return line

    def generate_extern_kernel_multi_out(self, node: Any) -> None:
        device = node.get_device()
        if device is None or device.type != DEVICE:
            super().generate_extern_kernel_multi_out(node)
            return
        for out_node in node.out_variant_output_nodes:
            self.codegen_allocation(out_node)
        self.writeline(_MultiOutLine(self, node))
        for out_node in node.out_variant_output_nodes:
            if isinstance(out_node.layout, torch._inductor.ir.Layout):
                out_node.codegen_size_asserts(self)


class _MultiOutLine(ExternKernelMultiOutLine):
    """``ExternKernelMultiOutLine.codegen`` (``buf = kernel(x, values=b0, indices=b1)``) with
    the call made by `torch_mydev.compile.extern.run_multi_out`."""

    def codegen(self, code: Any) -> None:
        node = self.node
        names = tuple(node.out_arg_names)
        args = [f"{names!r}", node.get_kernel_name(), *node.codegen_args()]
        args += node.codegen_kwargs()
        for out_name, out_node in zip(names, node.out_variant_output_nodes, strict=True):
            args.append(f"{out_name}={out_node.get_name()}")
        code.writeline(f"{node.get_name()} = mydev_run_multi_out({', '.join(args)})")


class CppWrapperCodegen(CppWrapperCpu):
    """Inductor's C++ wrapper for CPU (``cpp_wrapper=True``), made for mydev graphs."""

    @staticmethod
    def create(*args: Any, **kwargs: Any) -> CppWrapperCpu:
        """A new wrapper; inductor's factory arguments (``is_subgraph``, ...) change nothing
        here, as in ``CppWrapperCpu.create``."""
        return CppWrapperCodegen()

    @staticmethod
    def get_c_shim_func_name(kernel: str, device: str) -> str:
        # ``aoti_torch_cpu_<op>`` runs the CPU kernel (``at::cpu::<op>``, no dispatch) on the
        # mydev tensors' host memory: their outputs were allocated on mydev by the wrapper.
        return CppWrapperCpu.get_c_shim_func_name(kernel, "cpu" if device == DEVICE else device)

    @staticmethod
    def get_device_include_path_jit(device: str) -> str:
        return CppWrapperCpu.get_device_include_path_jit("cpu" if device == DEVICE else device)

    @staticmethod
    def get_device_include_path_aot(device: str) -> str:
        return CppWrapperCpu.get_device_include_path_aot("cpu" if device == DEVICE else device)


__all__ = [
    "CppWrapperCodegen",
    "MydevInterface",
    "PythonWrapperCodegen",
    "Scheduling",
    "WrapperFxCodegen",
    "register",
]

_registered = False


def register() -> None:
    """Register the mydev backend with dynamo and inductor, and apply the patches (once)."""
    global _registered
    if _registered:
        return
    _registered = True
    interface.register(device_interface)
    register_device_op_overrides(DEVICE, CpuDeviceOpOverrides())
    register_backend_for_device(
        DEVICE, Scheduling, PythonWrapperCodegen, CppWrapperCodegen, WrapperFxCodegen
    )
    _patches.apply_inductor()
