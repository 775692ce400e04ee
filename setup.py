"""Builds torch_mydev and its compiled stub (allocator, guard, hooks, views).

The stub links against the C++ of the torch it is built with, and loads into that torch
release only; several venvs (``make test TORCH=2.14.1``) build into the one source tree.
So the extension is named for its torch release, ``torch_mydev._C_torch2_13_0`` for torch
2.13.0, and ``torch_mydev/_stub.py`` imports the one matching the running torch as
``torch_mydev._C``.
"""

import os
import re
import sys
from pathlib import Path

# Building imports torch; torch's device-backend autoload would then import the installed
# torch_mydev, whose Python may already need the stub this build is about to make.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
# torch's BuildExtension looks for ``ninja`` on PATH; pip runs this file without the venv's
# bin folder there, where requirements.txt installs it.
os.environ["PATH"] = os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", "")))

import torch
from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = Path(__file__).parent
sys.path.insert(0, str(ROOT))
from torch_mydev_autoload import SUPPORTED_TORCH, stub_module_name  # noqa: E402

TORCH_RELEASE = re.match(r"\d+\.\d+\.\d+", torch.__version__).group()
"""The release of the torch this build links against (``2.13.0`` of ``2.13.0+cpu``)."""

if ".".join(TORCH_RELEASE.split(".")[:2]) not in SUPPORTED_TORCH:
    raise RuntimeError(
        f"torch_mydev supports torch {', '.join(SUPPORTED_TORCH)}; this environment has "
        f"torch {torch.__version__}"
    )


setup(
    name="torch_mydev",
    version="0.1.0",
    description="A PyTorch PrivateUse1 device with Python kernels and PyTorch's layout rules",
    packages=find_packages(
        include=["torch_mydev", "torch_mydev.*", "torch_mydev_rules", "torch_mydev_rules.*"]
    ),
    py_modules=["torch_mydev_autoload"],
    python_requires=">=3.11",
    # The stub loads into the torch release it was built against only (for the default
    # venv, the torch==2.13.0 that requirements.txt pins).
    install_requires=[f"torch=={TORCH_RELEASE}", "numpy", "numba"],
    ext_modules=[
        CppExtension(
            f"torch_mydev.{stub_module_name(torch.__version__)}",
            # One translation unit that includes every source (csrc_stub/unity.cpp).
            ["csrc_stub/unity.cpp"],
            # -g0: Python's own CFLAGS ask for debug information, a third of the build.
            # -O1: 26 s against 37 s at -O2 (the set-up's longest job), and the stub's paths
            # (replay, allocation, views, the C++ fallback, copies) timed the same.
            extra_compile_args=["-O1", "-g0", "-Wall", "-Wno-unused-parameter"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
    entry_points={"torch.backends": ["mydev = torch_mydev_autoload:load"]},
)
