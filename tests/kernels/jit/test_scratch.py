"""``kernels.jit._scratch``: the loops' stack scratch starts as zeros or as an exact copy, of
the asked dtype, and stays private to each call (a loop that uses one per row and one per
call sees no other call's values)."""

from __future__ import annotations

import numpy as np
from numba import njit

from torch_mydev.kernels.jit._scratch import stack_copy, stack_zeros


@njit
def _zeros_then_fill(count, like):
    scratch = stack_zeros(count, like)
    before = scratch.copy()
    for i in range(count):
        scratch[i] = i + 1
    return before, scratch.sum()


@njit
def _copied(source):
    copy = stack_copy(source)
    source[0] = -1  # the copy is its own memory
    return copy.copy()


def test_zeros_of_the_asked_dtype_every_call() -> None:
    for like, dtype in ((np.int64, np.int64), (np.float32, np.float32),
                        (np.zeros(1, np.uint16), np.uint16)):  # fmt: skip
        for _ in range(3):  # each call starts from zeros, whatever the last one left
            before, total = _zeros_then_fill(7, like)
            assert before.dtype == dtype
            assert (before == 0).all() and before.shape == (7,)
            assert total == 28


def test_copy_is_exact_and_separate() -> None:
    source = np.array([3, -5, 2**40, 7], np.int64)
    copy = _copied(source)
    assert copy.tolist() == [3, -5, 2**40, 7]
    assert source[0] == -1
