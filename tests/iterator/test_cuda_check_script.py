"""tools/cuda_layout_check.py (the GPU differential check) runs and can fail, checked on CPU."""

import importlib.util
from pathlib import Path

from torch_mydev import layout

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "cuda_layout_check.py"


def _script():
    spec = importlib.util.spec_from_file_location("cuda_layout_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cpu_run_finds_no_mismatch():
    assert _script().check("cpu", cases=300, seed=1) == []


def test_a_wrong_rule_is_reported(monkeypatch):
    monkeypatch.setattr(layout, "infer_dense_strides", lambda sizes, strides: strides)
    monkeypatch.setattr(layout, "is_contiguous", lambda sizes, strides: True)
    assert _script().check("cpu", cases=300, seed=1)
