"""``threads.parallel_for`` and ``parts``: how a large loop is cut and run on threads.

Truth for ``parts``: the iteration order TensorIterator defines (dim 0 fastest), enumerated
element by element; for ``threads``: ATen's ``at::parallel_for`` rules (runs in order, the
whole range inline while a region runs, ``at::get_num_threads`` parts) and the promise
that the caller returns only after every part has. Races are forced with events, not
waited for.
"""

from __future__ import annotations

import itertools
import math
import os
import threading

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.support.subprocess_run import run_python
from torch_mydev.kernels.copy import kernel as kcopy
from torch_mydev.kernels.jit.compiler import NotCompiled
from torch_mydev.kernels.operand import Operand
from torch_mydev.kernels.parallel import parts, threads


def _linear(index: tuple[int, ...], shape: tuple[int, ...]) -> int:
    return sum(i * math.prod(shape[:d]) for d, i in enumerate(index))


def _walk(start: tuple[int, ...], box: tuple[int, ...]):
    """The multi-indices of a box in iteration order (dim 0 fastest)."""
    for rest in itertools.product(*(range(n) for n in reversed(box))):
        yield tuple(s + i for s, i in zip(start, reversed(rest), strict=True))


@st.composite
def ranges(draw):
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=5)))
    n = math.prod(shape)
    begin = draw(st.integers(0, n))
    return shape, begin, draw(st.integers(begin, n))


@given(ranges())
def test_boxes_cover_the_range_in_order(case):
    shape, begin, end = case
    found = [
        _linear(index, shape)
        for start, box in parts.boxes(shape, begin, end)
        for index in _walk(start, box)
    ]
    assert found == list(range(begin, end))
    assert len(parts.boxes(shape, begin, end)) <= max(2 * len(shape) - 1, 0)


@given(
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=4).map(tuple),
    tile=st.sampled_from((2, 3, 4)),
)
def test_tiled_plans_visit_every_element_once_in_runs_along_dim_1(shape, tile):
    """Each element's offset (strides of a dense plan) once; inside a tile, dim 1 fastest."""
    dense = tuple(math.prod(shape[:d]) for d in range(len(shape)))
    plans = parts.tiled(shape, (dense,), tile)
    seen = []
    for p_shape, (p_strides,), (start,) in plans:
        seen += [start + sum(i * s for i, s in zip(ix, p_strides, strict=True))
                 for ix in _walk((0,) * len(p_shape), p_shape)]  # fmt: skip
    assert sorted(seen) == list(range(math.prod(shape)))
    if len(shape) >= 2 and min(shape[:2]) >= tile:
        first = plans[0]
        assert first[0][:2] == (tile, tile) and first[1][0][:2] == (dense[1], dense[0])


def test_parallel_for_runs_in_order_on_the_threads_asked():
    seen = {}

    def body(begin, end):
        seen[begin] = threading.get_ident()
        return begin, end

    assert threads.parallel_for(10, body, 3) == [(0, 3), (3, 6), (6, 10)]
    assert seen[0] == threading.get_ident() and len(set(seen.values())) >= 2


def test_one_thread_runs_the_whole_range_inline(monkeypatch):
    monkeypatch.setattr(threads, "count", lambda: 1)
    before = threads.regions()
    assert threads.parallel_for(100, lambda b, e: (b, e)) == [(0, 100)]
    assert threads.regions() == before


def test_a_call_inside_a_region_runs_inline():
    inner = []

    def body(begin, end):
        inner.append(threads.parallel_for(end - begin, lambda b, e: (b, e), 2))
        return begin

    assert threads.parallel_for(4, body, 2) == [0, 2]
    assert inner == [[(0, 2)], [(0, 2)]]


def test_the_caller_waits_for_every_part_when_one_raises():
    """Part 0 (the caller's) raises while part 1 still runs: parallel_for returns only after
    part 1 has finished, then raises part 0's error."""
    started, release = threading.Event(), threading.Event()
    finished = []

    def body(begin, end):
        if begin == 0:
            assert started.wait(10)
            threading.Timer(0.05, release.set).start()
            raise ValueError("part 0 failed")
        started.set()
        assert release.wait(10)
        finished.append(begin)
        return begin

    with pytest.raises(ValueError, match="part 0 failed"):
        threads.parallel_for(2, body, 2)
    assert finished == [1]
    assert threads.parallel_for(2, lambda b, e: b, 2) == [0, 1]  # the lock was released


def test_a_worker_error_reaches_the_caller():
    def body(begin, end):
        if begin:
            raise KeyError("worker")
        return 0

    with pytest.raises(KeyError):
        threads.parallel_for(2, body, 2)


def _transpose() -> tuple[bool, int]:
    """A 512 x 512 float32 transpose through the copy kernel: exact? and regions it ran."""
    src = np.arange(1 << 18, dtype=np.float32)
    dst = np.zeros_like(src)
    before = threads.regions()
    kcopy.copy_strided(
        Operand(dst.view(np.uint8), 0, torch.float32, (4, 2048)),
        Operand(src.view(np.uint8), 0, torch.float32, (2048, 4)),
        (512, 512),
    )
    exact = np.array_equal(dst.reshape(512, 512), src.reshape(512, 512).T)
    return exact, threads.regions() - before


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_forked_child_runs_numba_loops_serially_and_python_threads_anew(monkeypatch):
    """After the parent ran numba's parallel loop, a forked child copies serially (numba's
    OpenMP layer would end it), exactly; a child forked while a Python-thread region held
    the lock runs its own regions on its own threads."""
    monkeypatch.setattr(threads, "count", lambda: 2)
    assert _transpose() == (True, 1)
    holding, done = threading.Event(), threading.Event()

    def hold(begin, end):
        if begin == 0:
            holding.set()
            done.wait(10)

    holder = threading.Thread(target=threads.parallel_for, args=(2, hold, 2))
    holder.start()
    assert holding.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        ok = False
        try:
            ok = _transpose() == (True, 0)
            seen = {}

            def body(begin, end):
                seen[begin] = threading.get_ident()
                return begin

            ok = ok and threads.parallel_for(2, body) == [0, 1] and len(set(seen.values())) == 2
        finally:
            os._exit(0 if ok else 1)
    done.set()
    holder.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_split_is_balanced_and_covers_the_range():
    for n, k in ((10, 3), (1, 4), (7, 7), (0, 2)):
        runs = threads.split(n, k)
        assert runs[0][0] == 0 and runs[-1][1] == n
        assert all(a[1] == b[0] for a, b in itertools.pairwise(runs))
        lengths = [e - b for b, e in runs]
        assert max(lengths) - min(lengths) <= 1
    assert np.sum([e - b for b, e in threads.split(100, 7)]) == 100


def test_while_the_parallel_loop_compiles_a_copy_runs_serially(monkeypatch):
    """In background mode a loop not yet compiled raises ``NotCompiled`` (the compiler
    process is at it): the copy then runs its serial loop, exactly, in no region."""

    def compiling(*args):
        raise NotCompiled("run_calls is compiling in the background")

    monkeypatch.setattr(threads, "count", lambda: 2)
    monkeypatch.setattr(threads, "_loop", lambda: compiling)
    assert _transpose() == (True, 0)


def test_while_an_entry_compiles_the_reduction_runs_its_parts_in_order(monkeypatch):
    from torch_mydev.kernels.parallel import _entries as _part_entries

    def compiling(*args):
        raise NotCompiled("the walk's C entry is compiling in the background")

    # whole numbers: every order of the additions gives CPU's sums exactly
    x = torch.arange(301 * 517, dtype=torch.float32).reshape(301, 517) % 11
    monkeypatch.setattr(threads, "count", lambda: 2)
    monkeypatch.setattr(_part_entries, "walk_entry", compiling)
    before = threads.regions()
    got = x.to("mydev").sum(1).cpu()
    assert threads.regions() == before and torch.equal(got, x.sum(1))


_KEEPS_TORCH_THREADS = """
import torch, torch_mydev
from torch_mydev.kernels.parallel import threads
torch.set_num_threads(1)
x = torch.randn(4095, 70)
expected = x.sum(0)  # CPU's serial cascade: one thread
big = x.to("mydev")  # a copy large enough for numba's threads: their pool starts here
assert threads.regions() >= 1, "the copy ran no parallel region"
assert torch.get_num_threads() == 1, torch.get_num_threads()
got = big.sum(0).cpu()
assert torch.equal(got.view(torch.int32), expected.view(torch.int32))
print("ok")
"""


def test_numba_threads_starting_keep_torch_thread_count():
    """numba's OpenMP pool starts with ``omp_set_num_threads`` on the calling thread, which
    is where torch reads its intra-op count: a ``torch.set_num_threads(1)`` made before
    mydev's first parallel loop stays, and a float sum then still takes CPU's serial plan.
    A fresh process, so that this is the pool's first start (sync mode: the copy's loops
    compile in it)."""
    env = {"TORCH_MYDEV_COMPILE": "sync", "NUMBA_NUM_THREADS": "2"}  # two, on any machine
    out = run_python(_KEEPS_TORCH_THREADS, env=env)
    assert out.stdout.strip() == "ok", out.stderr[-2000:]
