"""The source tree keeps the rooms docs/architecture.md describes: no module over 600 lines
and no folder of more than 12 modules (issue 23), so a newcomer reads one job a file."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("torch_mydev", "torch_mydev_rules", "csrc_stub")
MAX_LINES = 600
MAX_MODULES = 12


def _modules(folder: Path) -> list[Path]:
    """The source files directly in ``folder`` (Python modules but ``__init__``, C++ files)."""
    return sorted(
        p
        for p in folder.iterdir()
        if (p.suffix == ".py" and p.name != "__init__.py") or p.suffix in (".cpp", ".h")
    )


def _folders() -> list[Path]:
    found = []
    for top in SOURCES:
        for folder in [ROOT / top, *(ROOT / top).rglob("*")]:
            if folder.is_dir() and folder.name != "__pycache__" and _modules(folder):
                found.append(folder)
    return found


@pytest.mark.parametrize("folder", _folders(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_is_over_600_lines_and_no_folder_over_12_modules(folder: Path) -> None:
    modules = _modules(folder)
    long = {p.name: n for p in modules if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"
    assert len(modules) <= MAX_MODULES, [p.name for p in modules]
