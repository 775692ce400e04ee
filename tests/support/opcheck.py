"""``torch.library.opcheck`` on mydev, judged against the same call on CPU.

Every check must pass, or fail on mydev exactly as on CPU; the schema and fake-tensor checks
must pass on CPU. torch 2.14's ``test_aot_dispatch_dynamic`` fails ``out=`` overloads whose
``out`` it must resize (``out=torch.empty(0)``) on CPU as well ("expand: the requested shape
has too few dimensions!"), where torch 2.13 passes them.
"""

from __future__ import annotations

from typing import Any

import torch

UTILS = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")


def _outcomes(op: Any, args: tuple, kwargs: dict, utils: tuple[str, ...]) -> dict[str, str]:
    """Each check's outcome: "SUCCESS", or the error it failed with."""
    result = torch.library.opcheck(op, args, kwargs, test_utils=utils, raise_exception=False)
    return {k: v if v == "SUCCESS" else f"{type(v).__name__}: {v}" for k, v in result.items()}


def _cpu(x: Any) -> Any:
    return x.cpu() if isinstance(x, torch.Tensor) else x


def assert_opcheck_like_cpu(
    op: Any,
    args: tuple,
    kwargs: dict | None = None,
    utils: tuple[str, ...] = UTILS,
    cpu_call: tuple[tuple, dict] | None = None,
) -> None:
    """opcheck ``op`` on mydev ``args``: all checks pass, or fail as on CPU's copies of
    them (or on ``cpu_call``'s arguments, where CPU has no kernel for these)."""
    kwargs = kwargs or {}
    result = _outcomes(op, args, kwargs, utils)
    if set(result.values()) == {"SUCCESS"}:
        return
    cpu_args, cpu_kwargs = cpu_call or (args, kwargs)
    cpu_args = tuple(_cpu(a) for a in cpu_args)
    cpu = _outcomes(op, cpu_args, {k: _cpu(v) for k, v in cpu_kwargs.items()}, utils)
    assert result == cpu
    assert all(cpu[u] == "SUCCESS" for u in ("test_schema", "test_faketensor") if u in cpu), cpu
