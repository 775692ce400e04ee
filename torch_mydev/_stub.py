"""Load the compiled stub built for the running torch, as ``torch_mydev._C``.

The stub links against torch's C++ and loads into the torch release it was built against
only. One source tree serves several venvs (``make test TORCH=2.14.1``), so setup.py names
the extension for its torch release (``torch_mydev_autoload.stub_module_name``:
``_C_torch2_13_0``); this module imports the one for the running torch and makes it
``torch_mydev._C`` (an attribute and a ``sys.modules`` entry), the name every module and
test uses. Never another release's: a stub loaded into a torch it was not built against can
abort the process.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import torch

from torch_mydev_autoload import stub_module_name

PACKAGE = "torch_mydev"


def load(torch_version: str | None = None) -> ModuleType:
    """Import the stub for ``torch_version`` (default: the running torch's) and install it
    as ``torch_mydev._C``.

    Raises ImportError naming the torch to rebuild for when that stub was never built here,
    or when the one found does not load into this torch (built against another build of it).
    """
    version = torch.__version__ if torch_version is None else torch_version
    name = f"{PACKAGE}.{stub_module_name(version)}"
    rebuild = (
        f"build it in this environment: `make build TORCH={version.split('+')[0]}` "
        f"or `pip install --no-build-isolation --no-deps -e .` with this torch installed"
    )
    try:
        stub = importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name != name:
            raise
        raise ImportError(
            f"torch_mydev's compiled stub {name} for torch {version} is not built; {rebuild}",
            name=name,
        ) from error
    except ImportError as error:
        raise ImportError(
            f"torch_mydev's compiled stub {name} does not load into torch {version} "
            f"({error}); it was built against another torch: rebuild it, {rebuild}",
            name=name,
        ) from error
    sys.modules[f"{PACKAGE}._C"] = stub
    sys.modules[PACKAGE]._C = stub  # type: ignore[attr-defined]
    return stub


C = load()
"""The stub of this process, also ``torch_mydev._C`` (``torch_mydev/__init__.py`` imports
this module first)."""
