"""Helpers shared by the test folders, one module per job.

- ``subprocess_run``: run a Python snippet or script in a fresh interpreter (environment
  overrides, a timeout, the exit status checked with the tail of stderr in the message);
- ``dtypes``: the dtype lists the tests draw from (what the device computes in, what its
  copies cast, every torch dtype, ...);
- ``raises``: the one "raises like CPU" rule: where CPU raises, mydev raises the same
  exception type (and message, where a caller compares it);
- ``tensors``: equal CPU/mydev tensor pairs and the bit-exact and layout comparisons;
- ``opcheck``: ``torch.library.opcheck`` on mydev, judged against the same call on CPU;
- ``profile``: whether the run uses hypothesis' ``deep`` profile, for tests sized without
  hypothesis.

The opcheck cases themselves live beside the ops (``tests/ops/opcheck_cases.py``), keyed by
the registration table's overload names.
"""
