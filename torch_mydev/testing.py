"""Differential testing for library authors: does a function give on mydev what it gives on CPU?

``compare(fn, *args, **kwargs)`` runs ``fn`` twice, once on CPU copies of the tensors in
``args``/``kwargs`` and once on mydev copies, and compares what came back: values (within
``torch.testing.assert_close`` tolerances, exact for integers and bools), dtypes, shapes,
strides, the device of every returned tensor (a mydev run that hands back a CPU tensor has a
hard-coded device somewhere), the inputs after the call (in-place updates), the ``.grad`` of
inputs that require grad, and exceptions (when CPU raises, mydev must raise the same type).

Example:

>>> import torch
>>> from torch_mydev.testing import compare
>>> x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
>>> report = compare(lambda t: torch.nn.functional.relu(t) * 2, x)
>>> report.ok, report.checked
(True, 2)
>>> compare(lambda t: t.cpu() + 1, x)
Traceback (most recent call last):
...
AssertionError: mydev differs from CPU:
  output: device cpu, expected mydev
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from torch_mydev import _C
from torch_mydev._names import DEVICE
from torch_mydev_rules.layout import is_non_overlapping_and_dense

__all__ = ["Comparison", "compare"]


@dataclass
class Comparison:
    """What ``compare`` saw: both results (or exceptions) and the differences found.

    ``checked`` counts the tensors compared (outputs, inputs after the call, gradients).
    ``ok`` is true when ``differences`` is empty; ``compare`` raises otherwise.
    """

    cpu: Any = None
    mydev: Any = None
    cpu_error: BaseException | None = None
    mydev_error: BaseException | None = None
    differences: list[str] = field(default_factory=list)
    checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.differences

    def __str__(self) -> str:
        if self.ok:
            raised = f"; both raised {type(self.cpu_error).__name__}" if self.cpu_error else ""
            return f"mydev agrees with CPU ({self.checked} tensors compared{raised})"
        return "mydev differs from CPU:\n" + "\n".join(f"  {d}" for d in self.differences)


# The former name (``torch_mydev.Report`` is explain's report, a different thing).
Report = Comparison


def compare(
    fn: Callable[..., Any],
    *args: Any,
    atol: float | None = None,
    rtol: float | None = None,
    check_strides: bool = True,
    **kwargs: Any,
) -> Comparison:
    """Run ``fn`` on CPU copies and on mydev copies of its tensor arguments; compare.

    Tensors may sit anywhere in ``args``/``kwargs``, nested in lists, tuples and dicts, and
    on either device; each is copied to both devices with its sizes, strides, storage offset
    and ``requires_grad``, and tensors that share storage share it in the copies too. ``fn``
    is called on each set, so it may modify its inputs. Values are compared with
    ``torch.testing.assert_close`` (its dtype-based tolerances unless ``atol``/``rtol`` are
    given; NaNs equal), strides exactly unless ``check_strides=False``.

    Random numbers: ``torch.manual_seed`` seeds mydev's generator too, and mydev draws the
    same stream CPU does, so a ``fn`` that seeds first compares equal.

    Returns the ``Comparison`` when nothing differs, raises ``AssertionError`` listing every
    difference otherwise.
    """
    if (atol is None) != (rtol is None):  # assert_close wants both or neither
        atol, rtol = atol or 0.0, rtol or 0.0
    report = Comparison()
    report.cpu, report.cpu_error, cpu_inputs = _run(fn, args, kwargs, torch.device("cpu"))
    report.mydev, report.mydev_error, dev_inputs = _run(fn, args, kwargs, torch.device(DEVICE))
    checker = _Checker(report, atol, rtol, check_strides)
    if report.cpu_error is not None or report.mydev_error is not None:
        checker.exceptions()
    else:
        checker.walk("output", report.cpu, report.mydev)
        checker.walk("inputs after the call", cpu_inputs, dev_inputs)
        for (path, c), (_, m) in zip(_leaves(cpu_inputs), _leaves(dev_inputs), strict=True):
            if isinstance(c, torch.Tensor) and c.requires_grad:
                checker.walk(f"{path}.grad", c.grad, m.grad)
    if not report.ok:
        raise AssertionError(str(report))
    return report


def _run(
    fn: Callable[..., Any], args: tuple, kwargs: dict, device: torch.device
) -> tuple[Any, BaseException | None, Any]:
    copier = _Copier(device, [t for _, t in _leaves((args, kwargs))])
    inputs = copier((args, kwargs))
    try:
        return fn(*inputs[0], **inputs[1]), None, inputs
    except Exception as error:
        return None, error, inputs


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, leaf) pairs of a nest of lists, tuples and dicts; tensors are leaves."""
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, f"{path}[{key!r}]")
    else:
        yield path, value


class _Copier:
    """Copies of tensors on one device: same layout, same sharing of storage."""

    def __init__(self, device: torch.device, leaves: list[Any]) -> None:
        self.device = device
        self.storages: dict[tuple[str, int], torch.UntypedStorage] = {}
        tensors = {id(t): t for t in leaves if isinstance(t, torch.Tensor)}
        keys = Counter(_storage_key(t) for t in tensors.values())
        self.shared = {key for key, n in keys.items() if n > 1}
        self.copies: dict[int, torch.Tensor] = {}

    def __call__(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if id(value) not in self.copies:
                self.copies[id(value)] = self._copy(value)
            return self.copies[id(value)]
        if isinstance(value, (list, tuple)):
            return type(value)(self(item) for item in value)
        if isinstance(value, dict):
            return {key: self(item) for key, item in value.items()}
        return value

    def _copy(self, t: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            source = t.detach()
            resolved = source.is_conj() or source.is_neg()
            if resolved:  # the copies hold the resolved values, in a storage of their own
                source = source.resolve_conj().resolve_neg()
            key = _storage_key(t)
            if resolved or (key not in self.shared and _dense(source)):
                out = torch.empty_strided(
                    source.shape, source.stride(), dtype=t.dtype, device=self.device
                )
                out.copy_(source)
            else:
                # Rebuild the exact view (offset, overlap, sharing) over a copy of the storage.
                if key not in self.storages:
                    raw = torch.empty(0, dtype=torch.uint8, device=t.device)
                    raw.set_(t.untyped_storage())
                    self.storages[key] = raw.to(self.device, copy=True).untyped_storage()
                out = torch.empty(0, dtype=t.dtype, device=self.device)
                out.set_(self.storages[key], t.storage_offset(), t.shape, t.stride())
        return out.requires_grad_(t.requires_grad)


def _storage_key(t: torch.Tensor) -> tuple[str, int]:
    """The tensor's device and storage address, read without materialising a lazy clone."""
    return (str(t.device), _C._storage_span(t)[0])


def _dense(t: torch.Tensor) -> bool:
    """Non-overlapping and dense, with no storage offset: ``empty_strided`` can hold it."""
    return t.storage_offset() == 0 and is_non_overlapping_and_dense(tuple(t.shape), t.stride())


class _Checker:
    """Walks two results side by side and writes each difference into the report."""

    def __init__(
        self, report: Comparison, atol: float | None, rtol: float | None, check_strides: bool
    ) -> None:
        self.report = report
        self.atol = atol
        self.rtol = rtol
        self.check_strides = check_strides

    def differ(self, path: str, what: str) -> None:
        self.report.differences.append(f"{path}: {what}")

    def exceptions(self) -> None:
        cpu, dev = self.report.cpu_error, self.report.mydev_error
        if cpu is None:
            self.differ("exception", f"mydev raised {type(dev).__name__}: {dev}; CPU did not")
        elif dev is None:
            self.differ("exception", f"CPU raised {type(cpu).__name__}: {cpu}; mydev did not")
        elif type(cpu) is not type(dev):
            self.differ(
                "exception",
                f"mydev raised {type(dev).__name__}: {dev}; CPU raised {type(cpu).__name__}: {cpu}",
            )

    def walk(self, path: str, cpu: Any, dev: Any) -> None:
        if isinstance(cpu, torch.Tensor) or isinstance(dev, torch.Tensor):
            self.tensor(path, cpu, dev)
        elif isinstance(cpu, (list, tuple)) and isinstance(dev, (list, tuple)):
            if len(cpu) != len(dev) or type(cpu) is not type(dev):
                self.differ(path, f"{_kind(dev)}, expected {_kind(cpu)}")
                return
            for i, (c, d) in enumerate(zip(cpu, dev, strict=True)):
                self.walk(f"{path}[{i}]", c, d)
        elif isinstance(cpu, dict) and isinstance(dev, dict):
            if list(cpu) != list(dev):
                self.differ(path, f"keys {list(dev)}, expected {list(cpu)}")
                return
            for key in cpu:
                self.walk(f"{path}[{key!r}]", cpu[key], dev[key])
        elif isinstance(cpu, float) and isinstance(dev, float):
            if not (math.isnan(cpu) and math.isnan(dev)):
                self.values(path, torch.tensor(cpu), torch.tensor(dev))
        elif type(cpu) is not type(dev) or cpu != dev:
            self.differ(path, f"{dev!r}, expected {cpu!r}")

    def tensor(self, path: str, cpu: Any, dev: Any) -> None:
        if not (isinstance(cpu, torch.Tensor) and isinstance(dev, torch.Tensor)):
            self.differ(path, f"{_kind(dev)}, expected {_kind(cpu)}")
            return
        self.report.checked += 1
        expected_device = DEVICE if cpu.device.type == "cpu" else cpu.device.type
        if dev.device.type != expected_device:
            self.differ(path, f"device {dev.device.type}, expected {expected_device}")
        if dev.dtype != cpu.dtype:
            self.differ(path, f"dtype {dev.dtype}, expected {cpu.dtype}")
        if dev.shape != cpu.shape:
            self.differ(path, f"shape {tuple(dev.shape)}, expected {tuple(cpu.shape)}")
            return
        if self.check_strides and dev.stride() != cpu.stride():
            self.differ(path, f"strides {dev.stride()}, expected {cpu.stride()}")
        if dev.dtype == cpu.dtype:
            self.values(path, cpu, dev)

    def values(self, path: str, cpu: torch.Tensor, dev: torch.Tensor) -> None:
        try:
            torch.testing.assert_close(
                dev.detach().cpu(),
                cpu.detach().cpu(),
                atol=self.atol,
                rtol=self.rtol,
                equal_nan=True,
                check_device=False,
                check_stride=False,
            )
        except AssertionError as error:
            self.differ(path, " ".join(str(error).split()))


def _kind(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)}"
    return repr(value)
