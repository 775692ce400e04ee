"""Eight threads making their first mydev call at once: numba's target set-up runs once.

Without the lock in ``kernels.load_numba_modules`` a cold interpreter raised
``ValueError: generator already executing`` from numba in about one run of three. Each run
needs a fresh interpreter (the set-up happens once per process), so it runs in subprocesses.
"""

import subprocess
import sys

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
    for _ in range(3):
        subprocess.run([sys.executable, "-c", SCRIPT], check=True, timeout=120)
