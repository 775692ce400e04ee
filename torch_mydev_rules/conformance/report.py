"""Decides how a run is shown: a table of divergences grouped by op, and the JSON file.

The JSON file is ``{"device", "torch", "checked", "cases", "rounds", "seconds", "ops",
"fault", "skipped", "divergences": [{"op", "case", "key", "differs", "significant", "cpu",
"device", "rules"}]}``; ``fault`` is the key of the case whose device error ended the run
(None when none did);
``cpu`` and ``device`` hold each output's compared properties (or the exception), ``rules``
what the rules predict for a mission op, their steps, and the step at which CPU's and the
device's results depart from them (None where they agree).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from .runner import Result

__all__ = ["as_json", "table", "write_json"]


def as_json(result: Result) -> dict[str, Any]:
    """The run as one JSON-able dict."""
    return {
        "device": result.device,
        "torch": result.torch,
        "checked": result.checked,
        "cases": result.cases,
        "rounds": result.rounds,
        "seconds": round(result.seconds, 2),
        "ops": result.ops,
        "fault": result.fault,
        "skipped": [
            {"op": op, "reason": reason, "cases": n}
            for (op, reason), n in sorted(result.skipped.items())
        ],
        "divergences": [d.as_json() for d in result.divergences],
    }


def write_json(result: Result, path: str | Path) -> None:
    """Write ``as_json(result)`` to ``path``."""
    Path(path).write_text(json.dumps(as_json(result), indent=1, default=str) + "\n")


def _outcome_line(outcome: dict[str, Any]) -> str:
    if "error" in outcome:
        return outcome["error"]
    parts = []
    for out in outcome["outputs"]:
        if out.get("sizes") is None:
            parts.append("None")
            continue
        text = f"{list(out['sizes'])} {tuple(out['strides'])} {out['dtype']}"
        if out["storage_offset"]:
            text += f" +{out['storage_offset']}"
        parts.append(text)
    return "; ".join(parts)


def table(result: Result, *, per_op: int = 5) -> str:
    """A readable summary: the counts, then per op its divergences (``per_op`` shown), then
    the cases the device could not run."""
    lines = [
        f"torch {result.torch} on {result.device}: {result.cases} cases in {result.rounds} "
        f"rounds, {result.checked} checks, {len(result.divergences)} divergences "
        f"({result.seconds:.1f} s)"
    ]
    by_op: dict[str, list] = defaultdict(list)
    for d in result.divergences:
        by_op[d.op].append(d)
    for op, found in sorted(by_op.items()):
        lines.append("")
        strong = sum(d.significant for d in found)
        lines.append(f"{op}: {len(found)} divergent cases ({strong} significant)")
        for d in found[:per_op]:
            mark = "" if d.significant else "  [not significant]"
            lines.append(f"  {d.case}{mark}")
            lines.append(f"    cpu:    {_outcome_line(d.cpu)}")
            lines.append(f"    device: {_outcome_line(d.device)}")
            for text in d.differs[:4]:
                lines.append(f"    differs: {text}")
            if d.rules and "predicts" in d.rules:
                p = d.rules["predicts"]
                lines.append(
                    f"    rules:  {p.get('sizes')} {tuple(p.get('strides', ()))} {p.get('dtype')}"
                    f"; device departs at {d.rules.get('device_departs_at')}"
                    f", cpu at {d.rules.get('cpu_departs_at')}"
                )
            lines.append(f"    key:    {d.key}")
        if len(found) > per_op:
            lines.append(f"  ... {len(found) - per_op} more (--json lists all)")
    if result.fault is not None:
        lines.append("")
        lines.append(
            f"stopped at {result.fault}: a device fault leaves the device unusable in this "
            f"process; replay the case alone with --key {result.fault} (for CUDA with "
            "CUDA_LAUNCH_BLOCKING=1, so the error is raised by the call that caused it)"
        )
    skipped = sorted(result.skipped.items())
    if skipped:
        lines.append("")
        lines.append("not compared:")
        for (op, reason), n in skipped:
            lines.append(f"  {op}: {n} cases, {reason}")
    return "\n".join(lines)
