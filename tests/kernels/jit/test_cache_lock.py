"""numba's cache saves and loads are whole among processes and threads (kernels/_cache_lock).

Each test holds one save between two of its steps, lets the other party run in that window,
and checks what the cache holds after both: without the lock, the load returns a stale
entry's machine code, and two saves leave an index naming one signature over the other's
code. The window is forced (events), not waited for."""

import threading

from numba.core.caching import IndexDataCacheFile

from torch_mydev.kernels.jit._cache_lock import lock_cache_file

_BOUND = 2.0  # seconds the other party gets to run into the held window (it never may)


def _cache(folder, stamp):
    cache = IndexDataCacheFile(str(folder), "loop", stamp)
    lock_cache_file(cache)
    return cache


def _hold(cache, step):
    """Pause ``cache``'s ``step`` (a method name) until released; returns (reached, release)."""
    reached, release = threading.Event(), threading.Event()
    original = getattr(cache, step)

    def held(*args):
        reached.set()
        assert release.wait(30)
        return original(*args)

    setattr(cache, step, held)
    return reached, release


def _run(fn, *args):
    out = []
    thread = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    thread.start()
    return thread, out


def test_a_load_never_reads_between_a_saves_index_and_its_data(tmp_path):
    """Sources changed: the stale entry's data file ``loop.1.nbc`` is what the new save will
    reuse; a load in between would read the stale machine code for the new signature."""
    IndexDataCacheFile(str(tmp_path), "loop", "old sources").save("old sig", "old code")
    writer, reader = _cache(tmp_path, "new sources"), _cache(tmp_path, "new sources")
    reached, release = _hold(writer, "_save_data")
    saving, _ = _run(writer.save, "new sig", "new code")
    assert reached.wait(30)  # the index names loop.1.nbc; the data file is still the old one
    inside = threading.Event()
    load_index = reader._load_index
    reader._load_index = lambda: (inside.set(), load_index())[1]
    loading, loaded = _run(reader.load, "new sig")
    try:
        assert not inside.wait(_BOUND)  # the shared lock keeps the load out of the window
    finally:
        release.set()
    saving.join(30), loading.join(30)
    assert loaded == ["new code"]


def test_two_saves_never_share_a_data_file(tmp_path):
    """The first has read the empty index and picked ``loop.1.nbc``; were the second to read
    the index now, it would pick the same file, and whichever wrote last would leave an
    index naming one signature beside the other's machine code (here: the second's entry
    lost, its file overwritten)."""
    first, second = _cache(tmp_path, "sources"), _cache(tmp_path, "sources")
    reached, release = _hold(first, "_save_index")
    saving_first, _ = _run(first.save, "sig a", "code a")
    assert reached.wait(30)
    inside = threading.Event()
    load_index = second._load_index
    second._load_index = lambda: (inside.set(), load_index())[1]
    saving_second, _ = _run(second.save, "sig b", "code b")
    try:
        assert not inside.wait(_BOUND)
    finally:
        release.set()
    saving_first.join(30), saving_second.join(30)
    check = IndexDataCacheFile(str(tmp_path), "loop", "sources")
    assert (check.load("sig a"), check.load("sig b")) == ("code a", "code b")


def test_locking_twice_is_harmless(tmp_path):
    cache = _cache(tmp_path, "sources")
    lock_cache_file(cache)
    cache.save("sig", "code")
    assert cache.load("sig") == "code"
