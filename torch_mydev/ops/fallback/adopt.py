"""Whether a CPU op's new results may become mydev tensors without a copy (``_C._adopt``).

mydev memory is host memory, so the block CPU's allocator made for a result can become the
mydev tensor's storage (``csrc_stub/ops/alias.cpp`` ``adopt_cpu_result``): the stub takes only a
plain dense tensor over a plain block of CPU's allocator held by that result alone. What no
C++ reference count shows is a tensor Python code still holds, which a Python kernel
registered for an aten op's CPU key may return: while any is registered, nothing is adopted.
"""

from __future__ import annotations

import torch

__all__ = ["may_adopt"]

# Python kernels registered for aten ops on CPU (or as their composites) may return a tensor
# Python code still holds (a cached table), which no C++ reference count shows: while any is
# registered, no result is adopted. Re-read when torch.library's record of them grows.
_PYTHON_CPU_KEYS = ("/CPU", "/CompositeExplicitAutograd", "/CompositeImplicitAutograd", "/")
_python_kernels_seen = (-1, True)


def may_adopt(op: torch._ops.OpOverload) -> bool:
    """Whether ``op``'s new results come from C++ kernels only: an aten op, and no Python
    kernel registered for any aten op's CPU or composite key (``torch.library._impls``)."""
    global _python_kernels_seen
    if op.namespace != "aten":
        return False
    registered = torch.library._impls
    count, found = _python_kernels_seen
    if count != len(registered):
        found = any(
            key.startswith("aten/") and key.endswith(_PYTHON_CPU_KEYS) for key in registered
        )
        _python_kernels_seen = (len(registered), found)
    return not found
