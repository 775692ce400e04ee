"""Decides what is compared between CPU's result and the device's, and counts each check.

For every output tensor of a call, ``PROPERTIES`` are compared one by one, each one check:

- ``sizes``, ``strides``, ``storage_offset``, ``dtype``;
- the contiguity flags c10 keeps on every tensor (``TensorImpl::refresh_contiguous``):
  ``is_contiguous()`` for ``contiguous_format``, ``channels_last`` and
  ``channels_last_3d``, and ``is_non_overlapping_and_dense``;
- ``aliases``: which argument the output shares its storage with (a view, or ``self``
  returned as is), or none (a new tensor);

then, where the device's values can be read (not ``meta``) and the op defines them (not
``empty_like``), the values: bit for bit for ops that move or compute exactly, with
``torch.testing.assert_close``'s tolerances (NaN equal to NaN) for the others, since another
device may round a convolution or an ``exp`` differently. Values outside those tolerances
but within ``CROSS_DEVICE`` (PyTorch's own CUDA-against-CPU test, ``test_compare_cpu`` in
``test/test_ops.py``, allows ``atol=rtol=1e-3``), or within one unit of the dtype's last
place near zero (its ``eps`` as ``atol``: bfloat16's is 0.0078), still diverge, marked not
significant: a float16 norm summed in another order lands an ulp or two away.

When a call raises, its exception type is the one property compared (one check).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["CROSS_DEVICE", "PROPERTIES", "Outcome", "compare", "describe_outcome", "snapshot"]

CROSS_DEVICE = 1e-3  # test_compare_cpu's atol and rtol

PROPERTIES = (
    "sizes",
    "strides",
    "storage_offset",
    "dtype",
    "is_contiguous",
    "is_contiguous(channels_last)",
    "is_contiguous(channels_last_3d)",
    "is_non_overlapping_and_dense",
    "aliases",
)


@dataclass
class Outcome:
    """What one device gave for a call: a snapshot per output tensor, or an exception.

    ``tensors`` keeps the outputs themselves, for the values; it is not part of the report.
    """

    outputs: tuple[dict[str, Any], ...] = ()
    error: BaseException | None = None
    tensors: tuple[torch.Tensor, ...] = field(default=(), repr=False)


def snapshot(t: torch.Tensor, args: Sequence[Any]) -> dict[str, Any]:
    """The ``PROPERTIES`` of one output tensor ``t`` of a call on ``args``."""
    storage = t.untyped_storage()._cdata
    aliases = next(
        (
            i
            for i, a in enumerate(args)
            if isinstance(a, torch.Tensor) and a.untyped_storage()._cdata == storage
        ),
        None,
    )
    return {
        "sizes": tuple(t.shape),
        "strides": tuple(t.stride()),
        "storage_offset": t.storage_offset(),
        "dtype": str(t.dtype).removeprefix("torch."),
        "is_contiguous": t.is_contiguous(),
        "is_contiguous(channels_last)": t.is_contiguous(memory_format=torch.channels_last),
        "is_contiguous(channels_last_3d)": t.is_contiguous(memory_format=torch.channels_last_3d),
        "is_non_overlapping_and_dense": bool(torch.ops.aten.is_non_overlapping_and_dense(t)),
        "aliases": None if aliases is None else f"arg {aliases}",
    }


def describe_outcome(outcome: Outcome) -> dict[str, Any]:
    """The JSON-able form of an outcome: ``{"outputs": [...]}`` or ``{"error": ...}``."""
    if outcome.error is not None:
        error = outcome.error
        first = (str(error).strip().splitlines() or [""])[0][:200]
        return {"error": f"{type(error).__name__}: {first}"}
    return {"outputs": [dict(o) for o in outcome.outputs]}


def _error_name(error: BaseException) -> str:
    return type(error).__name__


def compare(cpu: Outcome, device: Outcome, values: str | None) -> tuple[int, list[str], bool]:
    """``(checks made, differences, significant)`` between CPU's outcome and the device's.

    ``values`` is ``"exact"``, ``"close"`` or None (not compared: the device cannot be read,
    or the op leaves its values undefined). A difference names the property and both sides;
    ``significant`` is False when every difference is in strides torch's own stride check
    ignores (dims of size 1, tensors without elements) and the flags those set.
    """
    if cpu.error is not None or device.error is not None:
        ours = "ok" if cpu.error is None else _error_name(cpu.error)
        theirs = "ok" if device.error is None else _error_name(device.error)
        return 1, [] if ours == theirs else [f"raises: cpu {ours}, device {theirs}"], True
    if len(cpu.outputs) != len(device.outputs):
        return 1, [f"outputs: cpu {len(cpu.outputs)}, device {len(device.outputs)}"], True
    checked, differences, significant = 0, [], False
    for i, (a, b) in enumerate(zip(cpu.outputs, device.outputs, strict=True)):
        where = f"output {i} " if len(cpu.outputs) > 1 else ""
        for name in PROPERTIES:
            checked += 1
            if a[name] != b[name]:
                differences.append(f"{where}{name}: cpu {a[name]}, device {b[name]}")
                significant = significant or _significant(name, a, b)
        if values is not None and a["sizes"] == b["sizes"] and a["dtype"] == b["dtype"]:
            checked += 1
            problem, strong = _values_differ(cpu.tensors[i], device.tensors[i], values)
            if problem:
                differences.append(f"{where}values: {problem}")
                significant = significant or strong
    return checked, differences, significant


_FLAGS = tuple(name for name in PROPERTIES if name.startswith("is_"))


def _significant(name: str, a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether a difference in property ``name`` is one torch's own stride check would see.

    ``check_significant_strides`` (``torch._prims_common``; ``assertEqual`` applies it to
    CUDA tensors only) compares strides only of tensors with elements, and only on dims of
    size above 1; the contiguity flags follow the strides. A difference it would not see is
    still a divergence, marked not significant.
    """
    if name != "strides" and name not in _FLAGS:
        return True
    if a["sizes"] != b["sizes"] or a["strides"] is None or b["strides"] is None:
        return True
    if 0 in a["sizes"]:
        return False
    return any(
        size > 1 and x != y
        for size, x, y in zip(a["sizes"], a["strides"], b["strides"], strict=True)
    )


def _comparable(t: torch.Tensor) -> torch.Tensor:
    """A CPU copy ``assert_close`` can read (complex32 and the float8 types widened)."""
    t = t.detach().cpu()
    if t.dtype == torch.complex32:
        return t.to(torch.complex64)
    if t.dtype.is_floating_point and t.dtype.itemsize == 1:
        return t.to(torch.float32)
    return t


def _bytes(t: torch.Tensor) -> torch.Tensor:
    """The bytes of ``t``'s elements in C order (a fresh 1-D tensor: its stride is 1)."""
    flat = torch.empty(t.numel(), dtype=t.dtype)
    flat.copy_(t.detach().cpu().reshape(-1))
    return flat.view(torch.uint8)


def _close(actual: torch.Tensor, expected: torch.Tensor, **tolerances: float) -> str | None:
    try:
        torch.testing.assert_close(
            _comparable(actual),
            _comparable(expected),
            equal_nan=True,
            check_stride=False,
            **tolerances,
        )
    except AssertionError as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        return "; ".join(lines[:3])
    return None


def _loose(t: torch.Tensor) -> dict[str, float]:
    """``CROSS_DEVICE``, ``assert_close``'s own tolerance where that is looser (bfloat16's
    ``rtol``), and the dtype's ``eps`` as ``atol`` where that is (float16, bfloat16)."""
    if not (t.dtype.is_floating_point or t.dtype.is_complex):
        return {}
    rtol, atol = torch.testing._comparison.default_tolerances(_comparable(t))
    eps = torch.finfo(t.dtype).eps if t.dtype.itemsize <= 2 else 0.0
    return {"rtol": max(rtol, CROSS_DEVICE), "atol": max(atol, CROSS_DEVICE, eps)}


def _values_differ(
    expected: torch.Tensor, actual: torch.Tensor, mode: str
) -> tuple[str | None, bool]:
    """``(why actual's values are not expected's, significant)``, ``(None, False)`` when
    they agree."""
    if mode == "exact" and torch.equal(_bytes(expected), _bytes(actual)):
        return None, False
    problem = _close(actual, expected)
    if problem is None:
        if mode == "exact":
            return "not bit-identical (equal within assert_close's tolerances)", True
        return None, False
    if _close(actual, expected, **_loose(expected)) is None:
        return f"within the cross-device tolerance, not close: {problem}", False
    return f"not close: {problem}", True
