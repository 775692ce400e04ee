"""Runs a loop over parts of its range on threads: ATen's ``at::parallel_for``, two ways.

``parallel_calls(parts)``: the numba loops. Each part is a list of calls of C entry points
(``jit._replay_abi.C_SIGNATURE``: a serial loop told the part of its range to walk); numba's
threads run the parts (``parallel._calls.run_calls``, the package's one ``parallel=True``
function, compiled once for every loop and dtype). A launch costs what numba's costs, a few
microseconds. It runs from ``copy.loops.PARALLEL_MIN_NUMEL`` elements, in the process that
first ran one (``copy.loops.parallel_allowed``: numba's OpenMP layer ends a forked child
that launches after its parent did), and not while the loop or an entry is still compiling
in the background: the caller then runs its serial loop.

``parallel_for(n, body, parts)``: Python callables over runs of ``[0, n)``, the first on the
caller and the others on this process's pool of Python threads (the casts, whose chunks
call several numba loops each). The numba loops release the GIL; a launch costs about
50 us here (a thread's wake-up), so the casts go parallel in chunks of ``CAST_CHUNK``.

Rules, as ATen's:

- One parallel region at a time: a call while another thread's region runs, or from inside
  a part, runs its whole range on the caller (``at::parallel_for`` inside a parallel region
  runs inline).
- The caller returns only after every part has: when a part raises, or Ctrl-C arrives while
  the caller waits, it still waits for the parts already running (they write into buffers
  the caller may free), then raises.
- A forked child makes its own pool and lock; at interpreter exit, when the pool takes no
  new work, the parts run on the caller.
- torch's intra-op thread count is the user's: numba's pool, whose start sets it to numba's
  count on the starting thread, is started here and the count put back (``count``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from typing import TypeVar

import numpy as np

from torch_mydev.kernels import numba_module

__all__ = [
    "call_table",
    "count",
    "parallel_calls",
    "parallel_for",
    "regions",
    "run_calls",
    "split",
]

T = TypeVar("T")

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_key: tuple[int, int] | None = None
_regions = 0
_launch_lock = threading.Lock()  # apart from _lock: a region's part may ask count()
_numba_launched = False


def count() -> int:
    """Parts a parallel loop is cut in: numba's thread count (``numba.get_num_threads``). The
    first call starts numba's pool (``_launch_numba``)."""
    import numba

    _launch_numba()
    return max(1, numba.get_num_threads())


def _launch_numba() -> None:
    """Start numba's thread pool once, keeping torch's intra-op thread count.

    numba's OpenMP layer starts its pool with ``omp_set_num_threads(NUMBA_NUM_THREADS)`` on
    the calling thread, and torch's count is that thread's ``omp_get_max_threads()``
    (``at::get_num_threads``): a user's ``torch.set_num_threads(1)`` was lost at mydev's
    first parallel loop, and with it CPU's serial plan the float replicas follow."""
    global _numba_launched
    if _numba_launched:
        return
    import torch
    from numba.np.ufunc import parallel

    with _launch_lock:
        if _numba_launched:  # another thread started it meanwhile
            return
        # The launching thread's count, put back through torch (which sets its own
        # process-wide count and MKL's to the same): what the user set there stays.
        threads = torch.get_num_threads()
        parallel._launch_threads()
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        _numba_launched = True


def regions() -> int:
    """Parallel regions this process has run (tests read it to see a call went parallel)."""
    return _regions


def split(n: int, parts: int) -> list[tuple[int, int]]:
    """``[0, n)`` in ``parts`` runs whose lengths differ by at most one, in order."""
    return [(p * n // parts, (p + 1) * n // parts) for p in range(parts)]


def parallel_for(n: int, body: Callable[[int, int], T], parts: int | None = None) -> list[T]:
    """``body(begin, end)`` over ``parts`` (default ``count()``) runs of ``[0, n)``, the
    first on the caller and the rest on threads; their results in order.

    Runs ``body(0, n)`` on the caller alone (one result) when there is one part, or while
    another parallel region runs.
    """
    parts = min(count() if parts is None else parts, n)
    if parts <= 1 or not _lock.acquire(blocking=False):
        return [body(0, n)]
    global _regions
    try:
        _regions += 1
        bounds = split(n, parts)
        pool = _thread_pool(parts - 1)
        futures: list[Future | None] = [_submit(pool, body, *run) for run in bounds[1:]]
        try:
            results = [body(*bounds[0])]
            for future, run in zip(futures, bounds[1:], strict=True):
                results.append(body(*run) if future is None else future.result())
            return results
        finally:
            wait_all([f for f in futures if f is not None])
    finally:
        _lock.release()


def parallel_calls(parts: list[list[tuple[int, int, int, int, int]]]) -> int | None:
    """Each part's calls (C entry address and its four arguments), in order, the parts on
    numba's threads; the largest status the entries returned. None, having called nothing,
    while the parallel loop compiles in the background or another region runs: the caller
    then runs serially."""
    return run_calls(*call_table(parts))


def call_table(parts: list[list[tuple[int, ...]]]) -> tuple[np.ndarray, np.ndarray]:
    """``parts`` as ``run_calls`` takes them: one row a call (``int64[calls, 5]``) and the
    first row of each part (``int64[parts + 1]``, the last one past the end)."""
    rows = [row for calls in parts for row in calls]
    starts = np.cumsum([0, *(len(calls) for calls in parts)], dtype=np.int64)
    return np.array(rows, dtype=np.int64).reshape(len(rows), 5), starts


def run_calls(calls: np.ndarray, starts: np.ndarray) -> int | None:
    """``parallel_calls`` of a table made by ``call_table`` (a caller that repeats a layout
    keeps its table and sets the addresses in it)."""
    from torch_mydev.kernels.jit.compiler import NotCompiled

    _launch_numba()
    if not _lock.acquire(blocking=False):
        return None
    global _regions
    try:
        status = _loop()(calls, starts)
    except NotCompiled:
        return None
    finally:
        _lock.release()
    _regions += 1
    return int(status)


def _loop() -> Callable:
    """``parallel._calls.run_calls``, imported with numba's target readied on first use."""
    return numba_module("parallel._calls").run_calls


def _submit(pool: ThreadPoolExecutor, body: Callable, begin: int, end: int) -> Future | None:
    try:
        return pool.submit(body, begin, end)
    except RuntimeError:  # the interpreter is exiting: the pool takes no new work
        return None


def _thread_pool(workers: int) -> ThreadPoolExecutor:
    """This process's threads (a forked child gets its own: threads do not survive a fork)."""
    global _pool, _pool_key
    key = (os.getpid(), workers)
    if _pool is None or _pool_key != key:
        _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mydev-parallel")
        _pool_key = key
    return _pool


def _after_fork_in_child() -> None:
    global _lock, _launch_lock
    _lock = threading.Lock()  # a region running in the parent at the fork never ends here
    _launch_lock = threading.Lock()  # nor a start of numba's pool


os.register_at_fork(after_in_child=_after_fork_in_child)
