"""The stub is built as one translation unit (csrc_stub/unity.cpp, setup.py): every source
in csrc_stub/ and its folders must be included there, once, or its code would silently be
missing."""

from __future__ import annotations

import re
from pathlib import Path

STUB = Path(__file__).resolve().parents[2] / "csrc_stub"


def test_unity_includes_every_source_once() -> None:
    included = re.findall(r'^#include "([^"]+\.cpp)"$', (STUB / "unity.cpp").read_text(), re.M)
    sources = sorted(
        p.relative_to(STUB).as_posix() for p in STUB.rglob("*.cpp") if p.name != "unity.cpp"
    )
    assert sorted(included) == sources
    assert len(set(included)) == len(included)


def test_setup_builds_the_unity_source_only() -> None:
    setup = (STUB.parent / "setup.py").read_text()
    assert '["csrc_stub/unity.cpp"]' in setup
