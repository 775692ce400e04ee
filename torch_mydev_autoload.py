"""The ``torch.backends`` entry point: load ``torch_mydev`` without ever breaking ``import torch``.

torch's device-backend autoload (``torch._import_device_backends``) turns any exception an
entry point raises into a ``RuntimeError`` out of ``import torch`` itself. A plugin that
cannot load under the torch in use (another release, a stub built against another torch)
must not take torch down with it: this module, kept outside the ``torch_mydev`` package so
that loading the entry point never runs the package, imports the device, and on failure
warns once, naming the cause and the supported torch releases. ``import torch_mydev`` then
raises the same error (the package re-raises what is recorded here instead of running its
registrations a second time).
"""

from __future__ import annotations

import re
import warnings

SUPPORTED_TORCH = ("2.13", "2.14")
"""The torch releases (major.minor) this source tree supports."""


def stub_module_name(torch_version: str) -> str:
    """The name, within ``torch_mydev``, of the stub built for this torch release:
    ``_C_torch2_13_0`` for ``2.13.0+cpu``. setup.py names the extension by it, so each
    release gets its own: a stub links against one torch's C++, and loading it into another
    can abort the process (a 2.13 stub in torch 2.14 does)."""
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", torch_version)
    if match is None:
        raise ValueError(f"not a torch version: {torch_version!r}")
    return "_C_torch{}_{}_{}".format(*match.groups())


failure: BaseException | None = None
"""The exception that stopped ``torch_mydev`` from loading in this process, if any."""


class MydevLoadWarning(UserWarning):
    """``import torch`` went on without the mydev device, which failed to load."""


def load() -> None:
    """Import ``torch_mydev`` (registering the device); on failure warn instead of raising."""
    global failure
    try:
        import torch_mydev  # noqa: F401  (importing the package registers the device)
    except Exception as error:
        failure = error
        warnings.warn(
            f"torch_mydev was not loaded, so the 'mydev' device is unavailable: "
            f"{type(error).__name__}: {error}. Supported torch releases: "
            f"{', '.join(SUPPORTED_TORCH)}; `import torch_mydev` shows the full error. "
            f"TORCH_DEVICE_BACKEND_AUTOLOAD=0 skips loading it.",
            MydevLoadWarning,
            stacklevel=2,
        )
