"""Types each call between our loops with its integer literals widened: one compile a signature.

numba types a constant argument of a call from one jitted function to another as a literal
(``Literal[int](0)``) and compiles the callee for it (``types.Dispatcher.get_call_type`` passes
the argument types on as they are). A variable that starts at ``0`` and grows in a loop, such
as an offset, is typed as ``Literal[int](0)`` first and as ``int64`` once the loop is typed: the
callee is compiled twice and the first machine code is thrown away. The cascade sum's ``loop2d``
compiled so for about 20 s of its 35; over the test suite it was a third of all compile time.

No loop here branches on a literal's value while typing (none reads ``literal_value``), so each
of our dispatchers is typed with its arguments widened (``types.unliteral``): one compile per
signature. Constants still fold where LLVM inlines the callee into its caller.
"""

from __future__ import annotations

from typing import Any

from numba.core import types
from numba.core.dispatcher import Dispatcher


def widen_literals(dispatcher: Dispatcher) -> None:
    """Make calls from jitted code type ``dispatcher`` with literal arguments widened.

    Replaces the dispatcher's own ``get_call_template`` (numba 0.68's hook through which
    ``types.Dispatcher.get_call_type`` compiles a callee for its argument types);
    tests/kernels/jit/test_literals.py fails loudly if numba stops calling it.
    """
    typed = type(dispatcher).get_call_template

    def get_call_template(args: tuple, kws: dict) -> Any:
        args = tuple(types.unliteral(a) for a in args)
        kws = {name: types.unliteral(a) for name, a in kws.items()}
        return typed(dispatcher, args, kws)

    dispatcher.get_call_template = get_call_template
