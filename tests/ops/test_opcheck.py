"""torch.library.opcheck over every overload mydev registers a Python kernel for: schema,
fake tensor and AOT checks, each passing or failing as the same call on CPU.

The cases and the exclusions are ``tests/ops/opcheck_cases.py``; the overloads are the
registration table, ``torch_mydev.ops.registry.KERNELS``.
"""

import pytest
import torch

from tests.ops.opcheck_cases import CASES, EXCLUDED
from tests.support.opcheck import assert_opcheck_like_cpu
from torch_mydev.ops.registry import KERNELS


def test_every_registered_overload_has_a_case_or_a_reason():
    """A registered overload with neither an opcheck case nor an exclusion fails here, by
    name; so does a case or exclusion for an overload that is not registered."""
    with_case = {case.overload for case in CASES}
    missing = sorted(set(KERNELS) - with_case - set(EXCLUDED))
    assert not missing, f"registered overloads with no opcheck case and no reason: {missing}"
    stale = sorted((with_case | set(EXCLUDED)) - set(KERNELS))
    assert not stale, f"opcheck cases or exclusions for overloads not registered: {stale}"
    assert not with_case & set(EXCLUDED), sorted(with_case & set(EXCLUDED))
    assert all(isinstance(r, str) and r.strip() for r in EXCLUDED.values()), EXCLUDED


def test_case_ids_are_unique():
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_opcheck(case):
    """Every check passes, or fails as the same call on CPU fails (tests/support/opcheck.py)."""
    args, kwargs = case.build()
    cpu_call = case.cpu_args((args, kwargs)) if case.cpu_args else None
    assert_opcheck_like_cpu(case.op, args, kwargs, case.utils, cpu_call)


def test_schema_check_cannot_bind_an_argument_named_from():
    """Why ``_has_compatible_shallow_copy_type``'s case leaves out test_schema: torch's
    SchemaCheckMode normalises arguments to keywords, and ``from`` is a Python keyword. CPU's
    call never dispatches to the mode's op (the check passes there); mydev's kernel does."""
    from torch._subclasses.schema_check_mode import SchemaCheckMode

    op = torch.ops.aten._has_compatible_shallow_copy_type.default
    with SchemaCheckMode():
        assert op(torch.randn(3), torch.randn(2))
    x, y = torch.randn(3).to("mydev"), torch.randn(2).to("mydev")
    with pytest.raises(RuntimeError, match="Failed to normalize function"), SchemaCheckMode():
        op(x, y)
