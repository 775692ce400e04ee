"""The measuring part of the benchmarks: modes, rows, alternating timing, shared shapes.

Every case module (``cases_*.py``) times with ``time_pair`` and appends ``Row``s to a
``Results``; ``report.py`` renders them.
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

import torch_mydev
from torch_mydev.kernels.copy import kernel as kernel_copy

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mode:
    """How long to measure: repeats per case, seconds per repeat, element counts, cold runs."""

    name: str
    repeats: int
    seconds: float
    sizes: dict[str, int]
    big: int
    cold_runs: int


MODES = {
    "full": Mode("full", 11, 0.05, {"1K": 1 << 10, "64K": 1 << 16, "16M": 1 << 24}, 1 << 24, 15),
    "quick": Mode("quick", 5, 0.01, {"1K": 1 << 10, "64K": 1 << 16, "16M": 1 << 24}, 1 << 24, 3),
    "smoke": Mode("smoke", 1, 0.0, {"1K": 1 << 10, "4K": 1 << 12}, 1 << 12, 0),
}


@dataclass
class Row:
    """One line of the table: median seconds per call of mydev and of the reference."""

    case: str
    size: str
    mydev: float | None
    ref: float | None
    ref_name: str = "torch CPU"
    path: str = ""
    noise: float | None = None  # largest (max - min) / median of the two sides' repeats

    @property
    def ratio(self) -> float | None:
        if self.mydev is None or self.ref is None:
            return None
        return self.mydev / self.ref


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    memory: list[tuple[str, int, int]] = field(default_factory=list)
    floors: list[tuple[str, float]] = field(default_factory=list)


# ---- timing ---------------------------------------------------------------------------------


def loop_seconds(fn: Callable[[], object], number: int) -> float:
    """Seconds per call of ``number`` calls (garbage collection off, as timeit does)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(number):
            fn()
        return (time.perf_counter() - start) / number
    finally:
        if enabled:
            gc.enable()


def _warm_up(fn: Callable[[], object]) -> None:
    """Three calls: a layout's first call plans (a first copy without numba), the second
    loads its loop and records the stub's replay, the third replays; none of those one-off
    costs may size the repeats (``_calls_for``)."""
    for _ in range(3):
        fn()


def _calls_for(fn: Callable[[], object], seconds: float) -> int:
    """How many calls make one repeat last about ``seconds`` (at least one)."""
    once = loop_seconds(fn, 1)
    if once >= seconds:
        return 1
    number = max(1, int(seconds / max(once, 1e-7)))
    return max(1, int(number * seconds / max(loop_seconds(fn, number) * number, 1e-9)))


def spread(times: list[float]) -> float:
    return (max(times) - min(times)) / statistics.median(times)


def time_pair(
    mode: Mode, mydev: Callable[[], object], ref: Callable[[], object]
) -> tuple[float, float, float]:
    """Median seconds per call of each, repeats alternating so both see the same load, and
    the noise: the larger relative spread (max - min) / median of the two."""
    _warm_up(mydev)
    _warm_up(ref)
    n_mydev = _calls_for(mydev, mode.seconds)
    n_ref = _calls_for(ref, mode.seconds)
    a, b = [], []
    for _ in range(mode.repeats):
        a.append(loop_seconds(mydev, n_mydev))
        b.append(loop_seconds(ref, n_ref))
    return statistics.median(a), statistics.median(b), max(spread(a), spread(b))


def time_one(mode: Mode, fn: Callable[[], object]) -> float:
    _warm_up(fn)
    number = _calls_for(fn, mode.seconds)
    return statistics.median(loop_seconds(fn, number) for _ in range(mode.repeats))


# ---- what the kernel does -------------------------------------------------------------------


def copy_path(report: torch_mydev.Report, itemsize: int) -> str:
    """The loop ``copy_strided`` takes for the plan ``explain`` reports (same dtype)."""
    if report.coalesced_shape is None:
        return "no copy"
    dst, src = report.coalesced_stride_bytes
    return kernel_copy.plan_path(itemsize, report.coalesced_shape, dst, src)


def native_path(op: str) -> str:
    """``native`` when mydev registers the overload ``op`` (``"add.Tensor"``) itself, else
    ``CPU fallback``."""
    if torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", "PrivateUse1"):
        return "native"
    return "CPU fallback"


def add_path() -> str:
    """``native_path`` of ``add.Tensor``."""
    return native_path("add.Tensor")


def nchw(n: int) -> tuple[int, int, int, int]:
    """An N, C, H, W shape of ``n`` elements (n a power of two, at least 1K)."""
    shapes = {1 << 10: (1, 16, 8, 8), 1 << 12: (1, 16, 16, 16), 1 << 16: (1, 64, 32, 32)}
    return shapes.get(n, (n // (64 * 128 * 128), 64, 128, 128))


def square(n: int) -> int:
    return math.isqrt(n)


def try_pair(
    mode: Mode, out: Results, case: str, size: str, mydev, ref, path: Callable[[], str]
) -> None:
    """A row for an op mydev may not run yet: its error becomes the row's note."""
    try:
        mine, theirs, noise = time_pair(mode, mydev, ref)
    except (NotImplementedError, RuntimeError) as error:
        first = str(error).splitlines()[0]
        out.rows.append(Row(case, size, None, None, path=f"not run: {first[:60]}"))
        return
    out.rows.append(Row(case, size, mine, theirs, path=path(), noise=noise))


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a measured child: this one, with Python's bytecode cache on (as
    numba's is: both caches are warm after the first run) and ``extra`` set."""
    env = dict(os.environ)
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(extra)
    return env


def find(results: Results, case: str, size: str | None = None, ref: str = "torch CPU") -> list[Row]:
    return [
        r
        for r in results.rows
        if r.case.startswith(case) and (size is None or r.size == size) and r.ref_name == ref
    ]


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def fmt_ratio(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"
