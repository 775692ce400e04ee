"""The kit itself: it reports a wrong rule and a wrong device result, exits 1 for them and 2
when it cannot run, writes the JSON it promises, and needs nothing but torch.

Truth for the failing runs: torch CPU, against which a monkeypatched rule or a doctored
device result must show up as a divergence.
"""

import itertools
import json

import torch

from tests.support.subprocess_run import AUTOLOAD, run_python
from torch_mydev_rules import layout
from torch_mydev_rules.conformance import __main__ as cli
from torch_mydev_rules.conformance import run, select
from torch_mydev_rules.conformance import runner as run_module


def test_a_wrong_rule_is_reported(monkeypatch):
    """A broken ``infer_dense_strides`` (clone of a non-dense tensor) is found, and the
    report names ``empty_like`` as the step CPU's result departs at (or the rules now
    raise: an expanded tensor's strides make an overlapping copy destination)."""
    monkeypatch.setattr(
        layout.strides, "infer_dense_strides", lambda sizes, strides: tuple(strides)
    )
    result = run(torch.device("cpu"), select(["clone"]), seed=0, rounds=40)
    assert result.divergences
    steps = {
        d.rules.get("cpu_departs_at", d.rules.get("error", "")[:12]) for d in result.divergences
    }
    assert steps == {"empty_like", "RuntimeError"}, steps
    assert cli.main(["--device", "cpu", "--ops", "clone", "--rounds", "40"]) == 1


def test_a_wrong_predicate_is_reported(monkeypatch):
    """c10's predicates are checked too: ``is_contiguous`` always true is found."""
    monkeypatch.setattr(layout.contiguity, "is_contiguous", lambda sizes, strides: True)
    result = run(torch.device("cpu"), select(["as_strided"]), seed=0, rounds=40)
    assert any("rules is_contiguous" in text for d in result.divergences for text in d.differs)


def test_a_wrong_device_result_is_reported(monkeypatch, capsys):
    """A device whose outputs come back with reversed strides diverges (exit status 1)."""
    real = run_module._call
    side = itertools.count()

    def device_reverses_strides(call, args):
        outcome = real(call, args)
        if next(side) % 2 and outcome.outputs:  # the device's call follows CPU's
            first = dict(outcome.outputs[0])
            first["strides"] = tuple(reversed(first["strides"]))
            outcome.outputs = (first, *outcome.outputs[1:])
        return outcome

    monkeypatch.setattr(run_module, "_call", device_reverses_strides)
    assert cli.main(["--device", "cpu", "--ops", "clone", "add", "--rounds", "10"]) == 1
    assert "strides: cpu" in capsys.readouterr().out


def test_an_unknown_device_exits_2(capsys):
    assert cli.main(["--device", "nosuchdevice"]) == 2
    assert "knows no device 'nosuchdevice'" in capsys.readouterr().err
    assert cli.main(["--device", "cpu", "--ops", "no_such_op"]) == 2
    assert cli.main(["--device", "cpu", "--dtypes", "float33"]) == 2


def test_a_device_this_torch_lacks_exits_2(capsys):
    if torch.cuda.is_available():  # the suite runs on CPU builds; a GPU build has cuda
        return
    assert cli.main(["--device", "cuda"]) == 2
    assert "cannot allocate on 'cuda'" in capsys.readouterr().err


def test_the_json_file(tmp_path, monkeypatch):
    """``--json``: the run's counts, and per divergence the op, the case, both outcomes and
    the rules' prediction with their steps."""
    monkeypatch.setattr(
        layout.strides, "infer_dense_strides", lambda sizes, strides: tuple(strides)
    )
    path = tmp_path / "run.json"
    args = ["--device", "cpu", "--ops", "clone", "sum", "--rounds", "20", "--json", str(path)]
    assert cli.main(args) == 1
    data = json.loads(path.read_text())
    assert data["device"] == "cpu" and data["torch"] == torch.__version__
    assert data["checked"] > 0 and data["ops"] == ["clone", "sum"]
    divergence = data["divergences"][0]
    assert set(divergence) >= {"op", "case", "cpu", "device", "rules", "differs", "key"}
    assert divergence["op"] == "clone"
    assert divergence["cpu"]["outputs"][0]["strides"] != divergence["rules"]["predicts"]["strides"]
    assert divergence["rules"]["steps"][0].startswith("empty_like: ")
    assert divergence["rules"]["cpu_departs_at"] == "empty_like"


def test_the_kit_runs_without_the_device_package():
    """``torch_mydev_rules`` (the rules and the kit) runs with any torch build: it never
    loads torch_mydev or its stub, and the command line runs on CPU without them."""
    code = (
        "import sys; from torch_mydev_rules.conformance.__main__ import main; "
        "status = main(['--device', 'cpu', '--ops', 'as_strided', 'add', '--rounds', '3']); "
        "print(status, sorted(m for m in sys.modules if m.startswith('torch_mydev')))"
    )
    out = run_python(code, env={AUTOLOAD: "0"}).stdout
    status, loaded = out.strip().splitlines()[-1].split(" ", 1)
    assert status == "0", out
    loaded = eval(loaded)
    assert loaded and all(name.startswith("torch_mydev_rules") for name in loaded), loaded
