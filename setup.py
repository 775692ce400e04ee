"""Builds torch_mydev and its compiled stub torch_mydev._C (allocator, guard, hooks, views)."""

import glob
import os
import re
from pathlib import Path

# Building imports torch; torch's device-backend autoload would then import the installed
# torch_mydev, whose Python may already need the stub this build is about to make.
os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"

from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

ROOT = Path(__file__).parent


def torch_pin() -> str:
    """The torch requirement from requirements.txt, so the pin lives in one place."""
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if re.match(r"^torch\s*==", line):
            return line.strip()
    raise RuntimeError("requirements.txt must pin torch")


setup(
    name="torch_mydev",
    version="0.1.0",
    description="A PyTorch PrivateUse1 device with Python kernels and PyTorch's layout rules",
    packages=find_packages(
        include=["torch_mydev", "torch_mydev.*", "torch_mydev_rules", "torch_mydev_rules.*"]
    ),
    py_modules=["torch_mydev_autoload"],
    python_requires=">=3.11",
    install_requires=[torch_pin(), "numpy", "numba"],
    ext_modules=[
        CppExtension(
            "torch_mydev._C",
            sorted(glob.glob("csrc_stub/*.cpp")),
            extra_compile_args=["-O2", "-Wall", "-Wno-unused-parameter"],
        )
    ],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=False)},
    entry_points={"torch.backends": ["mydev = torch_mydev_autoload:load"]},
)
