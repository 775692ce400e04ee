"""The machine-code entry of a numba function for fixed argument types, called directly.

Calling a ``numba.njit`` dispatcher resolves the argument types on every call (``typeof``
of each argument, then an overload lookup): for a kernel of a dozen arguments that is
about a microsecond, several times the work of a small kernel. A caller that calls one
kernel with the same argument types many times (a prepared plan) resolves them once here
and calls the compiled entry point itself, which only converts the arguments.
"""

from __future__ import annotations

from collections.abc import Callable

import numba


def entry_point(dispatcher: numba.core.dispatcher.Dispatcher, *args: object) -> Callable:
    """The compiled entry of ``dispatcher`` for the numba types of ``args``.

    Loads it from numba's on-disk cache (``cache=True``) or compiles it, as the first call
    would. The result takes arguments of exactly those types, unchecked: pass it what
    ``args`` were, never an array of another dtype or rank.
    """
    return dispatcher.compile(tuple(numba.typeof(a) for a in args))
