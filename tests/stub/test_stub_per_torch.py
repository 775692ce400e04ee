"""One source tree, a stub per torch (torch_mydev/_stub.py, setup.py).

The compiled stub loads into the torch release it was built against only, and several venvs
(``make test TORCH=2.14.1``) build into the same tree; so each torch release's stub has its
own name (``_C_torch2_13_0``), the package loads the running torch's as ``torch_mydev._C``,
and a missing or foreign stub is an ImportError naming what to rebuild, never a broken
``import torch``. No test here loads another torch's stub: that can abort the process.
"""

import re
import sys

import pytest
import torch

import torch_mydev
import torch_mydev_autoload
from tests.support.subprocess_run import AUTOLOAD, run_python
from torch_mydev import _stub


def test_the_loaded_stub_is_the_one_built_for_the_running_torch():
    stub = torch_mydev._C
    release = re.match(r"\d+\.\d+\.\d+", torch.__version__).group()
    assert stub.__name__ == "torch_mydev._C_torch" + release.replace(".", "_")
    assert sys.modules["torch_mydev._C"] is stub
    assert release == stub.TORCH_BUILD_VERSION  # what the stub's headers said


def test_stub_module_name_is_per_release():
    assert torch_mydev_autoload.stub_module_name("2.13.0+cpu") == "_C_torch2_13_0"
    assert torch_mydev_autoload.stub_module_name("2.14.1+cu130") == "_C_torch2_14_1"
    assert torch_mydev_autoload.stub_module_name("2.15.0a0+git1234") == "_C_torch2_15_0"
    with pytest.raises(ValueError, match="not a torch version"):
        torch_mydev_autoload.stub_module_name("nightly")


def test_a_stub_never_built_for_this_torch_names_the_rebuild():
    with pytest.raises(ImportError) as info:
        _stub.load("9.97.0+cpu")  # a release no stub in this tree is built for
    message = str(info.value)
    assert "compiled stub torch_mydev._C_torch9_97_0 for torch 9.97.0+cpu is not built" in message
    assert "build it in this environment: `make build TORCH=9.97.0`" in message
    assert sys.modules["torch_mydev._C"] is torch_mydev._C  # the loaded stub stays


def test_a_stub_that_does_not_load_into_this_torch_says_rebuild(tmp_path, monkeypatch):
    # A file in the stub's place that the dynamic loader refuses, as it refuses a stub linked
    # against another torch build (undefined symbols).
    suffix = ".cpython-311-x86_64-linux-gnu.so"
    (tmp_path / f"_C_torch9_98_0{suffix}").write_bytes(b"not an ELF file")
    monkeypatch.setattr(torch_mydev, "__path__", [*torch_mydev.__path__, str(tmp_path)])
    with pytest.raises(ImportError) as info:
        _stub.load("9.98.0")
    message = str(info.value)
    assert "torch_mydev._C_torch9_98_0 does not load into torch 9.98.0" in message
    assert "built against another torch: rebuild it" in message
    assert sys.modules["torch_mydev._C"] is torch_mydev._C  # the loaded stub stays


# A finder that hides every built stub, as in a venv that never built the one it needs.
_HIDE_STUB = """
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name.startswith("torch_mydev._C_torch"):
            raise ModuleNotFoundError("No module named " + repr(name), name=name)
sys.meta_path.insert(0, Hide())
"""


def test_a_missing_stub_warns_at_import_torch_and_raises_at_import_torch_mydev():
    code = _HIDE_STUB + (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    import torch\n"
        "print('warned:', [str(w.message) for w in seen if 'mydev' in str(w.message)])\n"
        "try:\n"
        "    import torch_mydev\n"
        "except ImportError as error:\n"
        "    print('raised:', error)\n"
    )
    out = run_python(code, env={AUTOLOAD: None}, timeout=120)
    release = torch.__version__.split("+")[0]
    built = f"for torch {torch.__version__} is not built; build it in this environment: "
    rebuild = f"`make build TORCH={release}`"
    assert out.stdout.count(built + rebuild) == 2, out.stdout  # the warning, then the raise
    assert "raised: torch_mydev's compiled stub" in out.stdout
