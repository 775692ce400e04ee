"""Eight threads making their first mydev call at once: numba's target set-up runs once.

Without the lock in ``kernels.load_numba_modules`` a cold interpreter raised
``ValueError: generator already executing`` from numba in about one run of three. The
end-to-end run needs a fresh interpreter (the set-up happens once per process), so it runs in
a subprocess, once; ``test_loading_refresh_never_overlaps_a_compile`` forces the
interleaving that raised, in this process, rather than waiting for it over several runs.
"""

import threading

from tests.support.subprocess_run import run_python

SCRIPT = """
import threading, torch, torch_mydev
errors, results = [], [None] * 8
barrier = threading.Barrier(8)
def first_call(i):
    try:
        barrier.wait()
        x = torch.arange(1000, dtype=torch.float32).to("mydev")
        results[i] = (x * 2 + x).t().contiguous().cpu()
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=first_call, args=(i,)) for i in range(8)]
for t in threads: t.start()
for t in threads: t.join()
assert not errors, errors
assert all(torch.equal(r, torch.arange(1000.0) * 3) for r in results)
"""


def test_eight_threads_first_use_at_once():
    """Once, end to end; the race itself is forced below, not waited for over several runs."""
    run_python(SCRIPT, timeout=120)


def test_loading_refresh_never_overlaps_a_compile(monkeypatch):
    """Force the interleaving: one thread holds ``load_numba_modules``'s target refresh open
    while another compiles. numba refreshes the same context at the start of every compile
    (and cache load); two refreshes at once walk one registry loader twice, which raised
    ``ValueError: generator already executing``. The loading thread waits inside its refresh
    for the compiling thread to enter one too; with the loader holding numba's compiler lock
    the compiling thread cannot, so at most one refresh ever runs."""
    import numba
    from numba.core.registry import cpu_target

    from torch_mydev import kernels

    kernels.load_numba_modules("copy._strided")  # numba imported and its target ready
    context = cpu_target.target_context
    original = context.refresh
    state = threading.Lock()
    inside = [0, 0]  # refreshes running now, most ever at once
    loader_inside, second_inside = threading.Event(), threading.Event()

    def refresh():
        with state:
            inside[0] += 1
            inside[1] = max(inside[1], inside[0])
            if inside[0] > 1:
                second_inside.set()
        try:
            if threading.current_thread() is loader:
                loader_inside.set()
                second_inside.wait(timeout=2.0)  # hold the window open for the compile
            original()
        finally:
            with state:
                inside[0] -= 1

    monkeypatch.setattr(context, "refresh", refresh)
    errors = []

    def load():
        try:
            kernels.load_numba_modules("copy._strided")
        except Exception as exc:
            errors.append(exc)

    def compile_new():
        try:
            assert numba.njit(lambda v: v * 3 + 1)(2) == 7  # a new function: a real compile
        except Exception as exc:
            errors.append(exc)

    loader = threading.Thread(target=load)
    loader.start()
    assert loader_inside.wait(timeout=60)
    compiler = threading.Thread(target=compile_new)
    compiler.start()
    loader.join()
    compiler.join()
    assert not errors, errors
    assert inside[1] == 1, "a compile refreshed numba's target during the loader's refresh"
