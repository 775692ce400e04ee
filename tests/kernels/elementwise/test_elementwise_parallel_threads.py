"""Threads making their first large elementwise call at once: one runs the parallel loop
(compiling or loading it once), the others run the serial one meanwhile; all results match.

Each run needs a fresh interpreter (the loops load once per process), so it runs in a
subprocess, as ``test_first_use_threads.py`` does.
"""

from tests.support.subprocess_run import run_python

SCRIPT = """
import threading, torch, torch_mydev
errors, results = [], [None] * 6
barrier = threading.Barrier(6)
a = torch.randn(1, 64, 32, 32).contiguous(memory_format=torch.channels_last)
b = torch.randn(1, 64, 32, 32)
x = torch.randn(1 << 21)
def first_call(i):
    try:
        da, db, dx = a.to("mydev"), b.to("mydev"), x.to("mydev")
        barrier.wait()
        results[i] = ((da + db).cpu(), torch.relu(dx).cpu(), (da > db).cpu(), (-dx).cpu())
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=first_call, args=(i,)) for i in range(6)]
for t in threads: t.start()
for t in threads: t.join()
assert not errors, errors
expected = (a + b, torch.relu(x), a > b, -x)
for r in results:
    for got, want in zip(r, expected):
        assert got.stride() == want.stride() and torch.equal(got, want)
"""


def test_threads_first_large_calls_at_once():
    run_python(SCRIPT, timeout=300)
