"""``torch_mydev.compile.extern``: the CPU op on aliases of mydev tensors, no copy.

Truth: the same ``out=`` call on CPU tensors of the same values and layouts.
"""

import torch

import torch_mydev
from torch_mydev.compile.extern import run_multi_out, run_out


def test_run_out_writes_the_mydev_output_in_place():
    a = torch.randn(6, 4)
    big = torch.zeros(8, 8)
    da, dbig = a.to("mydev"), big.to("mydev")
    out, cpu_out = dbig[1:7, 2:8], big[1:7, 2:8]  # a view with an offset and row stride 8
    address = out.data_ptr()
    torch_mydev.reset_fallback_stats()
    run_out(torch.mm, da, da.t(), out=out)  # two aliases of one mydev storage
    torch.mm(a, a.t(), out=cpu_out)
    assert torch_mydev.fallback_stats() == {}
    assert out.data_ptr() == address and out.device.type == "mydev"
    assert torch.equal(dbig.cpu(), big)


def test_run_out_keeps_cpu_overlap_checks():
    """Input and output views of one mydev storage share one CPU storage, so ATen sees the
    overlap it sees on CPU and raises the same error."""
    a = torch.randn(4, 4)
    da = a.to("mydev")
    errors = []
    for x in (a, da):
        try:
            if x is a:
                torch.exp(x[0:3], out=x[1:4])
            else:
                run_out(torch.exp, x[0:3], out=x[1:4])
        except RuntimeError as error:
            errors.append(str(error).splitlines()[0])
    assert len(errors) == 2 and errors[0] == errors[1]
    assert "refer to a single memory location" in errors[0]


def test_run_multi_out_returns_the_mydev_outputs():
    a = torch.randn(5, 7)
    da = a.to("mydev")
    values = torch.empty(5, 7, device="mydev")
    indices = torch.empty(5, 7, dtype=torch.long, device="mydev")
    got = run_multi_out(
        ("values", "indices"), torch.ops.aten.sort.values, da, 1, values=values, indices=indices
    )
    assert got[0] is values and got[1] is indices
    want = torch.sort(a, dim=1)
    assert torch.equal(values.cpu(), want.values) and torch.equal(indices.cpu(), want.indices)
