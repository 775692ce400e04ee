"""The torch.mydev module, the renamed device, generated methods, autoload and bad input."""

import os

import pytest
import torch

from tests.support.raises import raises_like_cpu
from tests.support.subprocess_run import AUTOLOAD, run_python


def test_module_functions():
    assert torch.mydev.is_available()
    assert torch.mydev.device_count() == int(os.environ.get("TORCH_MYDEV_DEVICE_COUNT", "2"))
    assert torch.mydev.current_device() == 0
    torch.mydev.set_device(0)
    torch.mydev.set_device("mydev:0")
    torch.mydev.synchronize()
    assert torch._C._get_privateuse1_backend_name() == "mydev"


@pytest.mark.parametrize("bad", [16, "mydev:16", torch.device("mydev", 17)])
def test_bad_ordinal_is_a_runtime_error(bad):
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.mydev.set_device(bad)


def test_other_device_type_is_rejected():
    with pytest.raises(ValueError, match="expected a mydev device"):
        torch.mydev.memory_allocated("cpu")


def test_empty_on_device():
    t = torch.empty(2, 3, device="mydev")
    assert t.device == torch.device("mydev:0")
    assert t.is_mydev and not t.is_cpu
    assert t.dtype == torch.get_default_dtype()
    assert (t.shape, t.stride(), t.storage_offset()) == ((2, 3), (3, 1), 0)
    assert t.untyped_storage().data_ptr() % 64 == 0


def test_generated_methods_exist():
    assert hasattr(torch.Tensor, "mydev") and hasattr(torch.Tensor, "is_mydev")
    assert hasattr(torch.nn.Module, "mydev")
    assert hasattr(torch.UntypedStorage, "mydev")
    assert torch.UntypedStorage(8, device="mydev").is_mydev


@pytest.mark.parametrize(
    "imports",
    ["import torch", "import torch_mydev; import torch", "import torch_mydev"],
    ids=["torch-alone", "package-first", "package-alone"],
)
def test_autoload_in_any_import_order(imports):
    """`import torch` alone loads the device through the torch.backends entry point, and
    importing the package first (torch's autoload then meets it half imported) works too."""
    code = f"{imports}; import torch; t = torch.empty(3, device='mydev'); print(t.device)"
    out = run_python(code, env={AUTOLOAD: None})
    assert out.stdout.split() == ["mydev:0"]


@pytest.mark.parametrize(
    "make",
    [
        lambda d: torch.empty(-1, device=d),
        lambda d: torch.empty(3, -2, device=d),
        lambda d: torch.empty_strided((2, -1), (1, 1), device=d),
        lambda d: torch.empty(2**62, 8, device=d),
        lambda d: torch.empty(2**45, dtype=torch.uint8, device=d),
        lambda d: torch.empty(2, 3, memory_format=torch.channels_last, device=d),
        lambda d: torch.empty(2, 3, 4, 5, 6, memory_format=torch.channels_last, device=d),
        lambda d: torch.empty(2, 3, memory_format=torch.preserve_format, device=d),
    ],
)
def test_bad_sizes_raise_like_cpu(make):
    assert isinstance(raises_like_cpu(lambda: make("cpu"), lambda: make("mydev")), RuntimeError)


def test_device_ordinal_past_the_count_raises():
    bad = f"mydev:{torch.mydev.device_count()}"
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.empty(3, device=bad)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.UntypedStorage(8, device=bad)


def test_manual_seed_reaches_mydev_generator():
    torch.manual_seed(1234)
    assert torch.mydev.initial_seed() == 1234
    state = torch.mydev.get_rng_state()
    torch.mydev.seed()
    torch.mydev.set_rng_state(state)
    assert torch.equal(torch.mydev.get_rng_state(), state)
    assert torch.mydev.default_generator().device == torch.device("mydev:0")
    g = torch.Generator(device="mydev")
    assert g.device == torch.device("mydev:0")


def test_generated_methods_move_data():
    x = torch.randn(3, 4).t()
    t = x.mydev()
    assert t.is_mydev and t.stride() == x.stride() and torch.equal(t.cpu(), x)
    m = torch.nn.Linear(3, 2)
    weight = m.weight.detach().clone()
    m.mydev()
    assert m.weight.is_mydev and torch.equal(m.weight.detach().cpu(), weight)
    s = torch.UntypedStorage(8).mydev()
    assert s.is_mydev and s.nbytes() == 8


@pytest.mark.parametrize("enabled", [True, False])
def test_loading_numba_leaves_the_garbage_collector_as_it_was(enabled):
    """The first kernel pauses the cyclic GC while numba loads, then restores its state."""
    code = (
        "import gc, torch; "
        + ("" if enabled else "gc.disable(); ")
        + "x = torch.randn(8, 8).to('mydev') * 2; "  # arithmetic needs a numba loop
        + "import sys; print(gc.isenabled(), 'numba' in sys.modules)"
    )
    out = run_python(code, env={AUTOLOAD: None})
    assert out.stdout.split() == [str(enabled), "True"]
