"""The C calling convention of the loops' entry points for the stub's per-call replay.

Every entry is a ``numba.cfunc`` of one C signature, ``int64 (int64 out, int64 a, int64 b,
int64 params)``: element addresses and the address of a packed ``int64`` parameter block,
read back into the arrays and values the loop takes (``elementwise._replay``,
``_replay_copy``). Entries are compiled per combination of lane types (closure constants,
which numba freezes into the machine code; ``cache=True`` keeps each on disk, keyed by
them), on the first record of a layout that needs one.
"""

from __future__ import annotations

from collections.abc import Callable

from numba import types
from numba.extending import intrinsic

from torch_mydev.kernels.jit import compiler

C_SIGNATURE = types.int64(types.int64, types.int64, types.int64, types.int64)
JIT = {"cache": True, "nogil": True}


def c_entry(body: Callable, maker: Callable, args: tuple) -> int:
    """The address of ``body`` as a C entry of ``C_SIGNATURE``, from memory, numba's cache or
    a compile; ``maker(*args)`` is the factory asking (``compiler.c_entry``: in background
    mode a missing entry is compiled by a child process and this raises ``NotCompiled``)."""
    return compiler.c_entry(body, C_SIGNATURE, {"nogil": True}, maker, args)


@intrinsic
def pointer_of(typingctx, address, like):
    """``address`` (an integer) as a pointer to elements of ``like``: an array's dtype, or
    a number class (``np.float32``)."""
    element = like.dtype if isinstance(like, types.Array) else like.instance_type
    pointer = types.CPointer(element)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(pointer))

    return pointer(address, like), codegen
