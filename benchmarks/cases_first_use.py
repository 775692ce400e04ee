"""Benchmark cases of first use with an empty numba cache (docs/first-use.md).

Every figure comes from a fresh child process (``first_use_child.py``) whose
``NUMBA_CACHE_DIR`` is a new empty directory, in the default ``background`` compile mode:

- each native op family's first and second call on mydev, in one process, against the same
  calls in a fresh torch CPU process (``TORCH_DEVICE_BACKEND_AUTOLOAD=0``). A process of its
  own for the reference, rather than CPU calls before the mydev ones in the same process:
  those would pay torch's own first-call costs (lazy kernel set-up, the first TensorIterator
  of a dtype, the thread pool) for the mydev calls, which run CPU's kernel while their loop
  compiles, and mydev's first calls would look cheaper than a new user's;
- float32 ``add``'s first call in ``sync`` mode (the old behaviour: the caller compiles)
  against the same call in background mode, numba loaded in both beforehand;
- the first 3 training steps of ``examples/cnn.py`` and ``examples/transformer.py`` (after
  imports and set-up) against the same steps in a fresh process whose cache is warm: the
  default cache, which a ``sync`` run of the same steps fills first (unmeasured).

Cold children compile in the background on a machine of two cores, so these are the most
expensive rows: ``--quick`` runs each child once and skips the sync row, ``--smoke`` none.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness import Mode, Results, Row, child_env, fmt_time, spread

CHILD = Path(__file__).resolve().parent / "first_use_child.py"
FIRST_CALL = "first call, empty cache: "
STEPS = 3
TRAIN = f"first {STEPS} train steps, empty cache: examples/"
SYNC = "first call, sync mode (the old behaviour): add float32"


def _repeats(mode: Mode) -> int:
    return {"full": 3, "quick": 1}.get(mode.name, 0)


def _child(args: list[str], cold: str | None, **env: str) -> dict:
    """Run ``first_use_child.py args`` and return its JSON; ``cold``: a folder in which the
    child gets a new empty cache of its own (else it uses the default cache)."""
    if cold:
        env = {"NUMBA_CACHE_DIR": tempfile.mkdtemp(dir=cold), **env}
    done = subprocess.run(
        [sys.executable, str(CHILD), *args],
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def _served(stats: dict[str, int]) -> int:
    return sum(v for k, v in stats.items() if k.startswith("served_on_cpu:"))


def bench_first_use(mode: Mode, out: Results) -> None:
    """The cold rows: first calls, the sync-mode call, the first training steps."""
    repeats = _repeats(mode)
    if repeats == 0:
        reason = "skipped (--smoke): fresh processes with an empty numba cache"
        print(f"  ... first-use rows {reason}", file=sys.stderr)
        out.rows.append(
            Row(f"{FIRST_CALL}every native op", "-", None, None, "torch CPU, first call", reason)
        )
        out.rows.append(Row(SYNC, "64x32", None, None, "mydev background", reason))
        for example in ("cnn.py", "transformer.py"):
            out.rows.append(Row(TRAIN + example, "-", None, None, "mydev, warm cache", reason))
        return
    # The empty caches live in one folder, removed at the end: a child's compiler process
    # (killed at the child's exit) may still write one file after the child is gone.
    with tempfile.TemporaryDirectory(prefix="mydev-cold-", ignore_cleanup_errors=True) as root:
        _first_calls(repeats, out, root)
        if mode.name == "full":
            _sync_call(out, root)
        else:
            reason = "skipped (--quick): compiles in the caller for seconds"
            out.rows.append(Row(SYNC, "64x32", None, None, "mydev background", reason))
        _train_steps(repeats, out, root)


def _first_calls(repeats: int, out: Results, root: str) -> None:
    """Each case's first and second call, mydev and CPU children alternating."""
    mydev, cpu = [], []
    for _ in range(repeats):
        mydev.append(_child(["ops", "mydev"], cold=root, TORCH_MYDEV_COMPILE="background"))
        cpu.append(_child(["ops", "cpu"], cold=None, TORCH_DEVICE_BACKEND_AUTOLOAD="0"))
    for index, name in enumerate(mydev[0]["cases"]):
        firsts = [run["cases"][name]["seconds"][0] for run in mydev]
        seconds = [run["cases"][name]["seconds"][1] for run in mydev]
        ref_firsts = [run["cases"][name]["seconds"][0] for run in cpu]
        ref_seconds = [run["cases"][name]["seconds"][1] for run in cpu]
        served = sum(sum(run["cases"][name]["served"]) for run in mydev)
        note = (
            f"2nd call {fmt_time(statistics.median(seconds))} vs "
            f"{fmt_time(statistics.median(ref_seconds))}; CPU served {served}/{2 * repeats}"
        )
        if index == 0:
            note += "; loads numba"
        noise = max(spread(firsts), spread(ref_firsts)) if repeats > 1 else None
        out.rows.append(
            Row(
                FIRST_CALL + name,
                mydev[0]["cases"][name]["size"],
                statistics.median(firsts),
                statistics.median(ref_firsts),
                "torch CPU, first call",
                note,
                noise,
            )
        )
    queued = statistics.median(run["stats"].get("queued", 0) for run in mydev)
    print(f"  ... first calls: {queued:.0f} loops queued per process", file=sys.stderr)


def _sync_call(out: Results, root: str) -> None:
    """float32 add's first call compiled in the caller, against background mode; numba is
    loaded before the call in both, so the difference is the compile."""
    args = ["ops", "mydev", "--preload-numba", "--once", "add float32"]
    sync = _child(args, cold=root, TORCH_MYDEV_COMPILE="sync")
    background = _child(args, cold=root, TORCH_MYDEV_COMPILE="background")
    compiled = sync["stats"].get("compiled_in_caller", 0)
    out.rows.append(
        Row(
            SYNC,
            "64x32",
            sync["cases"]["add float32"]["seconds"][0],
            background["cases"]["add float32"]["seconds"][0],
            "mydev background",
            f"{compiled} loops compiled in the caller; one run",
        )
    )


def _train_steps(repeats: int, out: Results, root: str) -> None:
    """The first ``STEPS`` steps of each example: empty cache against a warm one."""
    for example in ("cnn", "transformer"):
        # Fill the default cache with every loop these steps need (unmeasured).
        _child(["steps", example, str(STEPS)], cold=None, TORCH_MYDEV_COMPILE="sync")
        cold, warm = [], []
        for _ in range(repeats):
            args = ["steps", example, str(STEPS)]
            cold.append(_child(args, cold=root, TORCH_MYDEV_COMPILE="background"))
            warm.append(_child(args, cold=None, TORCH_MYDEV_COMPILE="background"))
        cold_totals = [sum(run["seconds"]) for run in cold]
        warm_totals = [sum(run["seconds"]) for run in warm]
        first = statistics.median(run["seconds"][0] for run in cold)
        served = statistics.median(_served(run["stats"]) for run in cold)
        queued = statistics.median(run["stats"].get("queued", 0) for run in cold)
        warm_queued = max(run["stats"].get("queued", 0) for run in warm)
        note = (
            f"cold step 1 {fmt_time(first)}; {served:.0f} calls CPU-served, "
            f"{queued:.0f} loops queued; warm: {warm_queued} queued"
        )
        noise = max(spread(cold_totals), spread(warm_totals)) if repeats > 1 else None
        out.rows.append(
            Row(
                f"{TRAIN}{example}.py",
                "3 steps",
                statistics.median(cold_totals),
                statistics.median(warm_totals),
                "mydev, warm cache",
                note,
                noise,
            )
        )
