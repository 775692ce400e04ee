"""How a vector load of the float cascade sum fills its lanes (``_cascade``'s ``mode``).

Defined apart from ``_cascade`` (a numba module) so that ``reduction.kernel``, which picks
a dtype's mode when it prepares a sum, reads the same constants without loading numba.
Importing this module imports nothing.
"""

SCALAR = 0  # one element, one accumulator (the scalar inner and outer sums)
PLAIN = 1  # one element a lane (float32, float64)
HALVES = 2  # float16/bfloat16: element ``l`` plus element ``l + lanes`` (load_fp32_from_*)
