"""Decides the verdict on each case: runs it on CPU and on the device, and asks the rules.

``run(device, ...)`` goes round by round; in each round every selected op draws one case
from its own seeded ``random.Random`` (``f"{seed}/{op}/{round}"``, so a case does not
change when ops are added or removed, and one case can be drawn again by its key). A case:

1. the rules' prediction (mission ops) from the arguments made on CPU, before any op runs
   (an ``out=`` or in-place call changes its arguments);
2. the call on CPU, then on the device, over the same values;
3. ``compare.compare``: every property of every output, values where readable;
4. the prediction against CPU's result (sizes, strides, dtype; or the exception type);
5. a case that differs in 3 or 4 is a ``Divergence``; ``departs_at`` names the first of the
   rules' steps whose decision the departing result contradicts.

A case is skipped, not compared, when CPU has no kernel for its dtype (``... not
implemented for 'Bool'``: then there is no truth), or when the device has none (its kernel
or its dtype is missing; listed in the summary). The catalogue draws no case whose error
depends on the values (indices are in range, integer divisors are not zero), so a device
without values (``meta``) must raise wherever CPU raises.
"""

from __future__ import annotations

import random
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from . import compare, rules
from .cases import Call, Op, make_args
from .devices import readable, taken_dtypes

__all__ = ["DeviceFault", "Divergence", "Result", "run", "run_case", "run_key"]

# CUDA's sticky errors (a misaligned address, an illegal memory access) reach Python as
# ``torch.AcceleratorError`` (torch 2.8 and later); after one the device cannot run anything
# more in this process, so a run stops at the case that caused it.
_FAULTS: tuple[type[BaseException], ...] = tuple(
    t for t in (getattr(torch, "AcceleratorError", None),) if t is not None
)


@dataclass
class Divergence:
    """One case where the device, or the rules, disagree with CPU."""

    op: str
    case: str
    key: str
    cpu: dict[str, Any]
    device: dict[str, Any]
    rules: dict[str, Any] | None
    differs: list[str]
    significant: bool = True

    def as_json(self) -> dict[str, Any]:
        """The record ``--json`` writes."""
        return {
            "op": self.op,
            "case": self.case,
            "key": self.key,
            "differs": self.differs,
            "significant": self.significant,
            "cpu": self.cpu,
            "device": self.device,
            "rules": self.rules,
        }


@dataclass
class Result:
    """What a run found: ``checked`` counts every property compared (``compare``'s and the
    rules'), ``cases`` the cases compared, ``skipped`` the cases left out per (op, reason)."""

    device: str
    torch: str
    ops: list[str]
    checked: int = 0
    cases: int = 0
    rounds: int = 0
    divergences: list[Divergence] = field(default_factory=list)
    skipped: Counter[tuple[str, str]] = field(default_factory=Counter)
    seconds: float = 0.0
    op_seconds: Counter[str] = field(default_factory=Counter)
    fault: str | None = None  # the key of the case whose device error ended the run


class DeviceFault(Exception):
    """A case left the device unusable (``_FAULTS``): ``divergence`` records it."""

    def __init__(self, divergence: Divergence) -> None:
        super().__init__(divergence.differs[0])
        self.divergence = divergence


@dataclass
class _Side:
    outcome: compare.Outcome
    args: list[Any]


def _outputs(value: Any) -> tuple[Any, ...]:
    if isinstance(value, torch.Tensor):
        return (value,)
    if isinstance(value, (tuple, list)):
        return tuple(v for v in value if isinstance(v, torch.Tensor) or v is None)
    return ()


def _call(call: Call, args: list[Any]) -> compare.Outcome:
    """Run ``call`` on ``args``: a snapshot of each output, or the exception."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            outputs = _outputs(call.fn(*args))
        except Exception as error:  # any exception is an outcome to compare
            return compare.Outcome(error=error)
    snaps = tuple(
        compare.snapshot(t, args) if t is not None else {name: None for name in compare.PROPERTIES}
        for t in outputs
    )
    tensors = tuple(t if t is not None else torch.empty(0) for t in outputs)
    return compare.Outcome(snaps, tensors=tensors)


def _message(error: BaseException | None) -> str:
    return "" if error is None else str(error)


def _dtype_refusal(error: BaseException | None) -> bool:
    """ATen's dtype dispatch refusing a dtype (``"add_stub" not implemented for 'Bool'``)."""
    return error is not None and "not implemented for '" in _message(error)


def _no_kernel(error: BaseException | None) -> bool:
    """The dispatcher finding no kernel for the device (``Could not run 'aten::...' with
    arguments from the 'Meta' backend``), or a kernel saying it does not exist yet."""
    text = _message(error)
    return error is not None and (
        "Could not run '" in text or "not implemented for" in text or "NYI" in text
    )


def _skip_reason(cpu: compare.Outcome, device: compare.Outcome) -> str | None:
    """Why a case cannot be compared, or None."""
    if _dtype_refusal(cpu.error):
        return "cpu has no kernel for this dtype"
    if cpu.error is None and _no_kernel(device.error):
        return f"the device has no kernel: {_message(device.error).splitlines()[0][:120]}"
    return None


def _predict(call: Call, args: list[Any]) -> rules.Prediction | BaseException | None:
    if call.rules is None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return call.rules(*args)
        except (RuntimeError, IndexError, ValueError) as error:
            return error


def _rules_check(
    call: Call, prediction: rules.Prediction | BaseException | None, cpu: compare.Outcome
) -> tuple[int, list[str]]:
    """``(checks, differences)`` of the rules' prediction against CPU's result."""
    if prediction is None:
        return 0, []
    if cpu.error is not None and _message(cpu.error).startswith(call.refusals or ("\0",)):
        return 0, []  # an op's own refusal (bool subtraction...): not a layout rule
    if isinstance(prediction, BaseException) or cpu.error is not None:
        ours = type(prediction).__name__ if isinstance(prediction, BaseException) else "ok"
        theirs = "ok" if cpu.error is None else type(cpu.error).__name__
        return 1, [] if ours == theirs else [f"rules raise {ours}, cpu {theirs}"]
    result = cpu.outputs[0]
    differences = [
        f"rules {name}: {value}, cpu {result[name]}"
        for name, value in prediction.fields.items()
        if result.get(name, value) != value
    ]
    return len(prediction.fields), differences


def _describe_prediction(
    prediction: rules.Prediction | BaseException | None,
    cpu: compare.Outcome,
    device: compare.Outcome,
) -> dict[str, Any] | None:
    """The ``rules`` record: what they predict, each step, and where CPU's and the device's
    results depart from them."""
    if prediction is None:
        return None
    if isinstance(prediction, BaseException):
        return {"error": f"{type(prediction).__name__}: {prediction}"[:200]}
    record: dict[str, Any] = {
        "predicts": {
            k: list(v) if isinstance(v, tuple) else v for k, v in prediction.fields.items()
        },
        "steps": [f"{name}: {text}" for name, text in prediction.steps],
    }
    for side, outcome in (("cpu", cpu), ("device", device)):
        if outcome.error is None and outcome.outputs:
            record[f"{side}_departs_at"] = rules.departs_at(prediction, outcome.outputs[0])
    return record


def run_case(
    op: Op, key: str, dtypes: Sequence[torch.dtype], device: torch.device
) -> tuple[int, Divergence | None, str | None]:
    """One case of ``op`` drawn from ``key``: ``(checks, divergence or None, skip reason)``.

    Raises ``DeviceFault`` when the device's side ends in a sticky device error (``_FAULTS``),
    raised by the call or by reading its results back."""
    rng = random.Random(key)
    call = op.draw(rng, tuple(dtypes))
    seed = rng.randrange(2**31)
    cpu_args = make_args(call.args, "cpu", seed)
    prediction = _predict(call, cpu_args)
    cpu = _call(call, cpu_args)
    try:
        return _against_device(op, key, call, seed, device, prediction, cpu)
    except _FAULTS as error:
        raise DeviceFault(_fault(op, key, call, cpu, error)) from error


def _fault(op: Op, key: str, call: Call, cpu: compare.Outcome, error: BaseException) -> Divergence:
    first = (str(error).strip().splitlines() or [""])[0][:200]
    return Divergence(
        op=op.name,
        case=call.text,
        key=key,
        cpu=compare.describe_outcome(cpu),
        device=compare.describe_outcome(compare.Outcome(error=error)),
        rules=None,
        differs=[f"device fault: {type(error).__name__}: {first}"],
    )


def _against_device(
    op: Op,
    key: str,
    call: Call,
    seed: int,
    device: torch.device,
    prediction: rules.Prediction | BaseException | None,
    cpu: compare.Outcome,
) -> tuple[int, Divergence | None, str | None]:
    dev_args = make_args(call.args, device, seed)
    if device.type == "cuda" and call.rules is not None:
        device_prediction = _predict(call, dev_args)  # explain() models CUDA's own reads
    else:
        device_prediction = prediction
    dev = _call(call, dev_args)
    if isinstance(dev.error, _FAULTS):
        raise dev.error
    reason = _skip_reason(cpu, dev)
    if reason is not None:
        return 0, None, reason
    values = call.values if readable(device) else None
    checked, differs, significant = compare.compare(cpu, dev, values)
    rule_checks, rule_differs = _rules_check(call, prediction, cpu)
    if not (differs or rule_differs):
        return checked + rule_checks, None, None
    divergence = Divergence(
        op=op.name,
        case=call.text,
        key=key,
        cpu=compare.describe_outcome(cpu),
        device=compare.describe_outcome(dev),
        rules=_describe_prediction(device_prediction, cpu, dev),
        differs=differs + rule_differs,
        significant=bool(rule_differs) or significant,
    )
    return checked + rule_checks, divergence, None


def _usable(op: Op, taken: set[torch.dtype], wanted: set[torch.dtype] | None) -> list:
    return [d for d in op.dtypes if d in taken and (wanted is None or d in wanted)]


def _count(result: Result, op: Op, key: str, usable: list, device: torch.device) -> bool:
    """Run one case into ``result``; False when a device fault ends the run."""
    began = time.perf_counter()
    try:
        checked, divergence, reason = run_case(op, key, usable, device)
    except DeviceFault as fault:
        result.cases += 1
        result.divergences.append(fault.divergence)
        result.fault = key
        return False
    finally:
        result.op_seconds[op.name] += time.perf_counter() - began
    if reason is not None:
        result.skipped[(op.name, reason)] += 1
        return True
    result.cases += 1
    result.checked += checked
    if divergence is not None:
        result.divergences.append(divergence)
    return True


def run_key(
    device: torch.device, key: str, ops: Sequence[Op], dtypes: Sequence[torch.dtype] | None = None
) -> Result:
    """The one case ``key`` (``SEED/OP/ROUND``, as a report prints it) of the op of ``ops``
    it names, drawn as ``run`` draws it: the way to replay one divergence, or a fault with
    ``CUDA_LAUNCH_BLOCKING=1``."""
    name = key.split("/")[1]
    op = next(op for op in ops if op.name == name)
    result = Result(str(device), torch.__version__, [name], rounds=1)
    wanted = None if dtypes is None else set(dtypes)
    start = time.perf_counter()
    _count(result, op, key, _usable(op, set(taken_dtypes(device)), wanted), device)
    result.seconds = time.perf_counter() - start
    return result


def run(
    device: torch.device,
    ops: Sequence[Op],
    *,
    seed: int = 0,
    rounds: int = 40,
    budget: float | None = None,
    dtypes: Sequence[torch.dtype] | None = None,
    progress: Callable[[Result], None] | None = None,
) -> Result:
    """Run ``rounds`` rounds of every op of ``ops`` on ``device`` (stopping at the end of
    the round in which ``budget`` seconds ran out), each op with its dtypes that are in
    ``dtypes`` (all when None) and that the device takes. A device fault (``DeviceFault``)
    ends the run at its case: ``result.fault`` names it."""
    start = time.perf_counter()
    taken = set(taken_dtypes(device))
    wanted = None if dtypes is None else set(dtypes)
    plan = []
    result = Result(str(device), torch.__version__, [op.name for op in ops])
    for op in ops:
        usable = _usable(op, taken, wanted)
        if usable:
            plan.append((op, usable))
        else:
            result.skipped[(op.name, "no dtype of the op is in the run or on the device")] += 1
    for number in range(rounds):
        for op, usable in plan:
            if not _count(result, op, f"{seed}/{op.name}/{number}", usable, device):
                result.rounds = number + 1
                result.seconds = time.perf_counter() - start
                return result
        result.rounds = number + 1
        if progress is not None:
            progress(result)
        if budget is not None and time.perf_counter() - start > budget:
            break
    result.seconds = time.perf_counter() - start
    return result
