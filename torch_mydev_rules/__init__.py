"""PyTorch's layout rules in pure Python, importable with any torch build.

- ``layout``: c10's predicates over plain tuples (contiguity, channels_last(_3d),
  non-overlapping-and-dense, memory formats, overlap).
- ``iterator``: TensorIterator's build steps, the plan a kernel walks, and ``explain()``.
- ``conformance``: the layout conformance kit, ``python -m torch_mydev_rules.conformance
  --device DEVICE``: any device's layouts against torch CPU's, and the rules against both.

Nothing here imports ``torch_mydev`` (the device package, which loads the compiled stub), so
the rules and the kit run on a CUDA (or any other) build of torch too.
"""
