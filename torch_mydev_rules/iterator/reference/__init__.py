"""Reference implementations kept for the tests, not used by the device at run time.

- ``dim_counter``: ATen's ``DimCounter`` and ``serial_for_each``, the truth the numba
  strided loops (``torch_mydev.kernels.copy._strided``) are checked against.
- ``opinferrer``: DIPU's ``compute_perm`` / ``compute_memory_format`` and its fast path,
  kept beside torch's rules so ``explain()`` and the tests can show where they differ.
"""

from torch_mydev_rules.iterator.reference.dim_counter import Block, DimCounter, serial_for_each

__all__ = ["Block", "DimCounter", "serial_for_each"]
