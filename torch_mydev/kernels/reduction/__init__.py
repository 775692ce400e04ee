"""The reduction kernel: ``kernel`` picks the loop and threads of a planned reduction;
``_loops`` accumulates, ``_cascade`` replicates CPU's cascade sum, ``_extreme`` its
amax/amin, over the walks of ``_walks`` (numba)."""
