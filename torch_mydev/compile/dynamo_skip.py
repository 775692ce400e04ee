"""Keep dynamo out of mydev's own Python kernels, whichever ``torch.compile`` backend runs.

Eager ops that run while a compiled function is active (autograd's backward, the code after
a graph break) reach mydev's kernels, which are Python: dynamo's frame hook would trace them
(and fails on their numpy/numba code). ``torch._dynamo.trace_rules.add`` puts a package's
directory on dynamo's skip list; `install` calls it as soon as ``trace_rules`` exists (now,
or right after dynamo imports it) without importing dynamo itself.
"""

from __future__ import annotations

import sys
import types
from typing import Any

_MODULE = "torch._dynamo.trace_rules"
_PACKAGES = ("torch_mydev", "torch_mydev_rules")


def _skip(trace_rules: types.ModuleType) -> None:
    for package in _PACKAGES:
        trace_rules.add(package)


class _Watcher:
    """A ``sys.meta_path`` finder that finds nothing; when ``trace_rules`` is imported, it
    wraps that module's loader to call `_skip` (importlib.abc/util stay unimported: cost)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != _MODULE:
            return None
        import importlib.util

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_skip(module: types.ModuleType) -> None:
            exec_module(module)
            _skip(module)

        spec.loader.exec_module = exec_then_skip  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Skip mydev's packages in dynamo now if it is loaded, else once it loads (once)."""
    if _MODULE in sys.modules:
        _skip(sys.modules[_MODULE])
    elif not any(isinstance(f, _Watcher) for f in sys.meta_path):
        sys.meta_path.insert(0, _Watcher())
