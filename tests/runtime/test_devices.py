"""Several mydev devices (TORCH_MYDEV_DEVICE_COUNT, default 2): the current device is per
thread, tensors keep their index through kernels, the fallback and copies, each device has
its own statistics and generator, and mixing devices raises CUDA's error."""

import gc
import subprocess
import sys
import threading
import warnings

import pytest
import torch

from tests.support.subprocess_run import AUTOLOAD, environment, run_python
from torch_mydev import _C

_ENV = environment({AUTOLOAD: None})  # torch's own autoload loads the device


@pytest.fixture(autouse=True)
def back_to_device_zero():
    yield
    torch.mydev.set_device(0)


@pytest.fixture
def device_one_returns_to_baseline():
    """The suite's leak check watches the current device; this watches mydev:1."""
    gc.collect()
    before = torch.mydev.memory_allocated(1)
    yield
    gc.collect()
    assert torch.mydev.memory_allocated(1) <= before, "mydev:1 memory leaked"


def test_device_count_comes_from_the_environment():
    out = run_python(
        "import torch; t = torch.empty(1, device='mydev:3'); "
        "print(torch.mydev.device_count(), torch.accelerator.device_count(), t.device)",
        env={AUTOLOAD: None, "TORCH_MYDEV_DEVICE_COUNT": "4"},
    )
    assert out.stdout.split() == ["4", "4", "mydev:3"]


def test_bad_device_count_fails_the_import_with_its_name():
    values = ["0", "17", "two"]  # run side by side: each pays for importing torch
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", "import torch_mydev"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**_ENV, "TORCH_MYDEV_DEVICE_COUNT": value},
        )
        for value in values
    ]
    for value, proc in zip(values, procs, strict=True):
        _, stderr = proc.communicate()
        assert proc.returncode != 0, value
        assert f"TORCH_MYDEV_DEVICE_COUNT must be an integer from 1 to 16, got '{value}'" in stderr


def test_set_device_and_current_device():
    assert torch.mydev.current_device() == 0
    torch.mydev.set_device(1)
    assert torch.mydev.current_device() == 1
    torch.mydev.set_device(torch.device("mydev", 0))
    assert torch.mydev.current_device() == 0
    torch.mydev.set_device(-1)  # as torch.cuda.set_device: a negative index is a no-op
    assert torch.mydev.current_device() == 0
    assert torch.mydev._exchange_device(1) == 0
    assert torch.mydev._exchange_device(-1) == -1
    assert torch.mydev._maybe_exchange_device(0) == 1


def test_current_device_is_per_thread():
    torch.mydev.set_device(1)
    seen = []
    thread = threading.Thread(target=lambda: seen.append(torch.mydev.current_device()))
    thread.start()
    thread.join()
    assert seen == [0] and torch.mydev.current_device() == 1


def test_a_device_without_index_is_the_current_device():
    torch.mydev.set_device(1)
    made = [
        torch.empty(2, device="mydev"),
        torch.zeros(2, device="mydev"),
        torch.randn(2, device="mydev"),
        torch.arange(3, device="mydev"),
        torch.ones(2).to("mydev"),
        torch.ones(2).mydev(),
    ]
    for t in made:
        assert t.device == torch.device("mydev:1")
        assert t.untyped_storage().device == torch.device("mydev:1")
    assert torch.UntypedStorage(4, device="mydev").device == torch.device("mydev:1")


@pytest.mark.usefixtures("device_one_returns_to_baseline")
def test_results_stay_on_the_device_of_their_inputs():
    warnings.simplefilter("ignore")  # fallback warnings
    x = torch.arange(12.0).reshape(3, 4)
    b = x.to("mydev:1")
    results = {
        "add": b + b,
        "add again (cached entry)": b + b,
        "mul number": b * 2,
        "sin": b.sin(),
        "sin again": b.sin(),
        "clone": b.clone(),
        "contiguous": b.t().contiguous(),
        "cast": b.to(torch.int32),
        "sum (fallback)": b.sum(),
        "cumsum (fallback)": b.cumsum(0),
        "mm (fallback)": b @ b.t(),
        "empty_like": torch.empty_like(b),
        "where": torch.where(b > 1, b, b),
        "index": b[torch.tensor([1], device="mydev:1")],
        "arange": torch.arange(6.0, device="mydev:1"),
    }
    for name, r in results.items():
        assert r.device == torch.device("mydev:1"), name
        assert r.untyped_storage().device == torch.device("mydev:1"), name
    assert torch.equal(results["add"].cpu(), x + x)
    assert torch.equal(results["mm (fallback)"].cpu(), x @ x.t())


@pytest.mark.usefixtures("device_one_returns_to_baseline")
def test_copies_across_devices_are_bit_exact_and_counted_per_device():
    gc.collect()
    x = torch.randn(5, 7, dtype=torch.float64).t()
    before = [torch.mydev.memory_allocated(i) for i in (0, 1)]
    a = x.to("mydev:0")
    b = a.to("mydev:1")
    assert b.device == torch.device("mydev:1") and b.stride() == x.stride()
    assert torch.equal(b.cpu(), x)
    assert torch.mydev.memory_allocated(1) == before[1] + x.nbytes
    assert torch.mydev.memory_allocated(0) == before[0] + x.nbytes
    c = torch.empty_like(a)
    c.copy_(b)
    assert torch.equal(c.cpu(), x)
    assert torch.equal(b.to("mydev:0").cpu(), x)
    del a, b, c
    gc.collect()
    assert [torch.mydev.memory_allocated(i) for i in (0, 1)] == before


def test_resize_keeps_the_device():
    t = torch.empty(0, device="mydev:1")
    t.resize_(100)
    assert t.untyped_storage().device == torch.device("mydev:1")
    s = torch.UntypedStorage(4, device="mydev:1")
    s.resize_(64)
    assert s.device == torch.device("mydev:1")
    assert torch.empty(3, device="mydev:1").set_().untyped_storage().device.index == 1


@pytest.mark.parametrize(
    "op",
    [
        lambda a, b: torch.add(a, b),
        lambda a, b: a * b,
        lambda a, b: torch.atan2(a, b),
        lambda a, b: a.add_(b),
    ],
    ids=["add", "mul", "atan2 (fallback)", "add_"],
)
def test_mixing_devices_raises_cudas_error(op):
    a = torch.ones(3, device="mydev:0")
    b = torch.ones(3, device="mydev:1")
    message = (
        "Expected all tensors to be on the same device, but found at least two devices, "
        "mydev:0 and mydev:1!"
    )
    with pytest.raises(RuntimeError) as error:
        op(a, b)
    assert message in str(error.value)


def test_each_device_has_its_own_generator():
    g0, g1 = torch.mydev.default_generator(0), torch.mydev.default_generator(1)
    assert g0.device == torch.device("mydev:0") and g1.device == torch.device("mydev:1")
    torch.mydev.manual_seed(5, device=1)
    torch.mydev.manual_seed(6, device=0)
    assert g1.initial_seed() == 5 and g0.initial_seed() == 6
    torch.manual_seed(7)  # seeds every device
    assert g0.initial_seed() == g1.initial_seed() == 7
    first = torch.randn(4, device="mydev:1").cpu()
    torch.mydev.manual_seed(7, device=1)
    assert torch.equal(torch.randn(4, device="mydev:1").cpu(), first)
    torch.mydev.set_device(1)
    assert torch.mydev.initial_seed() == 7 and torch.mydev.default_generator() is not None
    assert _C._default_generator(-1).device == torch.device("mydev:1")


def test_device_guard_of_a_tensor_selects_its_device():
    b = torch.ones(2, device="mydev:1")
    with torch.accelerator.device_index(b.device.index):
        assert torch.mydev.current_device() == 1
        assert torch.empty(1, device="mydev").device.index == 1
    assert torch.mydev.current_device() == 0


@pytest.mark.usefixtures("device_one_returns_to_baseline")
def test_threads_on_different_devices_allocate_on_their_own():
    """Each thread's current device decides where its index-less tensors go; the per-device
    counters stay exact under concurrent allocation and freeing."""
    gc.collect()
    before = [torch.mydev.memory_allocated(i) for i in (0, 1)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def work(index: int) -> None:
        try:
            torch.mydev.set_device(index)
            barrier.wait()
            for n in range(1, 200):
                t = torch.empty(n, dtype=torch.uint8, device="mydev")
                assert t.device.index == index
                del t
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i % 2,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert [torch.mydev.memory_allocated(i) for i in (0, 1)] == before
    assert torch.mydev.current_device() == 0  # the threads' choices stayed theirs


def test_storage_resized_to_zero_and_back_keeps_its_device_and_bytes():
    """A mydev storage resized to 0 bytes stays on its device (ATen's resize_bytes_cpu left a
    CPU DataPtr there, and FSDP1's shard() then refused the storage); growing keeps the bytes."""
    for index in range(torch.mydev.device_count()):
        t = torch.arange(4.0, device=f"mydev:{index}")
        storage = t.untyped_storage()
        storage.resize_(8)
        assert storage.device == torch.device("mydev", index)
        assert torch.equal(
            torch.empty(0, device=t.device).set_(storage).view(torch.float32),
            torch.tensor([0.0, 1.0]).to(t.device),
        )
        storage.resize_(0)
        assert storage.device == torch.device("mydev", index) and storage.nbytes() == 0
        storage.resize_(12)
        assert storage.device == torch.device("mydev", index) and storage.nbytes() == 12


@pytest.mark.parametrize("device", ["mydev", None])
def test_set_device_without_an_index_raises_value_error_as_cuda(device):
    """torch.cuda.set_device("cuda") or (None): ValueError from _get_device_index."""
    before = torch.mydev.current_device()
    with pytest.raises(ValueError, match="with a specified index or an integer"):
        torch.mydev.set_device(torch.device(device) if device else device)
    assert torch.mydev.current_device() == before
