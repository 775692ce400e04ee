"""Makes each save and load of numba's on-disk cache whole while other processes use it.

numba 0.68's ``IndexDataCacheFile.save`` reads the index, picks the first free data file
number, writes the index, then the data file; ``load`` reads the index, then the data file.
Each write is atomic (a temporary file and ``os.replace``), the sequences are not. Two
processes saving two signatures of one loop at once can both pick ``.1.nbc``: the index
then names one signature and the data file holds the other's machine code. A load between a
save's index and its data reads the data file the index names, which may still hold a stale
entry's code (numbering restarts at 1 when the sources change). The loaded code then runs
for the wrong argument types.

Processes do share a cache: the compiler's child beside its parent (``kernels/jit/compiler.py``),
a program's worker processes, the test suite's workers. So every save holds an exclusive
``flock`` on ``<index>.lock`` beside the index, and every load a shared one. Where that file
cannot be opened (a read-only cache folder), the cache works as numba's alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def _flock(path: str, operation: int) -> Iterator[None]:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, operation)
        yield
    finally:
        os.close(fd)  # closing the only descriptor of the open file releases the lock


def lock_cache_file(cache_file: Any) -> None:
    """Hold ``<index>.lock`` around ``cache_file``'s ``save`` (exclusive) and ``load``
    (shared); ``cache_file`` is a numba ``IndexDataCacheFile``. Once per cache file: a
    second lock on the same file would wait for the first forever."""
    if getattr(cache_file, "_mydev_locked", False):
        return
    cache_file._mydev_locked = True
    path = cache_file._index_path + ".lock"
    save, load = cache_file.save, cache_file.load

    def locked_save(key: Any, data: Any) -> None:
        with _flock(path, fcntl.LOCK_EX):
            save(key, data)

    def locked_load(key: Any) -> Any:
        with _flock(path, fcntl.LOCK_SH):
            return load(key)

    cache_file.save, cache_file.load = locked_save, locked_load
