"""explain() sets DIPU's OpInferrer answer beside torch's where the two differ.

The truth for torch's side is the CPU op itself; DIPU's side is
``reference.opinferrer.dipu_output_strides`` (pinned against torch in test_opinferrer.py).
"""

import torch

from torch_mydev_rules.iterator import explain


def test_dense_non_contiguous_inputs_show_dipus_fast_path():
    a = torch.randn(3, 4).t()
    report = explain(torch.add, a, a, dipu=True)
    assert "DIPU" not in str(explain(torch.add, a, a))  # the row only when asked for
    assert report.output_strides == (a + a).stride() == (1, 4)
    assert report.dipu_strides == (3, 1)
    row = next(line for line in str(report).splitlines() if line.startswith("DIPU OpInferrer"))
    assert row.endswith("| would allocate strides (3, 1); torch (followed here) gives (1, 4)")


def test_no_row_where_dipu_agrees():
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    report = explain(torch.mul, x, torch.randn(3, 4, 5), dipu=True)
    assert report.dipu_strides == report.output_strides == (60, 1, 15, 3)
    assert "DIPU" not in str(report)


def test_only_new_outputs_have_a_dipu_answer():
    a = torch.randn(3, 4).t()
    assert explain(torch.add, a, a, out=torch.empty(4, 3)).dipu_strides is None
    assert explain(torch.Tensor.add_, a.clone(), a).dipu_strides is None
    assert explain("copy_", torch.empty(4, 3), a).dipu_strides is None
