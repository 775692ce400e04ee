"""Keep dynamo out of mydev's own Python kernels, whichever ``torch.compile`` backend runs.

Eager ops that run while a compiled function is active (autograd's backward, the code after
a graph break) reach mydev's kernels, which are Python: dynamo's frame hook would trace them
(and fails on their numpy/numba code). ``torch._dynamo.trace_rules.add`` puts a package's
directory on dynamo's skip list; `install` calls it as soon as ``trace_rules`` exists (now,
or right after dynamo imports it) without importing dynamo itself.
"""

from __future__ import annotations

import types

from torch_mydev.compile.on_import import after_import

_MODULE = "torch._dynamo.trace_rules"
_PACKAGES = ("torch_mydev", "torch_mydev_rules")


def _skip(trace_rules: types.ModuleType) -> None:
    for package in _PACKAGES:
        trace_rules.add(package)


def install() -> None:
    """Skip mydev's packages in dynamo now if it is loaded, else once it loads."""
    after_import(_MODULE, _skip)
