"""tools/cuda_layout_check.py (the GPU differential check) runs and can fail, checked on CPU."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from torch_mydev_rules import layout

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


def test_the_rules_import_without_the_device_package():
    """``torch_mydev_rules`` runs with any torch build: it never loads torch_mydev or its stub."""
    code = (
        "import sys, torch_mydev_rules.iterator, torch_mydev_rules.layout; "
        "print(sorted(m for m in sys.modules if m.startswith('torch_mydev')))"
    )
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    loaded = eval(out)
    assert loaded and all(name.startswith("torch_mydev_rules") for name in loaded), loaded
