"""Decides what keys numba's on-disk cache of every loop: all of the kernels' sources.

numba stamps a cached function with its own source file only (numba 0.68: the sha256 of
that file) and loads the machine code while the stamp matches. A loop here is compiled
with helpers of other modules inside it (``_strided``'s ``_pointer``, ``_walks``' inline
steps, ``elementwise._loops``' rows, ``dtypes``' constants), so an edit there, or a
``pip install`` of a new version over an old ``__pycache__``, left it running the old
machine code. Every numba module of this package keys its loops by its last line
(``_seal.seal(__name__)``), and ``compiler.c_entry`` calls ``key_cache`` on each C entry
it makes: the stamp numba compares (``IndexDataCacheFile._source_stamp``) becomes
``stamp()``, the sha256 of every ``.py`` file of the kernels package and of numba's, llvmlite's and
numpy's versions. Any change to any of them makes every cached loop stale: numba ignores
the entry, compiles again and rewrites it. A copy or a reinstall of the same files keeps the caches.

Every process computes the stamp from the files it imports, so the compiler's child
process (``kernels/jit/compiler.py``) writes entries its parent can load.

Within a cache file numba finds an entry by its index key, which hashes the function's
bytecode and numba's pickle of its closure (``Cache._index_key``). A C entry made by a
factory (``copy._replay.cast_entry``, ``parallel._entries.walk_entry`` ...) closes over the
loops it calls, and numba pickles a dispatcher with a uuid new in every process: the key
never matched, and each process compiled those entries again (0.1 to 1.3 s each). Here a
dispatcher in a closure is keyed by what it is (``closure_key``); the stamp covers its code.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from types import CodeType
from typing import Any

import llvmlite
import numba
import numpy as np
from numba.core.caching import NullCache
from numba.core.dispatcher import Dispatcher
from numba.core.serialize import dumps

from torch_mydev.kernels.jit._cache_lock import lock_cache_file

_FOLDER = Path(__file__).parents[1]  # torch_mydev/kernels


def sources_digest(folder: Path, versions: str) -> str:
    """The sha256 of ``versions`` and of the ``.py`` files under ``folder`` (its sub-packages
    too), paths and bytes, by path (not their times: a copy or a reinstall of the same files
    has the same digest)."""
    digest = hashlib.sha256(versions.encode() + b"\0")
    for path in sorted(folder.rglob("*.py")):
        data = path.read_bytes()
        name = path.relative_to(folder).as_posix()
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
    return f"torch_mydev.kernels sha256:{digest.hexdigest()}"


@functools.cache
def stamp() -> str:
    """What a cached loop's machine code may depend on: the kernels package's sources and the numba,
    llvmlite and numpy versions (``sources_digest``). Read once per process."""
    versions = f"numba {numba.__version__} llvmlite {llvmlite.__version__} numpy {np.__version__}"
    return sources_digest(_FOLDER, versions)


def key_cache(function: Any) -> None:
    """Key the on-disk cache of one numba dispatcher or ``CFunc`` by ``stamp()``, its saves
    and loads whole among processes (``_cache_lock``).

    A function without a cache (``cache=False``, caching unavailable) is left alone. The
    attributes are numba 0.68's (``_cache``, ``FunctionCache._cache_file``,
    ``IndexDataCacheFile._source_stamp``); tests/kernels/jit/test_cache_key.py fails loudly if
    numba moves them.
    """
    cache = function._cache
    if not isinstance(cache, NullCache):
        cache._cache_file._source_stamp = stamp()
        lock_cache_file(cache._cache_file)
        if cache._py_func.__closure__ is not None:
            cache._index_key = functools.partial(_index_key, cache._py_func)


def closure_key(function: Any, _outer: tuple = ()) -> tuple:
    """The values ``function`` closes over, each dispatcher among them (at any depth of
    closures) replaced by what makes its machine code: module, qualified name, code (with
    its constants, names and first line), defaults, numba options and locals, and its own
    closure. The same in every process, where numba's pickle of a dispatcher is not; a
    value this cannot name stably (an object's default ``repr``) only costs a cache miss.
    A dispatcher met again inside its own closure (a recursive loop) is named without it."""
    cells = function.__closure__ or ()
    return tuple(_named(cell.cell_contents, (*_outer, function)) for cell in cells)


def _named(value: Any, outer: tuple) -> Any:
    if not isinstance(value, Dispatcher):
        return value
    func = value.py_func
    return (
        "dispatcher",
        func.__module__,
        func.__qualname__,
        _code_key(func.__code__),
        _stable_repr((func.__defaults__, func.__kwdefaults__)),
        _stable_repr(value.targetoptions),
        _stable_repr(value.locals),
        () if func in outer else closure_key(func, outer),
    )


def _code_key(code: CodeType) -> tuple:
    """Bytecode, constants (nested functions' code in turn), names and first line."""
    consts = tuple(_code_key(c) if isinstance(c, CodeType) else _stable_repr(c)
                   for c in code.co_consts)  # fmt: skip
    return (code.co_code, consts, code.co_names, code.co_firstlineno)


def _stable_repr(value: Any) -> str:
    """``repr`` with dicts and sets in sorted order (a set's order follows string hashes,
    which change from process to process)."""
    if isinstance(value, dict):
        items = sorted((_stable_repr(k), _stable_repr(v)) for k, v in value.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(_stable_repr(v) for v in value)) + "}"
    if isinstance(value, (tuple, list)):
        return type(value).__name__ + "(" + ", ".join(_stable_repr(v) for v in value) + ")"
    return repr(value)


def _index_key(py_func: Any, sig: Any, codegen: Any) -> tuple:
    """numba 0.68's ``Cache._index_key`` (signature, target, sha256 of the bytecode and of
    the pickled closure), with the closure as ``closure_key`` gives it."""
    codebytes = py_func.__code__.co_code
    cvarbytes = dumps(closure_key(py_func))
    return (
        sig,
        codegen.magic_tuple(),
        (hashlib.sha256(codebytes).hexdigest(), hashlib.sha256(cvarbytes).hexdigest()),
    )
