"""DLPack on mydev: __dlpack_device__, torch.from_dlpack round trips (aliasing, as CUDA's),
copies to other devices, and foreign consumers (numpy) refusing mydev memory as they refuse
CUDA memory."""

import numpy as np
import pytest
import torch
from torch.utils.dlpack import DLDeviceType

from torch_mydev import _patches


def test_patch_target_still_broken_in_torch():
    """The patched torch function must still exist and still reject the renamed device;
    when a torch upgrade fixes it, drop `_patches.patch_tensor_dlpack_device`."""
    patched = torch.Tensor.__dlpack_device__
    assert patched._mydev_patched
    original = patched._mydev_original
    with pytest.raises(ValueError, match="Unknown device type mydev for Dlpack"):
        original(torch.ones(1, device="mydev"))
    assert original(torch.ones(1)) == (DLDeviceType.kDLCPU, 0)
    _patches.patch_tensor_dlpack_device()  # idempotent
    assert torch.Tensor.__dlpack_device__ is patched


def test_dlpack_device():
    assert torch.ones(2, device="mydev").__dlpack_device__() == (DLDeviceType.kDLExtDev, 0)
    assert torch.ones(2).__dlpack_device__() == (DLDeviceType.kDLCPU, 0)
    if torch.mydev.device_count() > 1:
        x = torch.ones(2, device="mydev:1")
        assert x.__dlpack_device__() == (DLDeviceType.kDLExtDev, 1)
        y = torch.from_dlpack(x)
        assert y.device == x.device and y.data_ptr() == x.data_ptr()


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.int64, torch.uint8, torch.bool, torch.bfloat16]
)
@pytest.mark.parametrize("via", ["protocol", "capsule"])
def test_roundtrip_aliases(dtype, via):
    base = torch.arange(24).reshape(4, 6).to(dtype).to("mydev")
    x = base.t()[1:, ::2]  # non-contiguous, with an offset
    y = torch.from_dlpack(x) if via == "protocol" else torch.from_dlpack(torch.to_dlpack(x))
    assert y.device == x.device and y.dtype == x.dtype
    assert (y.shape, y.stride()) == (x.shape, x.stride())
    assert y.data_ptr() == x.data_ptr()  # same memory, as CUDA -> CUDA
    assert torch.equal(y.cpu(), x.cpu())
    y.zero_()
    assert not base.cpu().to(torch.float64).t()[1:, ::2].any()


def test_capsule_keeps_memory_alive():
    x = torch.arange(1000.0).to("mydev")
    ptr = x.data_ptr()
    capsule = torch.to_dlpack(x)
    before = torch.mydev.memory_allocated()
    del x
    assert torch.mydev.memory_allocated() == before  # the capsule holds the block
    y = torch.from_dlpack(capsule)
    assert y.data_ptr() == ptr and y.cpu().sum().item() == sum(range(1000))
    del capsule, y
    assert torch.mydev.memory_allocated() == before - 4000


def test_copies_to_other_devices():
    x = torch.arange(6.0).to("mydev")
    c = torch.from_dlpack(x, device="cpu")
    assert c.device.type == "cpu" and torch.equal(c, x.cpu())
    c.zero_()
    assert x.cpu().sum().item() == 15  # a copy, not an alias
    with pytest.raises(ValueError, match="without copying"):
        torch.from_dlpack(x, device="cpu", copy=False)
    m = torch.from_dlpack(torch.arange(3.0), device="mydev")
    assert m.device == torch.device("mydev:0") and m.tolist() == [0.0, 1.0, 2.0]
    if torch.mydev.device_count() > 1:
        m1 = torch.from_dlpack(x, device="mydev:1")
        assert m1.device == torch.device("mydev:1") and torch.equal(m1.cpu(), x.cpu())
        assert m1.data_ptr() != x.data_ptr()


def test_numpy_refuses_mydev_memory():
    """numpy adopts only CPU capsules: it refuses mydev memory as it refuses CUDA memory,
    and asking for a CPU array copies (array API's ``device=`` request)."""
    x = torch.arange(4.0).to("mydev")
    with pytest.raises(RuntimeError, match="Unsupported device in DLTensor"):
        np.from_dlpack(x)
    a = np.from_dlpack(x, device="cpu")
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0]
    a[0] = 7
    assert x[0].item() == 0.0
    assert np.from_dlpack(torch.arange(2.0)).tolist() == [0.0, 1.0]
