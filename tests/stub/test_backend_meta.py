"""Backend metadata of mydev tensors (csrc_stub/runtime/backend_meta.cpp, torch_mydev/_patches.py),
after OpenReg's tests/test_storage.py (test_serialization, test_copy_backend_meta,
test_serialization_metadata_preservation, test_fake_tensor_metadata_preservation*).

Truth: OpenReg's behaviour. ``torch._utils.set_tensor_metadata`` stores named flags on a
mydev tensor and ``get_tensor_metadata`` reads them; they survive torch.save / torch.load
and pickle on mydev (not on CPU: the registry is per device type), deepcopy, detach and
fake tensors.
"""

import copy
import io
import pickle

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode

from torch_mydev import _patches

FLAGS = {"version_number": True, "format_number": False}
get, set_ = torch._utils.get_tensor_metadata, torch._utils.set_tensor_metadata


def _flagged(*shape):
    t = torch.empty(*shape, device="mydev")
    assert get(t) == {}
    set_(t, FLAGS)
    return t


def test_set_get_replace_and_clear():
    t = _flagged(3, 3)
    assert get(t) == FLAGS
    set_(t, {"other": True})
    assert get(t) == {"other": True}
    set_(t, {})
    assert get(t) == {}
    c = torch.empty(2)
    set_(c, FLAGS)  # no backend metadata on CPU tensors
    assert get(c) == {}


def test_torch_bits_stay_torchs():
    """conj/neg are torch's own bits: they pass through get/set beside the backend's."""
    t = torch.zeros(2, dtype=torch.complex64, device="mydev")
    set_(t, {"conj": True, "mine": True})
    assert t.is_conj() and get(t) == {"conj": True, "mine": True}


def _roundtrip(obj, **kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **kwargs)


def test_save_load_and_pickle_keep_flags_on_mydev_only():
    t = _flagged(3, 3)
    loaded = _roundtrip({"t": t, "view": t[1:]})
    assert loaded["t"].device.type == "mydev" and get(loaded["t"]) == FLAGS
    assert get(_roundtrip(t, map_location="mydev:1")) == FLAGS
    assert get(_roundtrip(t, map_location="cpu")) == {}
    assert get(pickle.loads(pickle.dumps(t))) == FLAGS


def test_flags_are_copied_with_tensor_metadata_not_shared():
    t = _flagged(4)
    d = t.detach()
    assert get(d) == FLAGS and get(t.data) == FLAGS
    set_(d, {"changed": True})
    assert get(t) == FLAGS  # each tensor owns its flags (BackendMeta::clone)


def test_deepcopy_keeps_flags():
    t = _flagged(2, 2)
    p = torch.nn.Parameter(_flagged(3))
    copied = copy.deepcopy({"t": t, "p": p})
    assert get(copied["t"]) == FLAGS and get(copied["p"]) == FLAGS
    assert copied["t"].data_ptr() != t.data_ptr()
    model = torch.nn.Linear(2, 2).to("mydev")
    set_(model.weight, FLAGS)
    assert get(copy.deepcopy(model).weight) == FLAGS


def test_fake_tensor_keeps_flags():
    t = _flagged(3, 3)
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(t)
    assert isinstance(fake, FakeTensor) and fake.device.type == "mydev"
    assert get(fake) == FLAGS


def test_fake_tensor_of_a_functional_tensor_keeps_the_inner_flags():
    t = _flagged(3, 3)
    with FunctionalTensorMode():
        functional = FunctionalTensor.to_functional(t)
        assert get(functional) == {}
        with FakeTensorMode() as mode:
            fake = mode.from_tensor(functional)
    assert isinstance(fake, FakeTensor) and get(fake) == FLAGS


def test_patches_are_in_place_and_wrap_what_they_name():
    """torch changed under the patches: fail here, loudly."""
    for owner in (torch.Tensor, torch.nn.Parameter):
        patched = owner.__dict__["__deepcopy__"]
        assert patched._mydev_patched and callable(patched._mydev_original)
    from torch._subclasses.fake_tensor import FakeTensorConverter

    patched = FakeTensorConverter.from_real_tensor
    assert patched._mydev_patched
    assert list(__import__("inspect").signature(patched._mydev_original).parameters)[:3] == [
        "self",
        "fake_mode",
        "t",
    ]
    _patches.apply_runtime()  # idempotent
    assert FakeTensorConverter.from_real_tensor is patched
