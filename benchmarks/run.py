"""Benchmarks of mydev against torch CPU (and numpy), both measured in the same run.

``make bench`` runs this file: each case times the mydev call and its reference call in
alternating repeats, reports the median time per call of each and the ratio
mydev / reference, and names the loop the copy kernel chose (``plan_path``). After the
table come the issue's targets, each with the figure it is judged on, the peak extra memory
of ``clone``, and the machine (``lscpu`` model, cores, versions, load average before and
after: the machine may be shared, so read ratios, not absolute times, across runs).

Options: ``--quick`` (same sizes, fewer and shorter repeats), ``--smoke`` (tiny sizes, one
repeat, no cold-start subprocesses: checks that the script runs), ``--write-doc`` (replace
the generated part of ``docs/performance.md`` with this run's tables).

The warm rows time mydev's own loops, so this process compiles a missing loop where it is
first asked for (``TORCH_MYDEV_COMPILE=sync``, unless set otherwise): in the default
background mode a cold cache would have CPU's kernel serve the timed calls meanwhile. The
first-use rows (``cases_first_use.py``) set each child's mode themselves.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TORCH_MYDEV_COMPILE", "sync")  # before torch's import loads mydev

import cases_copy
import cases_first_use
import cases_models
import cases_ops
import cases_planes
import cases_process
import cases_real_models
import cases_reduction
import cases_relu
from harness import MODES, Results
from report import DOC, ROOT, render, write_doc

BENCHES = (
    cases_copy.bench_small_ops,
    cases_copy.bench_layouts,
    cases_planes.bench_tiny_channels,
    cases_copy.bench_contiguous_copy,
    cases_copy.bench_casts,
    cases_copy.bench_broadcast,
    cases_ops.bench_add,
    cases_ops.bench_fallback,
    cases_ops.bench_eager_chains,
    cases_relu.bench_relu,
    cases_reduction.bench_reductions,
    cases_models.bench_train_steps,
    cases_real_models.bench_real_models,
    cases_copy.bench_clone_memory,
    cases_copy.bench_floors,
    cases_copy.bench_thp_reference,
    cases_ops.bench_compile,
    cases_process.bench_allreduce,
    cases_process.bench_cold_start,
    cases_first_use.bench_first_use,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="fewer, shorter repeats")
    group.add_argument("--smoke", action="store_true", help="tiny sizes: check that it runs")
    parser.add_argument("--write-doc", action="store_true", help=f"refresh {DOC.name}")
    args = parser.parse_args(argv)
    mode = MODES["smoke" if args.smoke else "quick" if args.quick else "full"]
    load_before = os.getloadavg()
    results = Results()
    for bench in BENCHES:
        bench(mode, results)
        print(f"  ... {bench.__name__.removeprefix('bench_')} done", file=sys.stderr, flush=True)
    text = render(results, mode, load_before, os.getloadavg())
    print(text)
    if args.write_doc:
        write_doc(text)
        print(f"\nwrote the tables into {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
