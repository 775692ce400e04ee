"""The ``>>>`` examples in README.md and docs/*.md run, so the docs cannot drift.

Only fenced ```python blocks are read; the blocks of one file share their names, in order.
"""

import doctest
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks(text: str) -> str:
    """The fenced python blocks of a markdown text, each closed by a blank line."""
    return "\n".join(block + "\n" for block in FENCE.findall(text))


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_doc_examples_run(path):
    source = python_blocks(path.read_text())
    test = doctest.DocTestParser().get_doctest(source, {}, path.name, str(path), 0)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    runner = doctest.DocTestRunner(optionflags=flags)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0
    assert result.attempted == len(test.examples)
