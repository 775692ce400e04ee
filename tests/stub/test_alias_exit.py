"""A CPU alias dropped by a native thread while Python exits (csrc_stub/ops/alias.cpp).

gloo's worker thread drops the aliases of a finished collective whenever it gets to it. When
that release needs the GIL (the mydev storage has a Python object) and the thread is still
waiting for it when the interpreter begins to finalise, CPython ends the thread inside a
noexcept destructor and the process aborts: a rare SIGABRT at the end of the DDP test.
The testing hooks make that timing certain: the thread starts to drop its alias while the
main thread keeps the GIL, from an atexit handler.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.support.subprocess_run import run_python

HOLD = """
import torch
import torch_mydev

t = torch.arange(6.0, device="mydev")
storage = t.untyped_storage()  # a Python object the last release must give up, with the GIL
torch_mydev._C._hold_alias_on_a_native_thread(t)
del t
"""

# atexit runs handlers last-registered first. Registered before torch_mydev's import, the
# drop runs after mydev's exit guard. It is called through C (methodcaller), so no bytecode
# runs after it that would hand the waiting thread the GIL: the thread is still waiting for
# it when Python finalises.
AFTER_THE_GUARD = (
    """
import atexit
import operator
import types

hooks = types.SimpleNamespace()
atexit.register(operator.methodcaller("drop"), hooks)
"""
    + HOLD
    + """
hooks.drop = torch_mydev._C._drop_held_alias_now
"""
)

# Registered after the import, it runs first: the guard must wait for the release under way
# with the GIL free to be taken (holding it would deadlock).
BEFORE_THE_GUARD = (
    HOLD
    + """
import atexit
atexit.register(torch_mydev._C._drop_held_alias_now)
"""
)


@pytest.mark.parametrize(
    "program", [AFTER_THE_GUARD, BEFORE_THE_GUARD], ids=["after_guard", "before_guard"]
)
def test_alias_dropped_on_a_native_thread_while_python_exits(program):
    done = run_python(textwrap.dedent(program) + "print('ran')", timeout=120)
    assert done.stdout.strip() == "ran"
