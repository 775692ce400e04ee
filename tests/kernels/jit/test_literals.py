"""Our loops compile once per signature: integer literals reach callees widened (_literals)."""

import numpy as np
import torch
from numba import njit, types

from torch_mydev.kernels import load_numba_modules
from torch_mydev.kernels.jit import _literals


def _growing_offset_pair():
    """A callee and a caller whose offset starts at the literal 0 and grows in a loop."""

    @njit
    def callee(a, off):
        return a[off]

    @njit
    def caller(a, step):
        off = 0
        total = 0.0
        for _ in range(a.shape[0]):
            total += callee(a, off)
            off += step
        return total

    return callee, caller


def test_numba_alone_compiles_a_growing_offset_twice():
    """What the widening is for: numba types ``off`` as ``Literal[int](0)`` first."""
    callee, caller = _growing_offset_pair()
    assert caller(np.ones(3), 1) == 3.0
    assert len(callee.overloads) == 2
    assert any(isinstance(t, types.IntegerLiteral) for sig in callee.signatures for t in sig)


def test_widened_callee_compiles_once():
    """Fails loudly if numba stops typing nopython calls through ``get_call_template``."""
    callee, caller = _growing_offset_pair()
    _literals.widen_literals(callee)
    assert caller(np.arange(4.0), 1) == 6.0
    assert [tuple(sig) for sig in callee.signatures] == [(types.float64[::1], types.int64)]


def test_no_loop_of_ours_is_compiled_for_a_literal():
    """After a sum, an amax, an add and a copy, no dispatcher of the kernels holds a literal
    signature (the cascade sum's ``loop2d`` was compiled for ``Literal[int](0)`` first)."""
    x = torch.arange(64 * 32, dtype=torch.float32).reshape(64, 32).to("mydev")
    for result in (x.sum(1), x.amax(1), x + x, x.t().contiguous()):
        result.cpu()
    names = (
        "reduction._cascade",
        "reduction._extreme",
        "elementwise._loops",
        "copy._strided",
        "reduction._walks",
    )
    for module in load_numba_modules(*names):
        for name, value in vars(module).items():
            for sig in getattr(value, "signatures", ()):
                assert not any(isinstance(t, types.Literal) for t in sig), (module, name, sig)
