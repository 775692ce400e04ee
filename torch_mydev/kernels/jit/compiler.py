"""Where a loop's machine code comes from: memory, numba's on-disk cache, or a child process.

A loop that is in neither memory nor numba's cache takes numba seconds to minutes to
compile. In ``background`` mode (the default) a call never waits for that: numba announces
every compile that is about to start (its ``numba:compile`` event, broadcast after the cache
lookup missed), and for a torch_mydev loop asked for outside an allowed compile the listener
here queues the loop's signature for a compiler process and raises ``NotCompiled``. The op's
registration catches it and serves the call through CPU's kernel on aliases of the mydev
buffers (``ops/registry.py``), which gives CPU's exact bits. The child compiles the queued
signatures into numba's on-disk cache at low priority, outside this process's GIL; a later
call finds the loop there and loads it in milliseconds.

``sync`` mode (``TORCH_MYDEV_COMPILE=sync``; what the test suite runs) compiles in the
calling thread, as numba does by default. A signature whose compile failed in the child,
or that the child cannot name (a loop made inside a function), is compiled in the caller
too, so a real error reaches the user.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import pickle
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

MODE_ENV = "TORCH_MYDEV_COMPILE"
_PARENT_ENV = "TORCH_MYDEV_COMPILER_PARENT"
MODES = ("background", "sync")
mode: str = os.environ.get(MODE_ENV, "background")
if mode not in MODES:
    raise ValueError(f"{MODE_ENV} must be one of {MODES}, not {mode!r}")

_PACKAGE = __name__.rpartition(".")[0].rpartition(".")[0] + "."  # "torch_mydev."


# ("compile", module, qualified name, numba argument types): a dispatcher's signature;
# ("call", module, qualified name, arguments): a function that makes a C entry when called.
Job = tuple[str, str, str, tuple]


class NotCompiled(Exception):
    """The loop a call needs is being compiled in the background: serve the call another way.

    ``job`` is the compile the call waits for (None where the raiser does not name one)."""

    def __init__(self, message: str, job: Job | None = None) -> None:
        super().__init__(message)
        self.job = job

    @classmethod
    def of(cls, job: Job) -> NotCompiled:
        """The exception of a call that waits for ``job``."""
        return cls(f"{job[2]}{job[3]} is compiling in the background", job)


_lock = threading.Lock()
_wake = threading.Condition(_lock)
_queued: list[Job] = []
_pending: set[Job] = set()  # queued or in the child now
_failed: set[Job] = set()
_done: set[Job] = set()
_tries: Counter[Job] = Counter()  # runs of a child that a signal ended, per job
_MAX_TRIES = 2
# The child waits this long for another batch before it exits: a program meets its loops
# in waves (each op's first call, the stub's C entries on second calls, new layouts).
IDLE_SECONDS = 10.0
_stats: Counter[str] = Counter()
_worker: threading.Thread | None = None
_child: subprocess.Popen | None = None
_local = threading.local()  # .depth: compiles running in this thread now


def stats() -> dict[str, int]:
    """Counts since start: ``queued`` signatures, ``compiled`` in the child, ``failed`` there,
    ``pending`` now, ``compiled_in_caller`` (sync mode, failures, unnamed loops), and
    ``served_on_cpu:<op>``, the calls of each native op served by CPU meanwhile."""
    with _lock:
        return {**_stats, "pending": len(_pending)}


def served_on_cpu(op: str) -> None:
    """Count a call of the native op ``op`` that ran on CPU while its loop compiled."""
    with _lock:
        _stats[f"served_on_cpu:{op}"] += 1


def pending(job: Job | None = None) -> bool:
    """Whether ``job`` is queued or compiling now (any job, for None)."""
    return bool(_pending) if job is None else job in _pending


def wait(timeout: float | None = None) -> bool:
    """Block until no compile is queued or running; False if ``timeout`` ran out first."""
    with _wake:
        return _wake.wait_for(lambda: not _pending, timeout)


def _job(dispatcher: Any, args: tuple) -> Job:
    func = dispatcher.py_func
    return ("compile", func.__module__, func.__qualname__, tuple(args))


def _on_compile_start(event: Any) -> None:
    """A compile is about to start (numba looked in its cache and missed). It runs here in
    sync mode, nested inside a compile that runs here, for another package's function, and
    for a job the child failed, already compiled (its cache entry did not load here), or
    cannot name (a loop made inside a function); otherwise it is queued for the child and
    the call raises ``NotCompiled``."""
    depth = getattr(_local, "depth", 0)
    dispatcher = event.data["dispatcher"]
    if depth == 0 and dispatcher.py_func.__module__.startswith(_PACKAGE):
        job = _job(dispatcher, event.data["args"])
        if mode == "sync" or job in _failed or job in _done or "<locals>" in job[2]:
            with _lock:
                _stats["compiled_in_caller"] += 1
        else:
            _submit(job)
            _skip_disk_while_pending(dispatcher)
            raise NotCompiled.of(job)
    _local.depth = depth + 1


class _PendingAwareCache:
    """A dispatcher's numba cache that answers "not there" without reading the index file
    for a signature the child is compiling now: numba looks in its cache on every call of a
    missing signature, and that read (about 0.5 ms) was most of a served call's cost."""

    def __init__(self, cache: Any, dispatcher: Any) -> None:
        self._cache = cache
        self._dispatcher = dispatcher

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        if _job(self._dispatcher, tuple(sig)) in _pending:
            return None
        return self._cache.load_overload(sig, target_context)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cache, name)


def _skip_disk_while_pending(dispatcher: Any) -> None:
    if not isinstance(dispatcher._cache, _PendingAwareCache):
        dispatcher._cache = _PendingAwareCache(dispatcher._cache, dispatcher)


def _on_compile_end(event: Any) -> None:
    # A refused start happens only at depth 0, so an end at depth 0 is that refusal's.
    depth = getattr(_local, "depth", 0)
    if depth:
        _local.depth = depth - 1


def c_entry(body: Callable, signature: Any, options: dict, maker: Callable, args: tuple) -> int:
    """The address of ``body`` compiled as a ``numba.cfunc`` of ``signature``, cached on disk.

    ``maker(*args)`` is the function that calls this one (a factory of C entries). In
    background mode an entry in neither memory nor numba's cache is queued for the child,
    which calls ``maker(*args)``, and this raises ``NotCompiled``. Every loop symbol
    ``body`` closes over (``_native.native``) must be registered in this process first:
    LLVM would abort the process on loading an entry whose symbol does not resolve.
    """
    from numba.core import sigutils
    from numba.core.ccallback import CFunc

    from torch_mydev.kernels.jit import _native
    from torch_mydev.kernels.jit._cache_key import key_cache

    for cell in body.__closure__ or ():
        value = cell.cell_contents
        if (
            isinstance(value, str)
            and value.startswith(_native.PREFIX)
            and not _native.registered(value)
        ):
            raise RuntimeError(f"{body.__qualname__} calls {value}, not registered here")
    job = ("call", maker.__module__, maker.__qualname__, args)
    depth = getattr(_local, "depth", 0)
    waits = mode == "background" and depth == 0 and job not in _failed and job not in _done
    if waits and job in _pending:  # the child is at it: no need to look on disk
        raise NotCompiled.of(job)
    cfunc = CFunc(body, sigutils.normalize_signature(signature), locals={}, options=options)
    cfunc.enable_caching()
    key_cache(cfunc)  # keyed by all the kernels' sources, as every loop's cache is
    if waits and not _on_disk(cfunc):
        _submit(job)
        raise NotCompiled.of(job)
    _local.depth = depth + 1  # the loops it calls compile here too, if they must
    try:
        cfunc.compile()
    finally:
        _local.depth = depth
    return cfunc.address


def _on_disk(cfunc: Any) -> bool:
    """Whether numba's cache index holds ``cfunc``'s entry (numba 0.68's ``Cache`` layout;
    tests/kernels/jit/test_compiler.py fails loudly if it changes)."""
    cache = cfunc._cache
    key = cache._index_key(cfunc._sig, cfunc._targetdescr.target_context.codegen())
    return key in cache._cache_file._load_index()


def install() -> None:
    """Listen to numba's compiles (once numba is loaded: ``kernels.load_numba_modules``)."""
    global _listener
    from numba.core import event

    if _listener is None:

        class Listener(event.Listener):
            def on_start(self, e: Any) -> None:
                _on_compile_start(e)

            def on_end(self, e: Any) -> None:
                _on_compile_end(e)

        _listener = Listener()
        event.register("numba:compile", _listener)


_listener: Any = None


def _submit(job: Job) -> None:
    global _worker
    with _lock:
        if job in _pending:
            return
        _pending.add(job)
        _queued.append(job)
        _stats["queued"] += 1
        if _worker is None:
            _worker = threading.Thread(target=_work, name="mydev-compile", daemon=True)
            _worker.start()
        _wake.notify_all()


def _work() -> None:
    """Hand queued signatures to the child process in batches: started when a batch comes,
    ended once nothing has been queued for ``IDLE_SECONDS``."""
    while True:
        with _wake:
            if _wake.wait_for(lambda: bool(_queued), IDLE_SECONDS if _child is not None else None):
                batch = list(_queued)
                _queued.clear()
            else:
                batch = []
        if not batch:
            _close_child()
            continue
        done, ended = _compile_in_child(batch)
        with _wake:
            for job in batch:
                if job in done:
                    _done.add(job)
                    _stats["compiled"] += 1
                elif ended and _tries[job] < _MAX_TRIES:  # killed from outside: try again
                    _tries[job] += 1
                    _queued.append(job)
                    continue
                else:
                    _failed.add(job)
                    _stats["failed"] += 1
                _pending.discard(job)
            _wake.notify_all()


def _start_child() -> subprocess.Popen:
    """The compiler process (``_CHILD_MAIN``), in a process group of its own, so a Ctrl-C at
    the terminal, which interrupts the user's program, does not end a compile the next run
    would need too. It stays in the user's session: Linux's scheduler autogroups share the
    CPU between sessions first, and a child in a session of its own took half of it whatever
    its priority (each 64x64 ``mm`` of the user's program waited 16 ms for its second
    thread)."""
    env = {
        **os.environ,
        MODE_ENV: "sync",
        "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",
        _PARENT_ENV: str(os.getpid()),
    }
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD_MAIN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        process_group=0,
    )


def _compile_in_child(batch: list[Job]) -> tuple[set[Job], bool]:
    """Send ``batch`` to the child (started if none runs) and read back the jobs it
    compiled, and whether a signal ended it (not a failure of the jobs: they are tried
    again). The child stays for the next batch: starting one (torch's import, numba's
    modules) took about 3 s here, which every batch paid before."""
    global _child
    try:
        with _lock:
            if _child is None:
                _child = _start_child()
            child = _child
        _send(child.stdin, batch)
        return set(_receive(child.stdout)), False
    except Exception:  # it ended, or no child could run: compile here later
        return set(), _close_child(kill=True) < 0


def _send(stream: Any, value: Any) -> None:
    """One message between this process and the child: its length (8 bytes, little-endian),
    then its pickle."""
    data = pickle.dumps(value)
    stream.write(len(data).to_bytes(8, "little") + data)
    stream.flush()


def _receive(stream: Any) -> Any:
    """The next message ``_send`` wrote to ``stream``; EOFError where the writer ended."""
    head = stream.read(8)
    data = stream.read(int.from_bytes(head, "little")) if len(head) == 8 else b""
    if not data:
        raise EOFError("the other end of the compiler's pipe closed")
    return pickle.loads(data)


def _close_child(kill: bool = False) -> int:
    """End the child, if one runs, and return its exit status (negative: the signal that
    ended it; 0 where none ran). Told to stop, it exits 0; ``kill`` ends it at once (after
    a broken pipe: it has ended or cannot go on). Not by closing its input alone: a process
    forked from this one holds that pipe open too."""
    global _child
    with _lock:
        child, _child = _child, None
    if child is None:
        return 0
    if not kill:
        with contextlib.suppress(OSError):
            _send(child.stdin, None)
    with contextlib.suppress(OSError):
        child.stdin.close()
    if kill and child.poll() is None:
        child.kill()
    try:
        return child.wait(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        return child.wait()


@atexit.register
def _stop_child() -> None:
    """Exit does not wait for a compile: the child is ended (numba writes its cache files
    whole, by rename, so an ended child leaves no half-written entry)."""
    _close_child(kill=True)


def _after_fork_in_child() -> None:
    """A forked process starts with no worker and no child of its own; what its parent had
    queued it queues again when it needs it."""
    global _lock, _wake, _worker, _child
    _lock = threading.Lock()
    _wake = threading.Condition(_lock)
    _queued.clear()
    _pending.clear()
    _tries.clear()
    _worker = None
    _child = None


os.register_at_fork(after_in_child=_after_fork_in_child)


def _resolve(module: str, qualname: str) -> Any:
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


def _watch_parent(parent: int) -> None:
    """End this process when ``parent`` ends, where Linux's ``PR_SET_PDEATHSIG`` (asked for by
    ``_CHILD_MAIN``) is not there: a thread that watches it. A program killed by a signal
    runs no ``atexit`` handler, and its compiler would otherwise go on alone for minutes."""

    def watch() -> None:
        while os.getppid() == parent:
            threading.Event().wait(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


# The child's program. Its first statements, before it may wait for CPU time, ask Linux to
# end it with the program that started it (``PR_SET_PDEATHSIG``; elsewhere ``_watch_parent``):
# at ``SCHED_IDLE`` on a busy machine it took over 10 s to reach that request after torch's
# import, and a program killed meanwhile left it running. Then it takes the CPU only when
# nothing else wants it (Linux's SCHED_IDLE, else the lowest niceness), before its imports:
# torch's take seconds.
_CHILD_MAIN = f"""
import os
try:
    import ctypes, signal
    asked = ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0) == 0  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    asked = False
parent = int(os.environ["{_PARENT_ENV}"])
if os.getppid() != parent:  # it ended before that
    os._exit(1)
try:
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
except (AttributeError, OSError):
    os.nice(19)
from {__name__} import _main
_main(None if asked else parent)
"""


def _main(watch: int | None) -> None:
    """The child: compile each batch of jobs read from stdin into the cache and answer with
    the ones done, until told to stop (``_close_child``) or its input closes. ``watch``: the
    parent to watch (``_watch_parent``), where Linux does not end this process with it."""
    if watch is not None:
        _watch_parent(watch)
    # The answers go through a copy of stdout; what prints there (numba's NUMBA_DEBUG_CACHE
    # does) goes where stderr goes, not into an answer.
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    from torch_mydev import kernels

    kernels.load_numba_modules()
    while True:
        try:
            batch = _receive(sys.stdin.buffer)
        except EOFError:
            return
        if batch is None:  # _close_child
            return
        done = []
        for job in batch:
            kind, module, qualname, args = job
            with contextlib.suppress(Exception):  # a failed job is compiled by its caller
                target = _resolve(module, qualname)
                target.compile(args) if kind == "compile" else target(*args)
                done.append(job)
        _send(answers, done)
