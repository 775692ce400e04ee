"""First use with no numba cache: no call waits for a compile (kernels/jit/compiler.py).

Each case runs in a fresh interpreter with an empty ``NUMBA_CACHE_DIR`` and
``TORCH_MYDEV_COMPILE=background``, the way a new user meets the device. The truth is torch
CPU: every result has CPU's bits, sizes and strides whichever path served it, and the
compiler's counts say which path that was. No test measures a time.
"""

import os
import subprocess
import sys
import tempfile

import pytest

from tests.support.subprocess_run import run_python

_PRELUDE = """
import torch
from torch_mydev.kernels.jit import compiler
import torch_mydev
from numba.core import event
assert compiler.mode == "background", compiler.mode  # read from TORCH_MYDEV_COMPILE

compiles = []  # compiles of torch_mydev loops that ran to the end in this process
class Seen(event.Listener):
    def on_start(self, e):
        pass
    def on_end(self, e):
        func = e.data["dispatcher"].py_func
        failed = (e._exc_details or (None,))[0] is not None  # numba's is_failed is inverted
        if func.__module__.startswith("torch_mydev") and not failed:
            compiles.append(func.__qualname__)

def compile_child():  # the compiler's child process, once the worker has started it
    import time
    for _ in range(600):
        with compiler._lock:
            child = compiler._child
        if child is not None:
            return child
        time.sleep(0.05)
    raise AssertionError("the compiler started no child")

def check(name, fn, *inputs):
    expected = fn(*inputs)
    got = fn(*[t.to("mydev") for t in inputs])
    assert got.device.type == "mydev", name
    assert got.dtype == expected.dtype and got.shape == expected.shape, name
    assert got.stride() == expected.stride(), (name, got.stride(), expected.stride())
    got, expected = got.cpu().reshape(-1), expected.reshape(-1)
    if expected.dtype.is_floating_point:  # the same bits, NaN payloads and signed zeros too
        got, expected = got.view(torch.uint8), expected.view(torch.uint8)
    assert torch.equal(got, expected), name
"""

_FIRST_CALLS = """
import numba  # noqa: loaded by the first copy anyway
event.register("numba:compile", Seen())
g = torch.Generator().manual_seed(0)
x = torch.randn(64, 32, generator=g)
big = torch.randn(512, 1024, generator=g)
cl = torch.randn(2, 3, 8, 8, generator=g).to(memory_format=torch.channels_last)
i = torch.randint(-50, 50, (64, 32), generator=g)
f64 = torch.float64
empty_t = lambda device: torch.empty(32, 64, dtype=torch.float16, device=device).t()
cases = [
    ("add", lambda t: t + t, x),
    ("add int", lambda t: t + 3, i),
    ("mul bf16", lambda t: t.bfloat16() * t.bfloat16(), x),
    ("div", lambda t: t / 3, x),
    ("cast f16", lambda t: t.half(), x),
    ("cast int->f64", lambda t: t.double(), i),
    ("transpose copy", lambda t: t.t().contiguous(), x),
    ("where", lambda t: torch.where(t < 0, t, -t), x),
    ("relu channels_last", torch.relu, cl),
    ("compare", lambda t: t > 0.5, x),
    ("neg", torch.neg, i),
    ("sum", lambda t: t.sum(1), x),
    ("mean", lambda t: t.mean(0), x),
    ("sum f64", lambda t: t.double().sum(0), x),
    ("amax", lambda t: t.amax(1), x),
    ("amin", lambda t: t.amin(0), i),
    # copy_ from a CPU tensor, another dtype: CPU's kernel serves it while the cast compiles
    ("copy_ cast from CPU", lambda t: torch.empty(64, 32, dtype=f64, device=t.device).copy_(x), x),
    ("copy_ cast from CPU, transposed", lambda t: empty_t(t.device).copy_(x), x),
    ("add parallel", lambda t: t + 1, big),
    ("sum parallel", lambda t: t.sum(1), big),
]
dtypes = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
          torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
          torch.complex128]
for dtype in dtypes:  # every dtype the native kernels take, in each family CPU allows
    t = (x * 4).to(dtype)
    cases.append((f"copy {dtype}", lambda t: t.t().contiguous(), t))
    cases.append((f"add {dtype}", lambda t: t + t, t))
    cases.append((f"eq {dtype}", lambda t: t == t.t().contiguous().t(), t))
    cases.append((f"cast {dtype}", lambda t: t.to(torch.float16), t))
    if dtype != torch.bool:
        cases.append((f"sum {dtype}", lambda t: t.sum(0), t))
    if not dtype.is_complex and dtype != torch.bool:
        cases.append((f"amax {dtype}", lambda t: t.amax(1), t))
        cases.append((f"where {dtype}", lambda t: torch.where(t > 0, t, t * 2), t))
for _ in range(2):  # the first and the second call of each
    for name, fn, t in cases:
        check(name, fn, t)
stats = compiler.stats()
assert not compiles, compiles  # no torch_mydev loop compiled in this process
assert stats.get("compiled_in_caller", 0) == 0, stats
served = sum(v for k, v in stats.items() if k.startswith("served_on_cpu:"))
assert served >= len(cases), stats
print("served", served, "queued", stats["queued"])
"""


def _background_env(cache: str) -> dict[str, str]:
    """Background mode with ``cache`` as the numba cache (an empty folder: a cold start)."""
    return {"NUMBA_CACHE_DIR": cache, "TORCH_MYDEV_COMPILE": "background"}


def _run(script: str) -> str:
    """``script`` after ``_PRELUDE``, in background mode with a numba cache of its own."""
    with tempfile.TemporaryDirectory() as cache:
        return run_python(_PRELUDE + script, env=_background_env(cache), timeout=600).stdout


def test_first_calls_never_compile_in_the_caller_and_equal_cpu():
    assert _run(_FIRST_CALLS).startswith("served")


_TAKE_OVER = """
compiler.IDLE_SECONDS = 600  # one child for every batch, however slow the machine
children = []
start_child = compiler._start_child
compiler._start_child = lambda: children.append(1) or start_child()
x = torch.randn(64, 32)
check("add", lambda t: t + t, x)
assert compiler.stats()["served_on_cpu:add.Tensor"] == 1
assert torch_mydev.fallback_stats() == {}  # served by CPU, yet not a fallback: add has a kernel
# Each call finds the next loop it lacks (the Python path's loops, then the stub's C entry):
# wait and call until two calls in a row queue nothing new.
quiet = 0
for _ in range(8):
    assert compiler.wait(timeout=540), compiler.stats()
    queued = compiler.stats()["queued"]
    check("add", lambda t: t + t, x)
    quiet = quiet + 1 if compiler.stats()["queued"] == queued else 0
    if quiet == 2:  # the stub's record is made on a layout's second native call
        break
before = compiler.stats()
for _ in range(3):
    check("add", lambda t: t + t, x)
after = compiler.stats()
assert after == before, (before, after)  # the loops ran these: nothing served, nothing queued
assert after["compiled"] >= 2 and after.get("failed", 0) == 0, after
assert after.get("compiled_in_caller", 0) == 0, after
assert len(children) == 1, children  # it stayed for the next batches (each start: seconds)
print("ok")
"""


def test_the_compiled_loop_takes_over_once_the_child_is_done():
    assert _run(_TAKE_OVER).strip() == "ok"


def test_mode_is_read_from_the_environment():
    """In this process, the suite's mode (tests/conftest.py sets ``sync`` before torch's
    import, unless the environment has one); each script above and below asserts
    ``background`` in its own process (``_PRELUDE``)."""
    from torch_mydev.kernels.jit import compiler

    assert compiler.mode == os.environ["TORCH_MYDEV_COMPILE"]


_CHILD_KILLED = """
import signal, time
x = torch.randn(64, 32)
check("neg", torch.neg, x)
child = compile_child()
child.send_signal(signal.SIGKILL)  # what ending it from outside does: not the job's failure
assert compiler.wait(timeout=540), compiler.stats()
stats = compiler.stats()
assert stats.get("failed", 0) == 0 and stats["compiled"] >= 1, stats
served = stats["served_on_cpu:neg"]
for _ in range(2):
    check("neg", torch.neg, x)
assert compiler.stats()["served_on_cpu:neg"] == served, compiler.stats()  # the loop ran
print("ok")
"""


def test_a_child_ended_from_outside_is_run_again_and_what_it_prints_stays_out_of_its_answers():
    """The killed child's job is compiled by the next child. numba's ``NUMBA_DEBUG_CACHE``
    makes that child print each cache save on stdout, the pipe its answers go through: the
    answers still arrive whole (one process tests both: each start costs seconds)."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**_background_env(cache), "NUMBA_DEBUG_CACHE": "1"}
        out = run_python(_PRELUDE + _CHILD_KILLED, env=env, timeout=600).stdout
    assert out.strip().endswith("ok"), out[-2000:]


_THREADS_AND_FORK = """
import os, sys, threading
x = torch.randn(64, 32)
errors = []
barrier = threading.Barrier(8)
def first_call(k):
    try:
        barrier.wait()
        check("mul", lambda t: t * (k + 1), x)
        check("compare", lambda t: t > k, x)
    except BaseException as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=first_call, args=(k,)) for k in range(8)]
for t in threads: t.start()
for t in threads: t.join()
assert not errors, errors
assert compiler.stats().get("compiled_in_caller", 0) == 0, compiler.stats()
pending = compiler.stats()["pending"]
assert pending, compiler.stats()
child = compile_child()  # it runs: a fork inherits the ends of its pipes
compiler.IDLE_SECONDS = 0  # the child is told to stop as soon as its batches are done
hold_r, hold_w = os.pipe()
pid = os.fork()  # with compiles queued in the parent
if pid == 0:  # a forked worker that never touches mydev (CUDA's rule: it may not) and exits
    compiler.served_on_cpu("nothing")
    os.read(hold_r, 1)  # holding the compiler's pipes open until the parent has checked
    sys.exit(0)  # runs atexit: it must not end the parent's compiler process
try:
    assert compiler.wait(timeout=540), compiler.stats()
    assert compiler.stats().get("failed", 0) == 0, compiler.stats()
    assert child.wait(timeout=120) == 0  # stopped, though the fork still holds its input open
finally:
    os.write(hold_w, b"x")
assert os.waitpid(pid, 0)[1] == 0
print("ok")
"""


def test_threads_at_once_and_a_forked_child_leave_the_compiles_alone():
    assert _run(_THREADS_AND_FORK).strip() == "ok"


_KILLED_PARENT = """
import time
x = torch.randn(64, 32)
check("abs", torch.abs, x)
child = compile_child()
print(child.pid, flush=True)
time.sleep(600)  # killed by the test meanwhile
"""


def test_the_compiler_ends_with_a_killed_program():
    """A program killed by a signal runs no ``atexit``: its compiler must not go on alone."""
    import signal
    import time

    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, **_background_env(cache)}
        program = subprocess.Popen(
            [sys.executable, "-c", _PRELUDE + _KILLED_PARENT],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        child = int(program.stdout.readline())
        program.send_signal(signal.SIGKILL)
        program.wait()
        for _ in range(200):  # the kernel delivers the death signal at once; allow 10 s
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                return
            with open(f"/proc/{child}/stat") as stat:  # a zombie awaiting its reaper is gone
                if stat.read().split(")")[-1].split()[0] == "Z":
                    return
            time.sleep(0.05)
        os.kill(child, signal.SIGKILL)
        raise AssertionError("the compiler process outlived the program that started it")


_NO_DISK_WHILE_PENDING = """
import threading
from numba.core import caching
gate = threading.Event()
compiler._compile_in_child = lambda batch: (gate.wait(), (set(), False))[1]  # held pending
x = torch.randn(64, 32)
check("add", lambda t: t + t, x)
assert compiler.stats()["pending"] >= 1, compiler.stats()
reads = []
original = caching.IndexDataCacheFile._load_index
caching.IndexDataCacheFile._load_index = lambda self: reads.append(1) or original(self)
for _ in range(5):
    check("add", lambda t: t + t, x)
assert compiler.stats()["served_on_cpu:add.Tensor"] == 6, compiler.stats()
assert not reads, len(reads)  # a served call asked the disk nothing
gate.set()
print("ok")
"""


def test_a_served_call_reads_no_cache_index_while_its_loop_compiles():
    assert _run(_NO_DISK_WHILE_PENDING).strip() == "ok"


_REPEATS_GO_STRAIGHT_TO_CPU = """
import threading
gate = threading.Event()
compiler._compile_in_child = lambda batch: (gate.wait(), ({*batch}, False))[1]  # held pending
starts = []
original = compiler._on_compile_start
compiler._on_compile_start = lambda e: starts.append(1) or original(e)
x = torch.randn(64, 32)
check("mul", lambda t: t * 2.5, x)
assert compiler.stats()["pending"] >= 1, compiler.stats()
xm = x.to("mydev")
met = len(starts)
assert met >= 1  # the first calls planned and met their missing loops
results = [xm * (3.5 + k) for k in range(5)]  # repeats: the same op, layouts, number type
assert len(starts) == met, (met, len(starts))  # none planned again to meet the same loop
assert compiler.stats()["served_on_cpu:mul.Tensor"] == 6, compiler.stats()
for k, got in enumerate(results):
    assert torch.equal(got.cpu(), x * (3.5 + k))
check("mul int", lambda t: t * 2, torch.arange(6))  # another signature plans for itself
assert len(starts) > met
met = len(starts)
gate.set()
assert compiler.wait(timeout=60), compiler.stats()
check("mul", lambda t: t * 2.5, x)  # the compile is over: the call plans again
assert len(starts) > met
print("ok")
"""


def test_a_repeat_goes_straight_to_cpu_while_its_loop_compiles():
    """A repeat of a served call does not plan again to meet the same missing loop (each
    such plan cost 0.7 to 5 ms in a cold training step)."""
    assert _run(_REPEATS_GO_STRAIGHT_TO_CPU).strip() == "ok"


_PRIORITY_AND_CTRL_C = """
import os, signal, time
compiler.IDLE_SECONDS = 0  # the child is told to stop as soon as its batch is done
x = torch.randn(64, 32)
check("abs", torch.abs, x)
child = compile_child()
# It takes the CPU only when nothing else wants it, and stays in the user's session: a
# session of its own is a scheduler autogroup of its own, which Linux gives half the CPU.
for _ in range(600):  # its first statement sets the policy
    if os.sched_getscheduler(child.pid) == os.SCHED_IDLE:
        break
    time.sleep(0.05)
assert os.sched_getscheduler(child.pid) == os.SCHED_IDLE
assert os.getsid(child.pid) == os.getsid(0)
assert os.getpgid(child.pid) != os.getpgid(0)
assert child.poll() is None, child.returncode  # it is compiling when the Ctrl-C comes
try:  # the terminal's Ctrl-C: SIGINT to the foreground process group
    os.killpg(os.getpgid(0), signal.SIGINT)
    time.sleep(5)
except KeyboardInterrupt:
    pass
# The compile goes on to its end: the child, told to stop after its batch, exits with status
# 0 (a SIGINT would end it with -2, or 1 from a KeyboardInterrupt), the batch compiled.
assert compiler.wait(timeout=540), compiler.stats()
assert child.wait(timeout=60) == 0, child.returncode
assert compiler.stats()["compiled"] >= 1, compiler.stats()
assert compiler.stats().get("failed", 0) == 0, compiler.stats()
print("ok")
"""


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux's SCHED_IDLE policy")
def test_the_child_yields_the_cpu_and_ignores_the_terminals_ctrl_c():
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, **_background_env(cache)}
        program = subprocess.run(  # a session of its own, so its SIGINT reaches no one else
            [sys.executable, "-c", _PRELUDE + _PRIORITY_AND_CTRL_C],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
            start_new_session=True,
        )
    assert program.stdout.strip() == "ok", program.stderr[-3000:]
