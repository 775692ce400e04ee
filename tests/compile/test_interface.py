"""dynamo's device interface for mydev (torch_mydev/compile/interface.py, on_import.py).

Truth: CUDA's. ``torch._dynamo.device_interface.get_interface_for_device("cuda")`` answers
from the moment dynamo is imported, for ``cuda`` and ``cuda:<i>``, with the device's own
properties (``torch.cuda.get_device_properties``); mydev's must too, while ``import torch``
still loads neither dynamo nor inductor.
"""

import torch

from tests.support.subprocess_run import AUTOLOAD, run_python
from torch_mydev.compile.interface import MydevInterface

_BEFORE_ANY_COMPILE = (
    "import sys, torch\n"
    "loaded = [m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules]\n"
    "from torch._dynamo.device_interface import get_interface_for_device as get\n"
    "i = get('mydev')\n"
    "print(loaded, i.__name__, get('mydev:1') is i, get(torch.device('mydev', 0)) is i,"
    " 'torch_mydev.compile.backend' in sys.modules, torch.mydev.get_device_interface() is i)"
)


def test_interface_answers_before_any_compile():
    out = run_python(_BEFORE_ANY_COMPILE).stdout.strip()
    assert out == "[] MydevInterface True True False True"


def test_interface_registers_when_dynamo_was_loaded_first():
    code = (
        "import torch, torch._dynamo.device_interface as d, torch_mydev\n"
        "print(d.get_interface_for_device('mydev').__name__)"
    )
    assert run_python(code, env={AUTOLOAD: "0"}).stdout.strip() == "MydevInterface"


def test_interface_reports_mydev_properties_and_devices():
    """What inductor reads through the interface (``DeviceProperties.create``, the compile
    workers' ``Worker``) is ``torch.mydev``'s, not the host CPU interface's."""
    from torch._dynamo.device_interface import get_interface_for_device

    last = torch.mydev.device_count() - 1
    assert get_interface_for_device(f"mydev:{last}") is MydevInterface
    props = torch.mydev.get_device_properties(last)
    assert MydevInterface.get_device_properties(last) == props
    assert MydevInterface.get_device_properties(torch.device("mydev", last)) == props
    with torch.mydev.device(last):
        assert MydevInterface.Worker.get_device_properties() == props
        assert MydevInterface.Worker.current_device() == last
    from torch._inductor.runtime.hints import DeviceProperties

    hints = DeviceProperties.create(torch.device("mydev", last))
    assert (hints.type, hints.index) == ("mydev", last)
    assert (hints.multi_processor_count, hints.major) == (props.multi_processor_count, 1)
