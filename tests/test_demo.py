"""`make demo` runs and reports agreement with torch CPU for every mission step."""

import runpy
from pathlib import Path

DEMO = Path(__file__).resolve().parent.parent / "examples" / "demo.py"


def test_demo_runs_and_agrees(capsys):
    runpy.run_path(str(DEMO), run_name="__main__")
    out = capsys.readouterr().out
    assert "4/4 mission steps agree with torch CPU" in out
    assert "DIFFER" not in out
    assert "memory_allocated back to baseline: True" in out
    assert "max abs difference (outputs, loss, gradients, updated parameters): 0" in out
