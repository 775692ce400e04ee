"""Benchmark cases that run other processes: cold start and a 2-process all_reduce."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
from harness import Mode, Results, Row, child_env, loop_seconds, spread

COLD_MYDEV = "import torch; x=torch.randn(64,64).t(); x.to('mydev').contiguous()"
COLD_TORCH = "import torch; x=torch.randn(64,64).t(); x.contiguous()"
COLD_NUMBA = COLD_TORCH + "; import numba"
# One add after the copies: the program needs a numba loop, so it loads numba.
COLD_MYDEV_ADD = COLD_MYDEV + "; y=x.to('mydev'); y + y"
COLD_TORCH_ADD = COLD_TORCH + "; x + x"


def bench_cold_start(mode: Mode, out: Results) -> None:
    """A fresh interpreter: import torch (autoloading mydev) and one transpose copy."""
    case = "cold start (subprocess)"
    if mode.cold_runs == 0:
        out.rows.append(Row(case, "64x64", None, None, "torch alone", "skipped (--smoke)"))
        return
    env_mydev = child_env()
    env_torch = child_env(TORCH_DEVICE_BACKEND_AUTOLOAD="0")

    def run(code: str, env: dict[str, str]) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
        return time.perf_counter() - start

    run(COLD_MYDEV, env_mydev)  # fills numba's on-disk cache and the .pyc files if empty
    run(COLD_TORCH, env_torch)
    a, b, c, d, e = [], [], [], [], []
    for _ in range(mode.cold_runs):
        a.append(run(COLD_MYDEV, env_mydev))
        b.append(run(COLD_TORCH, env_torch))
        c.append(run(COLD_NUMBA, env_torch))
        d.append(run(COLD_MYDEV_ADD, env_mydev))
        e.append(run(COLD_TORCH_ADD, env_torch))
    note = "numba and .pyc caches warm"
    torch_alone = statistics.median(b)
    noise = max(spread(a), spread(b), spread(c), spread(d), spread(e))
    out.rows.append(
        Row(case, "64x64", statistics.median(a), torch_alone, "torch alone", note, noise)
    )
    note = "copies need no numba: what importing it would add"
    out.rows.append(
        Row(
            "cold start: torch + import numba",
            "64x64",
            statistics.median(c),
            torch_alone,
            "torch alone",
            note,
            noise,
        )
    )
    note = "an add after the copies: numba loads (not a target)"
    out.rows.append(
        Row(
            "cold start: copies, then one add",
            "64x64",
            statistics.median(d),
            statistics.median(e),
            "torch alone",
            note,
            noise,
        )
    )


ALLREDUCE_SIZES = {"1 MB": (1 << 18, 20), "64 MB": (1 << 24, 3)}  # float32 elements, calls


def bench_allreduce(mode: Mode, out: Results) -> None:
    """``all_reduce`` (SUM, float32) between 2 spawned processes: mydev tensors through the
    ``mydev`` backend (gloo on CPU aliases, docs/distributed.md) against gloo on CPU tensors,
    alternating in the same processes. Each repeat is a fixed number of calls (the same on
    both ranks), timed on rank 0 after a barrier; the note gives the algorithm bandwidth
    (bytes / time) of each side."""
    case, ref_name = "all_reduce, 2 processes", "gloo, CPU tensors"
    if mode.name == "smoke":
        reason = "skipped (--smoke): spawns 2 processes"
        print(f"  ... all_reduce rows {reason}", file=sys.stderr)
        out.rows.append(Row(case, "-", None, None, ref_name, reason))
        return
    import tempfile

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        init, result = f"file://{tmp}/init", f"{tmp}/allreduce.json"
        mp.spawn(_allreduce_child, args=(init, mode.repeats, result), nprocs=2, join=True)
        times = json.loads(Path(result).read_text())
    for label, (mine, ref, noise) in times.items():
        nbytes = ALLREDUCE_SIZES[label][0] * 4
        note = f"{nbytes / mine / 1e9:.2f} vs {nbytes / ref / 1e9:.2f} GB/s"
        out.rows.append(Row(case, label, mine, ref, ref_name, note, noise))


def _allreduce_child(rank: int, init: str, repeats: int, result: str) -> None:
    """One of the 2 processes of ``bench_allreduce``; rank 0 writes the medians."""
    import torch.distributed as dist

    dist.init_process_group(init_method=init, rank=rank, world_size=2)
    cpu_group = dist.new_group(backend="gloo")
    times = {}
    for label, (n, number) in ALLREDUCE_SIZES.items():
        dev, cpu = torch.zeros(n, device="mydev"), torch.zeros(n)
        calls = (
            lambda d=dev: dist.all_reduce(d),
            lambda c=cpu: dist.all_reduce(c, group=cpu_group),
        )
        for call in calls:  # warm up
            call()
            call()
        a, b = [], []
        for _ in range(repeats):
            for call, seen in zip(calls, (a, b), strict=True):
                dist.barrier(group=cpu_group)
                seen.append(loop_seconds(call, number))
        times[label] = (statistics.median(a), statistics.median(b), max(spread(a), spread(b)))
        del dev, cpu, calls
    if rank == 0:
        Path(result).write_text(json.dumps(times))
    dist.destroy_process_group()
