"""PyTorch's OpInfo database (`op_db`) on mydev against torch CPU, as OpenReg's test_opinfo.py.

Each case is one OpInfo entry at one of float32, int64, bool, bfloat16 (where its CPU kernels
support it); each sample runs as given and as `sample.noncontiguous()`, and mydev must give
what CPU gives: dtype, shape, strides, device (mydev) of every output, values bit-exact where
CPU is deterministic (`torch.testing.assert_close` defaults otherwise, NaNs equal), and the
same exception type. Random ops are seeded before each call (mydev draws CPU's stream);
`empty`-like ops are compared on what torch defines (no values).

Default (`ci` profile): a stable quarter of the op x dtype pairs, first sample of each, plus
every XFAILS pair with all its samples. `HYPOTHESIS_PROFILE=deep`: every pair, every sample.
Left out: `opinfo_tables.EXCLUDED` (docs/opinfo.md); known bugs: `opinfo_tables.XFAILS`.
"""

from __future__ import annotations

import gc
import re
import warnings
from pathlib import Path

import pytest
import torch

from tests.ops import opinfo_support as support
from tests.ops.opinfo_tables import (
    ADDRESS_DEPENDENT,
    CPU_ARGUMENTS,
    DEVICE_POLICY,
    EXCLUDED,
    UNDEFINED_VALUES,
    XFAILS,
)
from tests.support.profile import deep

DOC = Path(__file__).resolve().parents[2] / "docs" / "opinfo.md"


def _params() -> list:
    params = []
    for case in support.cases(deep()):
        reason = support.xfail_reason(case)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(case, id=case.id, marks=marks))
    return params


@pytest.mark.parametrize("case", _params())
def test_opinfo_sample_matches_cpu(case: support.Case) -> None:
    """Every sample (and its non-contiguous form) gives on mydev what it gives on CPU."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ops' own deprecation/UB warnings, same on both
        failure = None
        for i, sample in enumerate(support.samples(case)):
            try:
                support.check_sample(case.op, sample)
            except AssertionError as error:
                failure = f"sample {i}: {sample.summary()}\n{error}"
                break
    if failure is not None:
        # Raised outside the `except`: the first error's frames (holding mydev tensors) are
        # gone, so an expected failure (strict xfail) leaves no mydev memory behind.
        gc.collect()
        raise AssertionError(failure)


def test_tables_name_op_db_entries() -> None:
    """Every name in the tables is an op_db entry (a renamed entry must not be silently lost)."""
    names = {support.full_name(op) for op in support.op_db}
    listed = set(EXCLUDED) | set(UNDEFINED_VALUES) | set(CPU_ARGUMENTS) | set(ADDRESS_DEPENDENT)
    listed |= set(DEVICE_POLICY)
    listed |= {k for k, _ in XFAILS}
    assert listed <= names, sorted(listed - names)
    dtypes = {support.dtype_name(d) for d in support.DTYPES}
    assert {d for _, d in XFAILS if d is not None} <= dtypes
    assert not set(EXCLUDED) & {k for k, _ in XFAILS}, "an op is either excluded or an xfail"


def test_doc_lists_the_exclusions() -> None:
    """docs/opinfo.md's exclusion table holds exactly `EXCLUDED` (same names, same reasons)."""
    text = DOC.read_text()
    section = text.split("## Left out", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([^`]+)` \| (.+?) \|$", section, flags=re.MULTILINE)
    assert dict(rows) == EXCLUDED
    for name in UNDEFINED_VALUES | DEVICE_POLICY | ADDRESS_DEPENDENT | set(CPU_ARGUMENTS):
        assert f"`{name.split(':')[0]}" in text, f"{name} is not named in docs/opinfo.md"


def test_default_selection_is_stable_and_a_share() -> None:
    """The CI share is the same on every run and covers every listed xfail."""
    first = [c.id for c in support.cases(False)]
    assert first == [c.id for c in support.cases(False)]
    total = sum(1 for _ in support.all_pairs())
    assert 0 < len(first) < total
    xfail_ids = {c.id for c in support.cases(False) if support.xfail_reason(c)}
    expected = {
        f"{support.full_name(op)}-{support.dtype_name(d)}"
        for op, d in support.all_pairs()
        if (support.full_name(op), support.dtype_name(d)) in XFAILS
        or (support.full_name(op), None) in XFAILS
    }
    assert xfail_ids == expected


def test_check_sample_catches_a_wrong_result() -> None:
    """The checker is not vacuous: a mydev result that differs from CPU fails it."""

    class Wrong:
        name, variant_test_name, is_factory_function = "wrong", "", False

        def __call__(self, x: torch.Tensor) -> torch.Tensor:
            return x + 1 if x.device.type == "mydev" else x

    from torch.testing._internal.opinfo.core import SampleInput

    with pytest.raises(AssertionError, match="not equal"):
        support.check_sample(Wrong(), SampleInput(torch.arange(4.0)))


def test_check_sample_catches_wrong_strides_and_device() -> None:
    """Strides and the device of outputs are compared, not only values."""
    from torch.testing._internal.opinfo.core import SampleInput

    class Restrided:
        name, variant_test_name, is_factory_function = "restrided", "", False

        def __call__(self, x: torch.Tensor) -> torch.Tensor:
            return x.t().contiguous().t() if x.device.type == "mydev" else x.clone()

    class OnCpu(Restrided):
        def __call__(self, x: torch.Tensor) -> torch.Tensor:
            return x.cpu().clone()

    with pytest.raises(AssertionError, match="strides"):
        support.check_sample(Restrided(), SampleInput(torch.ones(2, 3)))
    with pytest.raises(AssertionError, match="device cpu, expected mydev"):
        support.check_sample(OnCpu(), SampleInput(torch.ones(2, 3)))
