"""The first copies of a process that has not loaded numba (kernels/copy/prepared.py).

A same-dtype serial copy's first run moves its bytes with ``ctypes.memmove`` or numpy's
strided copy, so ``import torch; x.to("mydev")`` and the like never load numba; the second
run of a layout loads the loop. Each check needs a fresh interpreter, so it runs in a
subprocess. Truth: the same ops on CPU, bit for bit.
"""

from __future__ import annotations

from tests.support.subprocess_run import run_python

SCRIPT = """
import sys
import torch
import torch_mydev

def same(a, b):
    assert a.device.type == "mydev", a.device
    assert a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype
    b_bits = b.contiguous().view(-1).view(torch.uint8) if b.numel() else b
    a_bits = a.cpu().contiguous().view(-1).view(torch.uint8) if a.numel() else a.cpu()
    assert torch.equal(a_bits, b_bits), (a, b)

g = torch.Generator().manual_seed(0)
cases = []
for dtype in (torch.float32, torch.float64, torch.int16, torch.uint8, torch.bool,
              torch.complex64, torch.bfloat16):
    base = (torch.randn(6, 5, 4, generator=g) * 50).to(dtype)
    cases += [base, base.transpose(0, 2), base[:, 1:4:2], base.permute(2, 0, 1)]
cases.append(torch.randn(2, 3, 8, 8, generator=g).contiguous(memory_format=torch.channels_last))
cases.append(torch.randn(5, generator=g).expand(3, 5))

# Each op below copies a layout (sizes, strides, dtype on both sides) no other op copied
# before it: every one is a first run. Results are compared once all have run.
results = []
for cpu in cases:
    moved = cpu.to("mydev")  # preserve_format: the layout CPU's _to_copy gives
    results.append((moved, torch.ops.aten._to_copy(cpu)))
    results.append((moved.contiguous(), cpu.contiguous()))
    if cpu.dim() == 2:  # into a transposed destination
        flipped = cpu.shape[::-1]
        out = torch.empty(flipped, dtype=cpu.dtype, device="mydev").t()
        results.append((out.copy_(moved), torch.empty(flipped, dtype=cpu.dtype).t().copy_(cpu)))
first = "numba" in sys.modules
for a, b in results:
    same(a, b)
t = torch.randn(6, 5, generator=g)
again = [t.to("mydev").t().contiguous() for _ in range(3)]  # the same layout three times
for a in again:
    same(a, t.t().contiguous())
print(first, "numba" in sys.modules)
"""


def test_first_copies_equal_cpu_without_loading_numba_and_repeats_load_it():
    done = run_python(SCRIPT, timeout=300)
    assert done.stdout.split() == ["False", "True"]
