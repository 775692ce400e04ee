"""torch.save / torch.load, pickle, state dicts, storages and torch.export with mydev tensors.

torch restores tensors through ``torch._utils._to``, which enters ``torch.mydev.device(i)``:
these are the checks of ``torch_mydev/runtime/device_info.py``'s ``device`` context manager in use.
"""

import io
import pickle

import pytest
import torch


def _roundtrip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


def _same_tensor(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.stride() == b.stride() and a.storage_offset() == b.storage_offset()
    assert torch.equal(a.cpu(), b.cpu())


@pytest.mark.parametrize(
    ("map_location", "expected"),
    [
        (None, "mydev:0"),
        ("mydev", "mydev:0"),
        ("mydev:0", "mydev:0"),
        ("cpu", "cpu"),
        (torch.device("cpu"), "cpu"),
        ({"mydev:0": "cpu"}, "cpu"),
        (lambda storage, loc: storage, "cpu"),
    ],
    ids=["none", "mydev", "mydev0", "cpu", "cpu-device", "dict", "callable"],
)
def test_load_mydev_tensors(map_location, expected):
    x = torch.randn(4, 5).to("mydev")
    view = x.t()[1:]
    out = _roundtrip({"x": x, "view": view}, map_location=map_location)
    assert out["x"].device == torch.device(expected)
    _same_tensor(out["x"], x)
    _same_tensor(out["view"], view)
    # a view and its base share one storage after the reload, as on CPU
    assert out["x"].untyped_storage().data_ptr() == out["view"].untyped_storage().data_ptr()
    out["x"].zero_()
    assert out["view"].abs().sum().item() == 0


def test_load_cpu_file_onto_mydev():
    x = torch.arange(10, dtype=torch.int64)
    out = _roundtrip(x, map_location="mydev")
    assert out.device == torch.device("mydev:0")
    _same_tensor(out, x)
    out = _roundtrip(x, map_location={"cpu": "mydev:0"})
    assert out.device == torch.device("mydev:0")


def test_device_index_is_kept_and_current_device_restored():
    if torch.mydev.device_count() < 2:
        pytest.skip("needs TORCH_MYDEV_DEVICE_COUNT >= 2")
    x = torch.arange(3.0, device="mydev:1")
    assert _roundtrip(x).device == torch.device("mydev:1")
    assert _roundtrip(x.cpu(), map_location="mydev:1").device == torch.device("mydev:1")
    assert _roundtrip(x, map_location={"mydev:1": "mydev:0"}).device == torch.device("mydev:0")
    assert torch.mydev.current_device() == 0


def test_pickle_roundtrip():
    x = torch.randn(3, 4, dtype=torch.float64).to("mydev")
    y = pickle.loads(pickle.dumps(x))
    assert y.device == x.device
    _same_tensor(y, x)
    p = torch.nn.Parameter(x.clone())
    q = pickle.loads(pickle.dumps(p))
    assert isinstance(q, torch.nn.Parameter) and q.device == x.device and q.requires_grad


def test_storage_to_mydev():
    s = torch.arange(6, dtype=torch.uint8).untyped_storage()
    m = s.to(device="mydev")
    assert m.device == torch.device("mydev:0") and m.nbytes() == 6
    assert bytes(m.cpu()) == bytes(s)
    assert bytes(m.mydev().cpu()) == bytes(s)


def _model():
    torch.manual_seed(0)
    layers = [torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.Flatten()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(12, 2))


def test_state_dict_mydev_to_cpu_model():
    model = _model().to("mydev")
    sd = _roundtrip(model.state_dict())
    assert all(v.device.type == "mydev" for v in sd.values())
    cpu_model = _model()
    with torch.no_grad():
        for p in cpu_model.parameters():
            p.zero_()
    cpu_model.load_state_dict(sd)
    pairs = zip(cpu_model.state_dict().items(), model.state_dict().values(), strict=True)
    for (name, a), b in pairs:
        assert a.device.type == "cpu", name
        assert torch.equal(a, b.cpu()), name
    cpu_sd = _roundtrip(model.state_dict(), map_location="cpu")
    assert all(v.device.type == "cpu" for v in cpu_sd.values())


def test_state_dict_cpu_to_mydev_model():
    cpu_model = _model()
    sd = _roundtrip(cpu_model.state_dict(), map_location="mydev")
    model = _model().to("mydev")
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    model.load_state_dict(sd)
    for a, b in zip(model.state_dict().values(), cpu_model.state_dict().values(), strict=True):
        assert a.device.type == "mydev"
        assert torch.equal(a.cpu(), b)


def test_full_module_save_load():
    model = _model().to("mydev").eval()
    x = torch.randn(2, 2, 4, 4)
    loaded = _roundtrip(model, weights_only=False)
    assert next(loaded.parameters()).device.type == "mydev"
    assert torch.equal(loaded(x.to("mydev")).cpu(), model(x.to("mydev")).cpu())


def test_torch_export_save_load(tmp_path):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)
            self.register_buffer("offset", torch.arange(3.0))

        def forward(self, x):
            return self.lin(x) + self.offset

    model = M().to("mydev")
    x = torch.randn(2, 4, device="mydev")
    ep = torch.export.export(model, (x,))
    path = tmp_path / "m.pt2"
    torch.export.save(ep, path)
    loaded = torch.export.load(path)
    assert loaded.state_dict["lin.weight"].device.type == "mydev"
    assert torch.equal(loaded.module()(x).cpu(), model(x).cpu())
