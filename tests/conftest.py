"""Shared test settings: hypothesis profiles (ci default, deep for long runs), one inductor
cache for the run, and a leak check."""

import gc
import os
import shutil
import sys
import tempfile

# The suite tests mydev's own loops: a call whose loop is not compiled yet compiles it in
# the caller (kernels/jit/compiler.py). Set before torch's import loads the device; tests of the
# background mode (tests/kernels/jit/test_compiler.py) run their own processes.
os.environ.setdefault("TORCH_MYDEV_COMPILE", "sync")

import pytest
import torch
from hypothesis import HealthCheck, settings

# One inductor cache for the whole run, new each run: every worker and subprocess inherits
# it, so inductor's probes of the CPU's vector ISAs and its kernel builds (keyed by their
# source) are made once a run, not once a process or a compile. No earlier run or user
# cache can answer for this one; tests/compile/conftest.py turns off the caches that keep
# whole graphs.
_inductor_cache_made = None
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    _inductor_cache_made = tempfile.mkdtemp(prefix="mydev-tests-inductor-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _inductor_cache_made

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


def pytest_report_header(config):
    """The torch this run tests against and the torch its mydev stub was built against
    (``make test TORCH=2.14.1`` runs the suite in another venv)."""
    import torch_mydev_autoload

    if torch_mydev_autoload.failure is not None:
        return f"torch {torch.__version__}; mydev not loaded: {torch_mydev_autoload.failure}"
    stub = getattr(sys.modules.get("torch_mydev"), "_C", None)
    if stub is None:  # TORCH_DEVICE_BACKEND_AUTOLOAD=0
        return f"torch {torch.__version__}; mydev not loaded"
    return (
        f"torch {torch.__version__}; mydev stub {stub.__name__} built against torch "
        f"{stub.TORCH_BUILD_VERSION}"
    )


def pytest_unconfigure(config):
    """The run's inductor cache goes with the process that made it (the xdist controller,
    after its workers are done)."""
    if _inductor_cache_made is not None:
        shutil.rmtree(_inductor_cache_made, ignore_errors=True)


def pytest_collection_finish(session):
    """Move every object alive after collection (torch, transformers, the test modules) to
    the collector's permanent generation (``gc.freeze``): a full collection then walks only
    what the tests made. The leak check below collects after a test that left memory
    allocated, and a full collection of the whole heap cost about 0.4 s a time here."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test item, so fixtures can see whether it failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(autouse=True)
def no_mydev_leak(request):
    """Every test must give back all mydev memory it allocated (torch.mydev.memory_allocated)."""
    module = getattr(torch, "mydev", None)
    if module is None:  # run with TORCH_DEVICE_BACKEND_AUTOLOAD=0: no device to watch
        yield
        return
    baseline = module.memory_allocated()
    yield
    call = getattr(request.node, "report_call", None)
    if call is not None and call.failed:
        return  # its traceback still holds the tensors; the failure is reported already
    if module.memory_allocated() > baseline:
        # Only when needed, the young generations first: what a test made and dropped in a
        # cycle is nearly always there (107 of 109 times in a run of 1,766 tests). A full
        # collection walks everything the suite has made since `gc.freeze` (numba's typing
        # leaves a lot): 0.2 s a time here, a quarter of those tests' time.
        gc.collect(1)
    if module.memory_allocated() > baseline:
        gc.collect()  # a cycle old enough to have reached the oldest generation
    # `<=`: garbage from before the test may be freed during it; a leak can only add.
    assert module.memory_allocated() <= baseline, "mydev memory leaked by this test"
