"""Calls from a replay C entry into a loop's machine code by symbol, without compiling it again.

A ``numba.cfunc`` that calls a dispatcher links the callee's whole library into its own
module, and numba then optimises and emits all of it again (``CPUCodeLibrary.finalize``):
a replay entry that only unpacks a parameter block and calls ``cascade_at`` took 2.2 s to
compile, the same as the loop itself (issue 19's first-use cost). Here the entry calls the
loop's native function (numba's own calling convention) through an external symbol:

- ``native(dispatcher, arg_types)`` compiles or loads the loop for exactly ``arg_types``,
  registers its native function's address under a name of this module's (``llvmlite``'s
  ``add_symbol``, the way numba resolves its own helper functions) and returns that name;
- ``call_native(name, *args)`` in the entry's body is a call of that symbol, typed by the
  loop's signature: arguments of other types are a typing error, never a call through the
  wrong ABI.

The entry's machine code then holds one call (0.3 s to compile); it runs the bytes the
Python path's call of the same loop runs. Its cached object code names the symbol, which is
resolved when it loads: each process registers the name first (``compiler.c_entry`` checks
that every name an entry closes over is registered, since LLVM aborts the process on a
symbol it cannot resolve).
"""

from __future__ import annotations

import hashlib
from typing import Any

import llvmlite.binding as llvm
import numpy as np
from numba.core import cgutils, errors, types
from numba.core.typing.templates import Signature
from numba.extending import intrinsic
from numba.np import numpy_support

PREFIX = "torch_mydev_native_"
_registered: dict[str, Signature] = {}  # symbol -> the loop's signature, in this process
_loops: dict[str, Any] = {}  # symbol -> the dispatcher it names


def native(dispatcher: Any, arg_types: tuple) -> str:
    """The symbol of ``dispatcher``'s machine code for ``arg_types`` (numba types), compiled
    or loaded now (in background mode a missing one raises ``compiler.NotCompiled``) and
    registered in this process. The symbol is named by module, qualified name and types (the
    same in every process, as an entry's cached machine code needs), so the loop must be a
    module's: a ValueError otherwise, never a call into another loop of the same name."""
    func = dispatcher.py_func
    named = f"{func.__module__}.{func.__qualname__}{arg_types}"
    name = PREFIX + hashlib.sha256(named.encode()).hexdigest()[:32]
    if "<locals>" in func.__qualname__ or _loops.get(name, dispatcher) is not dispatcher:
        raise ValueError(f"native() takes a module-level loop, not {named}")
    if name not in _registered:
        dispatcher.compile(arg_types)
        result = dispatcher.overloads[arg_types]
        address = result.library.get_pointer_to_function(result.fndesc.llvm_func_name)
        llvm.add_symbol(name, address)
        _loops[name] = dispatcher
        _registered[name] = result.signature
    return name


def registered(name: str) -> bool:
    """Whether ``name`` (a ``native`` symbol) resolves in this process."""
    return name in _registered


@intrinsic(prefer_literal=True)
def call_native(typingctx: Any, symbol: Any, *args: Any) -> Any:
    """``symbol``'s loop (a ``native`` name, a constant) called with ``args``."""
    if not isinstance(symbol, types.StringLiteral) or symbol.literal_value not in _registered:
        raise errors.TypingError(f"call_native needs a registered native() symbol, not {symbol}")
    name = symbol.literal_value
    loop = _registered[name]
    given = tuple(types.unliteral(a) for a in args)
    if given != tuple(loop.args):
        raise errors.TypingError(f"{name} takes {loop.args}, not {given}")

    def codegen(context: Any, builder: Any, signature: Any, llargs: Any) -> Any:
        fnty = context.call_conv.get_function_type(loop.return_type, loop.args)
        callee = cgutils.get_or_insert_function(builder.module, fnty, name)
        values = cgutils.unpack_tuple(builder, llargs[1])
        status, result = context.call_conv.call_function(
            builder, callee, loop.return_type, loop.args, values
        )
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return result

    return loop.return_type(symbol, types.StarArgTuple.from_types(given)), codegen


def lanes(scalar: type) -> types.Array:
    """The numba type of a 1-D C-contiguous array of numpy scalars ``scalar`` (``np.float32``),
    as ``numba.carray`` and a numpy array give it."""
    return types.Array(numpy_support.from_dtype(np.dtype(scalar)), 1, "C")


WORD = types.int64
WORDS = types.Array(types.int64, 1, "C")
WORD_ROWS = types.Array(types.int64, 2, "C")
