"""The kit itself: it reports a wrong rule and a wrong device result, exits 1 for them and 2
when it cannot run, writes the JSON it promises, and needs nothing but torch.

Truth for the failing runs: torch CPU, against which a monkeypatched rule or a doctored
device result must show up as a divergence.
"""

import itertools
import json
import random

import torch

from tests.support.subprocess_run import AUTOLOAD, run_python
from torch_mydev_rules import layout
from torch_mydev_rules.conformance import __main__ as cli
from torch_mydev_rules.conformance import layouts, run, select
from torch_mydev_rules.conformance import runner as run_module
from torch_mydev_rules.conformance.cases import make_args


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


def _device_side(monkeypatch, change):
    """Patch the runner's ``_call`` so ``change(call, outcome)`` edits the device's outcome
    (each case calls CPU first, then the device)."""
    real = run_module._call
    side = itertools.count()

    def patched(call, args):
        outcome = real(call, args)
        return change(call, outcome) if next(side) % 2 else outcome

    monkeypatch.setattr(run_module, "_call", patched)


def test_a_device_fault_ends_the_run_at_its_case(monkeypatch, capsys):
    """A sticky device error (CUDA's misaligned address reaches Python as
    ``torch.AcceleratorError``) leaves the device unusable: the run stops at that case,
    records it, and names the key that replays it alone."""
    fault = torch.AcceleratorError("CUDA error: misaligned address")
    cases = itertools.count()

    def third_case_faults(call, outcome):
        return run_module.compare.Outcome(error=fault) if next(cases) == 2 else outcome

    _device_side(monkeypatch, third_case_faults)
    result = run(torch.device("cpu"), select(["clone", "add"]), seed=0, rounds=10)
    assert result.fault == "0/clone/1" and result.cases == 3
    assert result.divergences[-1].differs == [
        "device fault: AcceleratorError: CUDA error: misaligned address"
    ]
    cases = itertools.count()
    assert cli.main(["--device", "cpu", "--ops", "clone", "add", "--rounds", "10"]) == 1
    assert "stopped at 0/clone/1" in capsys.readouterr().out


def test_a_fault_while_reading_results_back_ends_the_run(monkeypatch):
    """The error can surface only when the results are read (CUDA reports it late)."""

    def reading_faults(*args):
        raise torch.AcceleratorError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(run_module.compare, "compare", reading_faults)
    result = run(torch.device("cpu"), select(["neg"]), seed=3, rounds=5)
    assert result.fault == "3/neg/0" and len(result.divergences) == 1


def test_key_replays_one_case(capsys):
    """``--key`` runs the one case a report printed, drawn as the full run draws it."""
    assert cli.main(["--device", "cpu", "--key", "0/index_put_/14"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"torch {torch.__version__} on cpu: 1 cases in 1 rounds")
    assert cli.main(["--device", "cpu", "--key", "0/index_put_"]) == 2
    assert cli.main(["--device", "cpu", "--key", "0/no_such_op/1"]) == 2


def _scaled(factor):
    def change(call, outcome):
        if outcome.tensors and outcome.tensors[0].dtype == torch.float32:
            outcome.tensors = (outcome.tensors[0] * factor, *outcome.tensors[1:])
        return outcome

    return change


def test_values_within_test_compare_cpus_tolerance_are_not_significant(monkeypatch):
    """A float32 ``exp`` 1e-4 off (beyond ``assert_close``'s default, within the 1e-3 of
    PyTorch's CUDA-against-CPU ``test_compare_cpu``) diverges, marked not significant; 1e-2
    off is significant."""
    _device_side(monkeypatch, _scaled(1 + 1e-4))
    found = run(torch.device("cpu"), select(["exp"]), dtypes=[torch.float32], rounds=10)
    assert found.divergences and not any(d.significant for d in found.divergences)
    assert all("within the cross-device tolerance" in d.differs[0] for d in found.divergences)
    _device_side(monkeypatch, _scaled(1 + 1e-2))
    found = run(torch.device("cpu"), select(["exp"]), dtypes=[torch.float32], rounds=10)
    assert found.divergences and all(d.significant for d in found.divergences)


def test_index_put_without_accumulate_draws_no_repeated_index():
    """Which of two writes to one place lands is undefined: such cases are not drawn."""
    op = select(["index_put_"])[0]
    drawn = 0
    for number in range(200):
        rng = random.Random(f"0/index_put_/{number}")
        call = op.draw(rng, op.dtypes)
        index = make_args(call.args, "cpu", rng.randrange(2**31))[1]
        if call.text.endswith("False)"):
            drawn += 1
            assert index.unique().numel() == index.numel(), call.text
    assert drawn > 50


def test_abs_of_a_complex_tensor_compares_values_as_close():
    """``abs`` of a complex tensor is a hypot, which devices round differently; of a real
    tensor it is exact."""
    op = select(["abs"])[0]
    modes = set()
    for number in range(100):
        call = op.draw(random.Random(f"0/abs/{number}"), op.dtypes)
        modes.add((call.args[0].dtype.is_complex, call.values))
    assert modes == {(True, "close"), (False, "exact")}


def test_a_bool_divisor_is_never_false():
    """A divisor holds no zero (CPU raises for an integer division by zero, CUDA does not):
    for a bool divisor that means no False."""
    op = select(["div_floor"])[0]
    for number in range(300):
        rng = random.Random(f"0/div_floor/{number}")
        call = op.draw(rng, op.dtypes)
        divisor = make_args(call.args, "cpu", rng.randrange(2**31))[1]
        if isinstance(divisor, torch.Tensor) and divisor.dtype == torch.bool:
            assert bool(divisor.all()), call.text


def test_add_into_an_overlapping_self_compares_no_values():
    """``add_`` into a ``self`` whose elements share addresses where ``has_internal_overlap``
    cannot tell (no stride 0): which write lands is undefined, so only the layout is
    compared."""
    op = select(["add_"])[0]
    overlapping = 0
    for number in range(2000):
        call = op.draw(random.Random(f"0/add_/{number}"), op.dtypes)
        if layouts.overlaps(call.args[0].layout):
            overlapping += 1
            assert call.values is None, call.text
        else:
            assert call.values == "exact", call.text
    assert overlapping > 5


def test_overlaps_lists_shared_addresses():
    assert layouts.overlaps(layouts.Layout((2, 2), (5, 5), 3))
    assert layouts.overlaps(layouts.Layout((3,), (0,), 0))
    assert not layouts.overlaps(layouts.Layout((2, 3), (1, 2), 0))
    assert not layouts.overlaps(layouts.Layout((0, 3), (0, 0), 0))
