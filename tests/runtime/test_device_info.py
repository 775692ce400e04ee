"""torch.mydev.device / device_of, init / is_initialized / _initialized, device properties."""

import os
import shutil
import subprocess

import pytest
import torch

from tests.support.subprocess_run import run_python

TWO = pytest.mark.skipif(torch.mydev.device_count() < 2, reason="needs two mydev devices")


@TWO
@pytest.mark.parametrize(
    "arg", [1, "mydev:1", torch.device("mydev", 1)], ids=["int", "str", "device"]
)
def test_device_sets_and_restores(arg):
    assert torch.mydev.current_device() == 0
    with torch.mydev.device(arg):
        assert torch.mydev.current_device() == 1
        assert torch.empty(2, device="mydev").device == torch.device("mydev:1")
    assert torch.mydev.current_device() == 0


@TWO
def test_device_restores_on_error_and_nests():
    with pytest.raises(KeyError), torch.mydev.device(1):
        with torch.mydev.device(0):
            assert torch.mydev.current_device() == 0
        assert torch.mydev.current_device() == 1
        raise KeyError
    assert torch.mydev.current_device() == 0


@pytest.mark.parametrize("arg", [None, -1], ids=["none", "negative"])
def test_device_none_or_negative_is_a_noop(arg):
    with torch.mydev.device(arg):
        assert torch.mydev.current_device() == 0
    assert torch.mydev.current_device() == 0


def test_device_bad_input_raises_like_cuda():
    with pytest.raises(ValueError, match="expected a mydev device"):
        torch.mydev.device("cpu")
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.mydev.device(16)


@TWO
def test_device_of():
    t = torch.ones(2, device="mydev:1")
    with torch.mydev.device_of(t):
        assert torch.mydev.current_device() == 1
    with torch.mydev.device_of(t.untyped_storage()):
        assert torch.mydev.current_device() == 1
    with torch.mydev.device_of(torch.ones(2)):  # a CPU tensor changes nothing
        assert torch.mydev.current_device() == 0
    assert torch.mydev.current_device() == 0


def test_initialized_after_first_use_in_fresh_process():
    code = (
        "import torch; m = torch.mydev; a = (m._initialized, m.is_initialized());"
        "torch.ones(1).to('mydev'); b = m._initialized; print(a, b)"
    )
    out = run_python(code)
    assert out.stdout.strip() == "(False, False) True"
    code = "import torch; torch.mydev.init(); print(torch.mydev.is_initialized())"
    out = run_python(code)
    assert out.stdout.strip() == "True", out.stderr[-2000:]


def test_fork_rng_restores_mydev_state():
    torch.mydev.manual_seed(3)
    expected = torch.rand(4, device="mydev").cpu()
    torch.mydev.manual_seed(3)
    with torch.random.fork_rng(devices=[0], device_type="mydev"):
        torch.rand(100, device="mydev")
    assert torch.equal(torch.rand(4, device="mydev").cpu(), expected)


def test_device_properties():
    props = torch.mydev.get_device_properties(0)
    assert props.name.startswith("mydev (")
    assert torch.mydev.get_device_name() == props.name == torch.mydev.get_device_name("mydev:0")
    assert (props.major, props.minor) == torch.mydev.get_device_capability(0) == (1, 0)
    assert props.total_memory == torch.mydev.mem_get_info(0)[1] > 0
    assert props.multi_processor_count == len(os.sched_getaffinity(0))
    assert props.is_integrated and props.index == 0
    getconf = shutil.which("getconf")  # glibc's answer (cpuid), beside ours (sysfs)
    if getconf is not None:
        level2 = subprocess.run([getconf, "LEVEL2_CACHE_SIZE"], capture_output=True, text=True)
        if level2.returncode == 0 and level2.stdout.strip().isdigit():
            assert props.L2_cache_size == int(level2.stdout)
    assert "total_memory=" in repr(props)
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        torch.mydev.get_device_properties(16)
    with pytest.raises(ValueError):
        torch.mydev.get_device_name("cpu")


def test_public_names():
    for name in [
        "device",
        "device_of",
        "init",
        "is_initialized",
        "get_device_properties",
        "get_device_name",
        "get_device_capability",
    ]:
        assert name in torch.mydev.__all__
