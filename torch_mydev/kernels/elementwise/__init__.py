"""The elementwise kernel: ``kernel`` turns a plan into a loop call (lanes, offsets, compute
values), ``parallel`` splits a large one over threads; numba: ``_rules`` (what one element
is), ``_loops`` (the loops over a plan), ``_replay`` (their C entries for the stub's replay)."""
