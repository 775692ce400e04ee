"""The ``>>>`` examples in README.md and docs/*.md run, so the docs cannot drift.

Only fenced ```python blocks are read; the blocks of one file share their names, in order.
A doc cannot hold an example that never runs: every ``>>>`` line must sit in a ```python
block, and every ```python block must hold at least one ``>>>`` example.
"""

import doctest
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
FENCE = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
PROMPT = re.compile(r"^\s*>>>", re.MULTILINE)


def python_blocks(text: str) -> str:
    """The fenced python blocks of a markdown text, each closed by a blank line."""
    return "\n".join(block + "\n" for block in FENCE.findall(text))


def examples_that_would_not_run(text: str) -> list[str]:
    """What in ``text`` looks like an example but is not run: ``>>>`` lines outside the
    ```python blocks, and ```python blocks without a ``>>>`` line (each as a short note)."""
    problems = []
    outside = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for match in PROMPT.finditer(outside):
        line = outside.count("\n", 0, match.start()) + 1
        problems.append(f"line {line}: '>>>' outside a ```python block")
    for match in FENCE.finditer(text):
        if not PROMPT.search(match.group(1)):
            line = text.count("\n", 0, match.start()) + 1
            problems.append(f"line {line}: ```python block without a '>>>' example")
    return problems


def test_examples_outside_python_blocks_are_found():
    text = "intro\n```pycon\n>>> 1 + 1\n2\n```\n```python\nx = 1\n```\n```python\n>>> 2\n2\n```\n"
    assert examples_that_would_not_run(text) == [
        "line 3: '>>>' outside a ```python block",
        "line 6: ```python block without a '>>>' example",
    ]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_doc_examples_run(path):
    text = path.read_text()
    assert examples_that_would_not_run(text) == []
    source = python_blocks(text)
    test = doctest.DocTestParser().get_doctest(source, {}, path.name, str(path), 0)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    runner = doctest.DocTestRunner(optionflags=flags)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0
    assert result.attempted == len(test.examples) == len(PROMPT.findall(source))
    assert result.attempted > 0 or not PROMPT.search(text)
