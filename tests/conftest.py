"""Shared test settings: hypothesis profiles (ci default, deep for long runs) and a leak check."""

import gc
import os

import pytest
import torch
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "deep",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def no_mydev_leak():
    """Every test must give back all mydev memory it allocated (torch.mydev.memory_allocated)."""
    module = getattr(torch, "mydev", None)
    if module is None:  # run with TORCH_DEVICE_BACKEND_AUTOLOAD=0: no device to watch
        yield
        return
    gc.collect()
    baseline = module.memory_allocated()
    yield
    gc.collect()
    # `<=`: a failed test before this one may still hold tensors in its traceback at the
    # baseline, and they are freed during this test; a leak can only make the count grow.
    assert module.memory_allocated() <= baseline, "mydev memory leaked by this test"
