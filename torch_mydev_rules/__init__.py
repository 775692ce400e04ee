"""PyTorch's layout rules in pure Python, importable with any torch build.

- ``layout``: c10's predicates over plain tuples (contiguity, channels_last(_3d),
  non-overlapping-and-dense, memory formats, overlap).
- ``iterator``: TensorIterator's build steps, the plan a kernel walks, and ``explain()``.

Nothing here imports ``torch_mydev`` (the device package, which loads the compiled stub), so
the rules run on a CUDA build of torch too (``tools/cuda_layout_check.py``).
"""
