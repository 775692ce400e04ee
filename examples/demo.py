"""`make demo`: the mydev device end to end.

1. the device and its allocator; 2. the mission: a channels_last and a transposed tensor
moved to mydev, made contiguous / restrided, with the `explain()` table of each decision
and a differential check against the same calls on CPU; 3. a small CNN trained one step on
mydev and on CPU, with the ops that fell back to CPU; 4. memory back to baseline.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

import torch_mydev

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cnn  # examples/cnn.py, beside this file


def _header(title: str) -> None:
    print(f"\n=== {title} " + "=" * max(0, 74 - len(title)))


def show_device() -> None:
    _header("the device")
    backend = torch._C._get_privateuse1_backend_name()
    print(f"torch {torch.__version__}; PrivateUse1 is named {backend!r}")
    mydev = torch.mydev
    print(f"torch.mydev: available={mydev.is_available()} count={mydev.device_count()}")
    x = torch.empty(2, 3, 4, 5, device="mydev", memory_format=torch.channels_last)
    storage = x.untyped_storage()
    print("x = torch.empty(2, 3, 4, 5, device='mydev', memory_format=torch.channels_last)")
    print(f"  device={x.device} dtype={x.dtype} shape={tuple(x.shape)} stride={x.stride()}")
    print(f"  storage data_ptr=0x{storage.data_ptr():x} nbytes={storage.nbytes()}")
    print("  memory_stats:")
    for key, value in torch.mydev.memory_stats().items():
        print(f"    {key:30s} {value}")


def _agree(cpu: torch.Tensor, dev: torch.Tensor) -> str:
    same = (
        cpu.shape == dev.shape
        and cpu.stride() == dev.stride()
        and cpu.storage_offset() == dev.storage_offset()
        and torch.equal(cpu, dev.cpu())
    )
    return "agree" if same else "DIFFER"


def mission_step(title: str, cpu_input: torch.Tensor, call: str, **kwargs) -> bool:
    """Run `call` on a CPU tensor and on its mydev copy; print explain() and the comparison."""
    _header(title)
    dev_input = cpu_input.to("mydev")
    print(f"input: shape={tuple(cpu_input.shape)} stride={cpu_input.stride()}")
    print(f"to('mydev'): stride={dev_input.stride()} ({_agree(cpu_input, dev_input)} with CPU)")
    print(torch_mydev.explain(call, dev_input, **kwargs))
    cpu_out = getattr(cpu_input, call)(**kwargs)
    dev_out = getattr(dev_input, call)(**kwargs)
    verdict = _agree(cpu_out, dev_out)
    print(
        f"{call}({', '.join(f'{k}={v}' for k, v in kwargs.items())}): "
        f"mydev stride={dev_out.stride()} cpu stride={cpu_out.stride()}: sizes, strides "
        f"and values {verdict}"
    )
    return verdict == "agree"


def main() -> None:
    show_device()
    baseline = torch.mydev.memory_allocated()
    nchw = torch.randn(2, 3, 4, 5)
    results = [
        mission_step(
            "channels_last tensor -> mydev -> contiguous()",
            nchw.contiguous(memory_format=torch.channels_last),
            "contiguous",
        ),
        mission_step(
            "transposed tensor -> mydev -> contiguous()",
            torch.randn(64, 48).t(),
            "contiguous",
        ),
        mission_step(
            "NCHW tensor -> mydev -> contiguous(memory_format=channels_last)",
            torch.randn(1, 64, 5, 4),
            "contiguous",
            memory_format=torch.channels_last,
        ),
        mission_step(
            "transposed tensor -> mydev -> clone() (preserve_format keeps the layout)",
            torch.randn(4, 3).t(),
            "clone",
        ),
    ]
    _header("a real model: channels_last CNN, forward + backward + one SGD step")
    torch_mydev.reset_fallback_stats()
    cnn.main()
    _header("summary")
    print(f"{sum(results)}/{len(results)} mission steps agree with torch CPU")
    print(f"memory_allocated back to baseline: {torch.mydev.memory_allocated() == baseline}")
    if not all(results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
