"""``benchmarks/run.py --smoke`` runs and prints its tables (no timing is asserted).

Truth: the script's own output -- every case row, the targets and the clone memory check.
"""

from pathlib import Path

from tests.support.subprocess_run import run_python

ROOT = Path(__file__).resolve().parent.parent


def test_bench_smoke_prints_the_tables():
    done = run_python(script=ROOT / "benchmarks" / "run.py", args=["--smoke"], timeout=120)
    text = done.stdout
    assert "| case | size | mydev | reference |" in text
    for case in (
        "small op: contiguous()",
        "transposed -> contiguous",
        "NCHW -> channels_last",
        "channels_last -> NCHW",
        "contiguous copy_",
        "cast float32 -> float16",
        "cast float32 -> int64",
        "broadcast copy_",
        "add channels_last + contiguous",
        "eager (a*2+b).relu().sum(1)",
        "relu",
        "threshold_backward (relu's grad), channels_last",
        "reduction: sum(1)",
        "reduction: amax(1)",
        "train step: examples/cnn.py",
        "train step: examples/transformer.py",
        "cold start (subprocess)",
        "first call, empty cache: every native op",
        "first call, sync mode (the old behaviour): add float32",
        "first 3 train steps, empty cache: examples/cnn.py",
        "first 3 train steps, empty cache: examples/transformer.py",
    ):
        assert f"| {case}" in text, case
    assert "| clone peak extra memory = output bytes | 4 cases | met |" in text
    assert "torch.library dispatch" in text
    assert "| small ops at 1K <= 2x | worst " in text
    assert "| first call of each native op, empty cache (background mode) <= 1 s | - |" in text
