"""The copy and cast kernel: ``kernel.copy_strided`` decides loop, unit and threads;
``loops`` and ``prepared`` plan a same-dtype copy; ``cast`` picks conversion loops; the
numba loops are ``_strided``, ``_planes`` and ``_convert``, their replay entries ``_replay``."""
