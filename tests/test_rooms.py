"""The source tree keeps the rooms docs/architecture.md describes: no module over 600 lines
and no folder of more than 12 modules (issue 23), so a newcomer reads one job a file."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("torch_mydev", "torch_mydev_rules", "csrc_stub")
MAX_LINES = 600
MAX_MODULES = 12


def _sources(folder: Path) -> list[Path]:
    """The source files directly in ``folder``: Python files (``__init__`` too) and C++."""
    return sorted(p for p in folder.iterdir() if p.suffix in (".py", ".cpp", ".h"))


def _folders() -> list[Path]:
    found = []
    for top in SOURCES:
        for folder in [ROOT / top, *(ROOT / top).rglob("*")]:
            if folder.is_dir() and folder.name != "__pycache__" and _sources(folder):
                found.append(folder)
    return found


def test_the_source_folders_exist() -> None:
    """A renamed top folder must not leave the rule below checking nothing."""
    assert all((ROOT / top).is_dir() for top in SOURCES)


@pytest.mark.parametrize("folder", _folders(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_600_lines_and_no_folder_over_12_modules(folder: Path) -> None:
    sources = _sources(folder)
    long = {p.name: n for p in sources if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"
    modules = [p.name for p in sources if p.name != "__init__.py"]  # a package's own file
    assert len(modules) <= MAX_MODULES, modules
