"""kernels/jit/_native.py: a C entry calls a loop's machine code by symbol, not a copy of it."""

from __future__ import annotations

import numba
import numpy as np
import pytest
from numba.core import errors

from torch_mydev.kernels.jit import _native, compiler
from torch_mydev.kernels.jit._native import WORD, call_native, lanes, native
from torch_mydev.kernels.jit._replay_abi import C_SIGNATURE
from torch_mydev.kernels.jit._replay_abi import pointer_of as _pointer_of


@numba.njit(nogil=True)
def _scaled_sum(values, scale):
    total = 0.0
    for i in range(values.shape[0]):
        total += values[i] * scale
    return total


def _entry_calling(symbol: str):
    def entry(address, count, scale, unused):
        values = numba.carray(_pointer_of(address, np.float64), count)
        return np.int64(call_native(symbol, values, np.float64(scale)))

    return entry


def test_an_entry_calls_the_loop_by_symbol_and_holds_no_copy_of_it():
    """The entry's result is the loop's; its module declares the loop's symbol and defines
    none of the loop's code (the cost ``_native`` exists to save)."""
    symbol = native(_scaled_sum, (lanes(np.float64), numba.float64))
    assert native(_scaled_sum, (lanes(np.float64), numba.float64)) == symbol  # registered once
    entry = numba.cfunc(C_SIGNATURE)(_entry_calling(symbol))
    values = np.arange(10.0)
    assert entry.ctypes(values.ctypes.data, 10, 3, 0) == _scaled_sum(values, 3.0) == 135
    ir = entry.inspect_llvm()
    loop_name = _scaled_sum.overloads[(lanes(np.float64), numba.float64)].fndesc.llvm_func_name
    assert f'declare i32 @"{symbol}"' in ir or f"declare i32 @{symbol}(" in ir, ir
    assert loop_name not in ir


def test_arguments_of_other_types_are_a_typing_error():
    """The entry must pass exactly the types the loop was registered for: anything else
    would call the machine code through the wrong ABI."""
    symbol = native(_scaled_sum, (lanes(np.float64), numba.float64))

    def entry(address, count, scale, unused):
        values = numba.carray(_pointer_of(address, np.float32), count)
        return np.int64(call_native(symbol, values, np.float64(scale)))

    with pytest.raises(errors.TypingError, match="takes"):
        numba.cfunc(C_SIGNATURE)(entry)


def test_an_unregistered_symbol_is_an_error_not_a_crash():
    """A symbol name that ``native`` did not register here: at typing, and before
    ``c_entry`` loads an entry from the cache (LLVM would abort the process on it)."""
    missing = _native.PREFIX + "0" * 32
    with pytest.raises(errors.TypingError, match="registered"):
        numba.cfunc(C_SIGNATURE)(_entry_calling(missing))

    def maker():
        raise AssertionError("never called")

    with pytest.raises(RuntimeError, match="not registered here"):
        compiler.c_entry(_entry_calling(missing), C_SIGNATURE, {}, maker, ())


def test_only_a_module_level_loop_has_a_symbol():
    """A symbol is named by module, name and types (stable across processes): a loop made
    inside a function, or a second dispatcher of a registered name, is refused rather than
    answered with the other loop's machine code."""
    with pytest.raises(ValueError, match="module-level"):
        native(numba.njit(lambda values, scale: scale), (lanes(np.float64), numba.float64))
    twin = numba.njit(nogil=True)(_scaled_sum.py_func)
    native(_scaled_sum, (lanes(np.float64), numba.float64))
    with pytest.raises(ValueError, match="module-level"):
        native(twin, (lanes(np.float64), numba.float64))


def test_lanes_is_the_type_numpy_arrays_and_carrays_have():
    assert lanes(np.float32) == numba.typeof(np.zeros(2, np.float32))
    assert lanes(np.uint16) == numba.typeof(np.zeros(0, np.uint16))
    assert numba.typeof(np.int64(1)) == WORD
