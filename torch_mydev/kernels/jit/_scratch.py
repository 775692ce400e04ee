"""Small scratch arrays on the loop's own stack frame, with no reference count.

numba counts references to every array it allocates (``np.zeros``, ``np.empty``,
``.copy()``): each time one is handed to a helper, an inlined one included, that is a
locked increment and a decrement when the helper is done (``NRT_incref`` /
``NRT_decref``). Loops that hand their scratch (a multi-index, the operands' offsets, a
row's accumulators) to a helper once per row paid two locked instructions a row: 60 to
75 % of all samples of a strided ``add``, ``relu`` or ``where`` of 64x32x8, 28 % and 45 %
of a ``sum(1)`` and ``amax(1)`` of 256x32 (perf, 2026-11-28). ``stack_zeros`` allocates on
the calling loop's stack instead (an ``alloca``), as an array with no owner, as
``numba.carray`` makes them: passing it costs nothing, and it lives until that loop
returns. Call it at a loop's top level (not inside a ``for``: each call takes more
stack) and never return what it gives. Make it in the function whose loops use it (or in
one they are inlined into): LLVM then knows nothing else points at it and keeps it in
registers where it can; handed to a function that is not inlined, the same scratch made
``amax`` of 256x32 1.6 times slower (7.7 against 4.7 µs).
"""

from __future__ import annotations

import numba
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic
from numba.np.arrayobj import populate_array

from torch_mydev.kernels.jit._seal import JIT, seal


@intrinsic
def _stack_zeros(typingctx, count, like):
    element = like.dtype if isinstance(like, types.Array) else like.instance_type
    result = types.Array(element, 1, "C")

    def codegen(context, builder, signature, args):
        value_type = context.get_data_type(element)
        itemsize = context.get_abi_sizeof(value_type)
        data = builder.alloca(value_type, size=args[0])
        data.align = 64  # a cache line, as numpy's buffers: vector loads never split one
        cgutils.memset(builder, data, builder.mul(args[0], args[0].type(itemsize)), 0)
        array = context.make_array(result)(context, builder)
        populate_array(array, data=data, shape=[args[0]], strides=[context.get_constant(
            types.intp, itemsize)], itemsize=itemsize, meminfo=None)  # fmt: skip
        return array._getvalue()

    return result(count, like), codegen


@njit(**JIT, inline="always")
def stack_zeros(count, like):
    """``count`` zeros of ``like``'s dtype (an array's, or a number class's: ``np.int64``)
    on the calling loop's stack frame, as a 1-D array without a reference count."""
    return _stack_zeros(numba.int64(count), like)


@njit(**JIT, inline="always")
def stack_copy(source):
    """A copy of the 1-D ``source`` on the calling loop's stack frame (``stack_zeros``)."""
    copy = _stack_zeros(numba.int64(source.shape[0]), source)
    for i in range(source.shape[0]):
        copy[i] = source[i]
    return copy


seal(__name__)  # keep last: keys the cache of the helpers by the kernels' sources
