"""PyTorch's OpInfo samples (`op_db`) run on mydev and on CPU: which cases, and how one is checked.

The truth is torch CPU running the same OpInfo sample (`op.sample_inputs("cpu", dtype)`), as
PyTorch's OpenReg backend does in test/cpp_extensions/open_registration_extension/torch_openreg/
tests/test_opinfo.py; each sample also runs as `sample.noncontiguous()` (every tensor a strided
view of the same values). `torch_mydev.testing.compare` copies each input to mydev with its
sizes, strides and offset, and compares dtype, shape, strides, device and values of every output
(and the inputs after the call).

The tables that say what does not work (`EXCLUDED`, `XFAILS`) live in `opinfo_tables.py`.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.testing._internal import common_utils
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo import core as opinfo_core
from torch.testing._internal.opinfo.core import OpInfo, SampleInput

from tests.ops.opinfo_tables import (
    ADDRESS_DEPENDENT,
    CPU_ARGUMENTS,
    DEVICE_POLICY,
    EXCLUDED,
    UNDEFINED_VALUES,
    XFAILS,
)
from tests.support.tensors import same_bits
from torch_mydev.testing import Comparison, _run, compare

DTYPES = (torch.float32, torch.int64, torch.bool, torch.bfloat16)

# Default (`ci`) profile: every op x dtype pair whose stable hash falls in 1 of DEFAULT_SHARE
# buckets, first sample only (contiguous and non-contiguous). `deep`: every pair, every sample.
DEFAULT_SHARE = 4
DEFAULT_SAMPLES = 1


def full_name(op: OpInfo) -> str:
    """`name` or `name:variant_test_name`: one key per OpInfo entry."""
    return f"{op.name}:{op.variant_test_name}" if op.variant_test_name else op.name


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class Case:
    """One OpInfo entry at one dtype, and how many of its samples to run (None: all)."""

    op: OpInfo
    dtype: torch.dtype
    samples: int | None

    @property
    def id(self) -> str:
        return f"{full_name(self.op)}-{dtype_name(self.dtype)}"


def _in_default_share(key: str) -> bool:
    return zlib.crc32(key.encode()) % DEFAULT_SHARE == 0


def all_pairs() -> Iterator[tuple[OpInfo, torch.dtype]]:
    """Every op_db entry (not excluded) at every DTYPES member its CPU kernels support."""
    for op in op_db:
        if full_name(op) in EXCLUDED:
            continue
        supported = op.supported_dtypes("cpu")
        for dtype in DTYPES:
            if dtype in supported:
                yield op, dtype


def cases(run_deep: bool) -> list[Case]:
    """The cases of a run: all of them deep; in CI a stable share plus every XFAILS entry.

    An XFAILS pair always runs with all its samples, so its strict xfail is checked in CI
    whichever sample shows the bug.
    """
    out = []
    for op, dtype in all_pairs():
        key = f"{full_name(op)}-{dtype_name(dtype)}"
        listed = (full_name(op), dtype_name(dtype)) in XFAILS or (full_name(op), None) in XFAILS
        if run_deep or listed:
            out.append(Case(op, dtype, None))
        elif _in_default_share(key):
            out.append(Case(op, dtype, DEFAULT_SAMPLES))
    return out


def xfail_reason(case: Case) -> str | None:
    """The XFAILS entry for this case (dtype-specific first, then any dtype), or None."""
    for key in ((full_name(case.op), dtype_name(case.dtype)), (full_name(case.op), None)):
        if key in XFAILS:
            owner, bug = XFAILS[key]
            return f"[{owner}] {bug}"
    return None


def samples(case: Case) -> Iterator[SampleInput]:
    """The case's CPU samples, each as given and as `sample.noncontiguous()`."""
    for i, sample in enumerate(_sample_inputs(case)):
        if case.samples is not None and i >= case.samples:
            return
        yield sample
        if not case.op.is_factory_function:
            yield sample.noncontiguous()


def _sample_inputs(case: Case) -> Iterator[SampleInput]:
    """`op.sample_inputs("cpu", dtype)` without its searches for a unittest test function.

    `sample_inputs` looks for the `unittest.TestCase` method that runs it twice, by name in
    both of torch's modules: for a sample's skips (`OpInfo._sample_callback_fn`) and for the
    iterator it returns (`TrackedInputIter`). Each search walks `inspect.stack()`, which
    reads the source of every frame: about 25 ms here, together a third of this file's
    time. Our tests are pytest functions, so the search always finds nothing; it is skipped,
    and the samples (seeded from `SEED` when no test function is found) are the same.
    """
    modules = (common_utils, opinfo_core)
    found = [module.extract_test_fn for module in modules]
    for module in modules:
        module.extract_test_fn = lambda: None
    try:
        return case.op.sample_inputs("cpu", case.dtype)
    finally:
        for module, function in zip(modules, found, strict=True):
            module.extract_test_fn = function


def _caller(op: OpInfo, undefined: bool) -> Callable[..., Any]:
    """`op(input, *args, **kwargs)` on the device of `probe`, seeded; factories get that device.

    `probe` is an empty tensor that `compare` copies to each device like every other input:
    it tells the call which run it is in. Positional arguments torch wants on CPU whatever the
    device (`CPU_ARGUMENTS`, as on CUDA) are moved back to CPU. Outputs of ops whose values
    torch leaves undefined (`empty` and friends) are reduced to what is defined: dtype, shape,
    strides, device.
    """

    cpu_positions = CPU_ARGUMENTS.get(full_name(op), ())

    def call(probe: torch.Tensor, inp: Any, args: tuple, kwargs: dict) -> Any:
        device = probe.device
        args = tuple(
            a.cpu() if i in cpu_positions and isinstance(a, torch.Tensor) else _on(a, device)
            for i, a in enumerate(args)
        )
        kwargs = {k: _on(v, device) for k, v in kwargs.items()}
        if op.is_factory_function and "device" not in kwargs:  # else both runs make CPU tensors
            kwargs["device"] = device
        torch.manual_seed(0)  # random ops draw the same stream on both devices
        out = op(inp, *args, **kwargs)
        return _defined(out, probe.device) if undefined else out

    return call


def _on(value: Any, device: torch.device) -> Any:
    """A CPU device argument (`torch.device("cpu")` or `"cpu"`) made the run's device."""
    if isinstance(value, torch.device) and value.type == "cpu":
        return device
    if isinstance(value, str) and value == "cpu":
        return str(device)
    return value


def _defined(value: Any, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        same = value.device.type == device.type
        return (value.dtype, tuple(value.shape), value.stride(), same)
    if isinstance(value, (list, tuple)):
        return type(value)(_defined(v, device) for v in value)
    return value


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    else:
        yield value


def _deterministic(call: Callable[..., Any], arguments: tuple) -> bool:
    """CPU gives the same bits twice, the second time with every input at another address.

    Some CPU kernels (LAPACK's `gelsy` in `linalg.lstsq`, seen) round differently when the
    data sit at another alignment; mydev's copies sit where they sit, so such a call is
    compared within tolerance. Every other call must match exactly.
    """
    first, error1, _ = _run(call, arguments, {}, torch.device("cpu"))
    second, error2, _ = _run(call, _shifted(arguments), {}, torch.device("cpu"))
    if error1 is not None or error2 is not None:
        return True
    for a, b in zip(_leaves(first), _leaves(second), strict=True):
        if isinstance(a, torch.Tensor) and not same_bits(a, b):
            return False
    return True


SHIFT = 9  # elements: an odd shift misaligns every SIMD width


def _shifted(value: Any) -> Any:
    """The same values, sizes and strides, `SHIFT` elements further into a new storage."""
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided or value.numel() == 0:
            return value
        t = value.detach()
        n = t.untyped_storage().nbytes() // t.element_size()
        raw = torch.empty(n + SHIFT, dtype=t.dtype)
        raw[SHIFT:].copy_(torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (n,)))
        return raw.as_strided(t.shape, t.stride(), t.storage_offset() + SHIFT)
    if isinstance(value, (list, tuple)):
        return type(value)(_shifted(v) for v in value)
    if isinstance(value, dict):
        return {k: _shifted(v) for k, v in value.items()}
    return value


def check_sample(op: OpInfo, sample: SampleInput) -> Comparison:
    """Compare one sample on mydev with CPU; raises AssertionError naming every difference."""
    call = _caller(op, full_name(op) in UNDEFINED_VALUES | DEVICE_POLICY)
    arguments = (torch.empty(0), sample.input, tuple(sample.args), dict(sample.kwargs))
    if full_name(op) not in ADDRESS_DEPENDENT and _deterministic(call, arguments):
        return compare(call, *arguments, atol=0.0, rtol=0.0)
    return compare(call, *arguments)
