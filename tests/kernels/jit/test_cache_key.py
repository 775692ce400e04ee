"""numba's on-disk cache of every loop is keyed by all the kernels' sources
(kernels/jit/_cache_key.py).

numba alone stamps a cached function with its own file: a loop that inlines a helper of
another module kept running its old machine code after the helper changed. The truth here
is numba's own cache log (``NUMBA_DEBUG_CACHE=1``: each entry saved, i.e. compiled, and each
loaded) in fresh processes running a copy of the package with an empty cache.
"""

import os
import re
import shutil
from pathlib import Path

import numba
from numba.core.caching import IndexDataCacheFile
from numba.core.dispatcher import Dispatcher
from numba.core.serialize import dumps

import torch_mydev
from tests.support.subprocess_run import run_python
from torch_mydev.kernels import load_numba_modules
from torch_mydev.kernels.jit import _cache_key

_KERNELS = Path(_cache_key.__file__).parents[1]  # torch_mydev/kernels
_DECORATOR = re.compile(r"^@(numba\.)?njit\b", re.MULTILINE)
_ASSIGNED = re.compile(r"^\w+ = (numba\.)?njit\b", re.MULTILINE)  # _op = njit(**JIT)(_max_min)


def _numba_modules() -> list[str]:
    """The numba modules of the kernels package, as ``load_numba_modules`` names them."""
    paths = (p for p in _KERNELS.rglob("*.py") if _DECORATOR.search(p.read_text()))
    return sorted(".".join(p.relative_to(_KERNELS).with_suffix("").parts) for p in paths)


def test_every_cached_loop_is_keyed_by_the_kernels_sources():
    """Each ``@njit`` (or ``name = njit(...)(function)``) of the package is a module-level
    dispatcher its module's last line (``_seal.seal(__name__)``) stamps: none is missed, and
    the stamp is ``stamp()``.
    Fails loudly if numba moves ``_cache._cache_file._source_stamp``."""
    names = _numba_modules()
    assert {"copy._convert", "elementwise._loops", "copy._strided", "reduction._walks"} <= set(
        names
    )
    for name, module in zip(names, load_numba_modules(*names), strict=True):
        source = Path(module.__file__).read_text()
        decorators = len(_DECORATOR.findall(source)) + len(_ASSIGNED.findall(source))
        dispatchers = [
            v
            for v in vars(module).values()
            if isinstance(v, Dispatcher) and v.py_func.__module__ == module.__name__
        ]
        assert len(dispatchers) == decorators, name
        for d in dispatchers:
            assert d._cache._cache_file._source_stamp == _cache_key.stamp(), (name, d)


def test_the_digest_follows_the_bytes_and_the_versions_not_the_times(tmp_path):
    """Any edit of any source, or another numba/llvmlite/numpy, gives another stamp; a copy
    of the same files (new mtimes, as ``pip install`` writes them) gives the same one."""
    shutil.copytree(_KERNELS, tmp_path / "a", ignore=shutil.ignore_patterns("__pycache__"))
    versions = "numba 0.68.1 llvmlite 0.50.0 numpy 2.4.6"
    first = _cache_key.sources_digest(tmp_path / "a", versions)
    assert first == _cache_key.sources_digest(_KERNELS, versions)
    os.utime(tmp_path / "a" / "reduction" / "_walks.py", (0, 0))
    assert _cache_key.sources_digest(tmp_path / "a", versions) == first
    assert _cache_key.sources_digest(tmp_path / "a", versions + ".post1") != first
    with (tmp_path / "a" / "reduction" / "_walks.py").open("a") as f:
        f.write("\n")
    assert _cache_key.sources_digest(tmp_path / "a", versions) != first


def test_numba_ignores_an_entry_saved_under_another_stamp(tmp_path):
    """The attribute ``key_cache`` sets is the one numba 0.68 compares: an index written
    under one ``_source_stamp`` is empty under another (and whole again under the first)."""
    cache_file = IndexDataCacheFile(str(tmp_path), "loop", "stamp A")
    cache_file.save("key", "machine code")
    assert cache_file.load("key") == "machine code"
    cache_file._source_stamp = "stamp B"
    assert cache_file.load("key") is None
    cache_file._source_stamp = "stamp A"
    assert cache_file.load("key") == "machine code"


_NEG = """
import torch
import torch_mydev
print("package", torch_mydev.__file__)
x = torch.arange(-4.0, 4.0)
y = x.to("mydev")
for _ in range(3):  # the second native call of a layout makes the stub's C entry
    z = -y
    h = y.half()
assert torch.equal(z.cpu(), -x), z
assert torch.equal(h.cpu(), x.half()), h
"""

# unary_at (elementwise/_loops.py) is compiled with copy/_strided's _pointer inside it;
# unary_replay (a C entry made by compiler.c_entry, in elementwise/_replay.py) calls unary_at
# by symbol (jit/_native.py) and inlines _replay_abi's pointer_of; cast_replay
# (copy/_replay.py) closes over the two loops it calls, which numba alone keyed by a uuid
# new in every process. numba names a cache file by its module's file name and the
# qualified name.
_LOOPS = {
    "_loops.unary_at",
    "_replay.unary_entry.locals.unary_replay",
    "_replay.cast_entry.locals.cast_replay",
}
_LOG = re.compile(r"^\[cache\] data (saved to|loaded from) '(.*)'$", re.MULTILINE)


def _run(package: Path, cache: Path) -> tuple[set[str], set[str]]:
    """Run ``_NEG`` on the copy ``package``: the entries it saved (compiled) and loaded."""
    env = {
        "PYTHONPATH": str(package),
        "NUMBA_CACHE_DIR": str(cache),
        "NUMBA_DEBUG_CACHE": "1",
        "TORCH_MYDEV_COMPILE": "sync",
    }
    out = run_python(_NEG, env=env, cwd=package, timeout=600)  # "" (the copy) heads sys.path
    assert f"package {package / 'torch_mydev' / '__init__.py'}\n" in out.stdout, out.stdout
    log: dict[str, set[str]] = {"saved to": set(), "loaded from": set()}
    for verb, path in _LOG.findall(out.stdout):
        log[verb].add(Path(path).name.split("-")[0])  # "_loops.unary_at-67.py311.1.nbc"
    return log["saved to"], log["loaded from"]


def test_a_closure_over_a_loop_is_keyed_by_the_loop_not_by_its_uuid():
    """``closure_key`` names a dispatcher a C entry closes over by its code, the same for
    two dispatchers of the same function (numba pickles each with its own uuid), and tells
    apart two different loops."""

    def entry(loop: Dispatcher):
        def body(x):
            return loop(x)

        return body

    def twice(x):
        return 2 * x

    first, second = numba.njit(twice), numba.njit(twice)
    assert dumps(first) != dumps(second)  # numba's own key of the closure differs
    assert dumps(_cache_key.closure_key(entry(first))) == dumps(
        _cache_key.closure_key(entry(second))
    )
    other = numba.njit(lambda x: x + 1)
    assert _cache_key.closure_key(entry(other)) != _cache_key.closure_key(entry(first))

    def recursive():  # a loop that closes over itself is named once, not forever
        @numba.njit
        def countdown(n):
            return 0 if n <= 0 else countdown(n - 1)

        return countdown

    loop = recursive()
    assert _cache_key.closure_key(entry(loop)) == _cache_key.closure_key(entry(recursive()))

    def made(step: int, **options):  # one qualified name, one bytecode: other constants
        if step == 1:

            @numba.njit(**options)
            def shift(x):
                return x + 1
        else:

            @numba.njit(**options)
            def shift(x):
                return x + 2

        return shift

    keys = {
        _cache_key.closure_key(entry(made(1))),
        _cache_key.closure_key(entry(made(2))),
        _cache_key.closure_key(entry(made(1, fastmath=True))),
    }
    assert len(keys) == 3


def test_an_edited_helper_recompiles_the_loops_that_inline_it(tmp_path):
    package, cache = tmp_path / "site", tmp_path / "cache"
    source = Path(torch_mydev.__file__).parent
    shutil.copytree(source, package / "torch_mydev", ignore=shutil.ignore_patterns("__pycache__"))
    cache.mkdir()

    saved, loaded = _run(package, cache)  # an empty cache: compiled
    assert saved >= _LOOPS and not _LOOPS & loaded, (saved, loaded)
    saved, loaded = _run(package, cache)  # the same sources: loaded, nothing compiled
    assert loaded >= _LOOPS and not saved, (saved, loaded)

    with (package / "torch_mydev" / "kernels" / "copy" / "_strided.py").open("a") as f:
        f.write("# an edit of the helper the loops inline\n")
    saved, loaded = _run(package, cache)  # no stale load: compiled again
    assert saved >= _LOOPS and not _LOOPS & loaded, (saved, loaded)
