"""The elementwise kernel: ``kernel`` turns a plan into a loop call (lanes, offsets, compute
values), ``parallel`` splits a large one over threads, ``_loops`` holds the numba loops and
``_replay`` their C entries for the stub's replay."""
