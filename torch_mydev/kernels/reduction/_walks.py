"""How a replica of a serial ATen reduction walks its coalesced plan (numba helpers).

Shared by ``reduction._cascade`` (sum) and ``reduction._extreme`` (amax/amin): the plan is a walk of
``shape`` (dim 0 fastest, at least one dim) with output and input strides in elements; an
output stride of 0 marks a reduced dim. A walk keeps a multi-index ``idx`` (int64, one
entry a dim, zeros to start) and steps it with ``next_output`` or ``next_loop``.
"""

from __future__ import annotations

from numba import njit

from torch_mydev.kernels.jit._seal import JIT, seal

_INLINE = {**JIT, "inline": "always"}


@njit(**_INLINE)
def output_count(shape, ostrides):
    """Result elements: the product of the dims where the output moves."""
    total = 1
    for d in range(shape.shape[0]):
        if ostrides[d] != 0:
            total *= shape[d]
    return total


@njit(**_INLINE)
def offset_of(idx, strides, first):
    """The offset of ``idx`` along ``strides``, from dim ``first`` on."""
    off = 0
    for d in range(first, strides.shape[0]):
        off += idx[d] * strides[d]
    return off


@njit(**_INLINE)
def next_output(idx, shape, ostrides):
    """Step ``idx`` to the next result element (reduced dims stay 0), fastest dim first."""
    for d in range(shape.shape[0]):
        if ostrides[d] == 0:
            continue
        idx[d] += 1
        if idx[d] < shape[d]:
            return
        idx[d] = 0


@njit(**_INLINE)
def count_above(shape, first):
    """The product of ``shape[first:]``: the rows of an elementwise walk (``first`` 1), or
    the 2-D loop calls ``serial_for_each`` makes (``first`` 2: one per index above two)."""
    total = 1
    for d in range(first, shape.shape[0]):
        total *= shape[d]
    return total


@njit(**_INLINE)
def next_loop(idx, shape):
    """Step ``idx`` to the next 2-D loop call (dims 2 and up, dim 2 fastest)."""
    for d in range(2, shape.shape[0]):
        idx[d] += 1
        if idx[d] < shape[d]:
            return
        idx[d] = 0


@njit(**_INLINE)
def first_two(shape, ostrides, istrides):
    """``(size0, os0, is0, size1, os1, is1)``: the two dims each loop call spans (a 1-D walk
    spans one row: size 1, strides 0)."""
    if shape.shape[0] > 1:
        return shape[0], ostrides[0], istrides[0], shape[1], ostrides[1], istrides[1]
    return shape[0], ostrides[0], istrides[0], 1, 0, 0


seal(__name__)  # keep last: keys the caches and widens the literals of the loops above
