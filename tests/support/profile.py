"""Which hypothesis profile the run uses: ``ci`` (the default) or ``deep``.

tests/conftest.py loads the profile named by ``HYPOTHESIS_PROFILE``; tests that size
themselves without hypothesis (parametrized dtype lists, OpInfo shares) ask ``deep()``.
"""

from __future__ import annotations

import os


def deep() -> bool:
    """True under ``HYPOTHESIS_PROFILE=deep``."""
    return os.environ.get("HYPOTHESIS_PROFILE", "ci") == "deep"
