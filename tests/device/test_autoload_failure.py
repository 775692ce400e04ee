"""A torch_mydev that cannot load never breaks ``import torch`` (torch_mydev_autoload).

torch turns an exception from a ``torch.backends`` entry point into a failure of
``import torch`` itself. Each case runs in a fresh interpreter, where torch's autoload runs.
"""

# A finder that makes one of the package's own modules fail to import, as a module written
# for another torch would: the package gets half way, then raises.

from tests.support.subprocess_run import AUTOLOAD, run_python

_BREAK_REGISTRY = """
import sys
class Breaker:
    def find_spec(self, name, path=None, target=None):
        if name == "torch_mydev.ops.registry":
            raise ImportError("simulated: aten::cholesky is not an operator")
sys.meta_path.insert(0, Breaker())
"""


def test_import_torch_survives_a_failing_plugin_and_warns_once():
    code = _BREAK_REGISTRY + (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        "    import torch\n"
        "assert torch.ones(2).sum().item() == 2.0\n"
        "names = [type(w.message).__name__ for w in seen]\n"
        "assert names.count('MydevLoadWarning') == 1, names\n"
        "print(next(str(w.message) for w in seen if 'mydev' in str(w.message)))\n"
    )
    out = run_python(code, flags=("-W", "default"), env={AUTOLOAD: None}, timeout=120)
    assert "torch_mydev was not loaded" in out.stdout
    assert "simulated: aten::cholesky is not an operator" in out.stdout
    assert "Supported torch releases: 2.13, 2.14" in out.stdout


def test_import_torch_mydev_then_raises_the_real_error():
    code = _BREAK_REGISTRY + (
        "import torch\n"
        "try:\n"
        "    import torch_mydev\n"
        "except ImportError as error:\n"
        "    print('raised:', error)\n"
        "else:\n"
        "    raise SystemExit('imported')\n"
    )
    out = run_python(code, flags=("-W", "default"), env={AUTOLOAD: None}, timeout=120)
    assert "raised: simulated: aten::cholesky is not an operator" in out.stdout


def test_an_unsupported_torch_release_is_named():
    code = (
        "import torch\n"
        "torch.__version__ = '2.99.0'\n"
        "try:\n"
        "    import torch_mydev\n"
        "except ImportError as error:\n"
        "    print('raised:', error)\n"
    )
    out = run_python(code, flags=("-W", "default"), env={AUTOLOAD: "0"}, timeout=120)
    assert "raised: torch_mydev supports torch 2.13, 2.14, not 2.99.0" in out.stdout
