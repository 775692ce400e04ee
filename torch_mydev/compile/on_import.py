"""Run code right after torch imports one of its modules, without importing it ourselves.

dynamo and inductor cost seconds to import; mydev registers with some of their modules
(``torch._dynamo.trace_rules``, ``torch._dynamo.device_interface``) at the moment torch
loads them. `after_import` keeps a callback per module name; a ``sys.meta_path`` finder
that finds nothing itself wraps the loader of such a module when it is imported, so the
callbacks run as soon as its body has run (importlib.abc/util stay unimported: cost).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

Callback = Callable[[types.ModuleType], None]

_pending: dict[str, list[Callback]] = {}


class _Watcher:
    """The ``sys.meta_path`` entry: wraps the loader of each module `_pending` names."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        callbacks = _pending.pop(name, None)  # popped first: find_spec below comes back here
        if callbacks is None:
            return None
        if not _pending:
            sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_call(module: types.ModuleType) -> None:
            exec_module(module)
            for callback in callbacks:
                callback(module)

        spec.loader.exec_module = exec_then_call  # type: ignore[method-assign]
        return spec


_watcher = _Watcher()


def after_import(name: str, callback: Callback) -> None:
    """Call ``callback(module)`` once module `name` is imported: now if it is loaded already."""
    module = sys.modules.get(name)
    if module is not None:
        callback(module)
        return
    _pending.setdefault(name, []).append(callback)
    if _watcher not in sys.meta_path:
        sys.meta_path.insert(0, _watcher)
