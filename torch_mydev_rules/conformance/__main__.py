"""The command line: ``python -m torch_mydev_rules.conformance --device DEVICE``.

Exit status 0 when nothing diverges, 1 when something does, 2 when the run could not
happen (an unknown device, one this machine lacks, an unknown op or dtype).
"""

from __future__ import annotations

import argparse
import sys

import torch

from .catalogue import select
from .devices import DeviceUnavailable, open_device
from .report import table, write_json
from .runner import run, run_key

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m torch_mydev_rules.conformance",
        description="Compare the layouts a device gives with torch CPU's, op by op.",
    )
    parser.add_argument("--device", required=True, help="cpu, meta, cuda, xpu, mps, mydev, ...")
    parser.add_argument("--json", metavar="FILE", help="also write the run as JSON")
    parser.add_argument(
        "--ops",
        nargs="+",
        metavar="OP",
        help="op names or groups (layout, elementwise, reduction, mission, curated); all",
    )
    parser.add_argument("--dtypes", nargs="+", metavar="DTYPE", help="e.g. float32 int64")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=40, help="cases per op (default 40)")
    parser.add_argument(
        "--budget", type=float, metavar="SECONDS", help="stop after the round that passes it"
    )
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import a backend package first (one torch does not autoload)",
    )
    parser.add_argument(
        "--key",
        metavar="SEED/OP/ROUND",
        help="run only this case (a report's key): to replay one divergence or device fault",
    )
    parser.add_argument("--show", type=int, default=5, help="divergent cases shown per op")
    return parser


def _dtypes(names: list[str] | None) -> list[torch.dtype] | None:
    if names is None:
        return None
    dtypes = []
    for name in names:
        dtype = getattr(torch, name.removeprefix("torch."), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"unknown dtype {name!r}")
        dtypes.append(dtype)
    return dtypes


def _key_op(key: str) -> str:
    parts = key.split("/")
    if len(parts) != 3 or not parts[2].isdigit():
        raise ValueError(f"a key is SEED/OP/ROUND, as a report prints it, not {key!r}")
    return parts[1]


def main(argv: list[str] | None = None) -> int:
    """Run the kit; returns the exit status (0 agree, 1 diverge, 2 could not run)."""
    args = _parser().parse_args(argv)
    try:
        ops = select(args.ops if args.key is None else [_key_op(args.key)])
        dtypes = _dtypes(args.dtypes)
        device = open_device(args.device, tuple(args.imports))
    except (DeviceUnavailable, ValueError) as error:
        print(f"conformance: cannot run: {error}", file=sys.stderr)
        return 2
    if args.key is not None:
        result = run_key(device, args.key, ops, dtypes)
    else:
        result = run(
            device, ops, seed=args.seed, rounds=args.rounds, budget=args.budget, dtypes=dtypes
        )
    print(table(result, per_op=args.show))
    if args.json:
        write_json(result, args.json)
    return 1 if result.divergences else 0


if __name__ == "__main__":
    sys.exit(main())
