"""A layout conformance kit for any device: our rules as the oracle, torch CPU as the truth.

``python -m torch_mydev_rules.conformance --device DEVICE`` runs seeded random layouts
through the mission's ops (the copy family, the elementwise families, reductions) and a
curated set of layout-sensitive ops (convolution, pooling, padding, norms, ``cat``,
indexing, SDPA, ...) on CPU and on ``DEVICE``, and compares sizes, strides, storage
offsets, dtypes, contiguity flags, aliasing and (where the device can be read) values. For
the mission's ops it also checks the rules' prediction against CPU and names the step of
``explain()`` at which a departing result leaves them. Needs nothing but torch: it never
imports ``torch_mydev`` (a backend is loaded by torch's autoload, or ``--import``).

One module per job:

- ``layouts``: which layouts are drawn (mirrors the rules' hypothesis strategies);
- ``devices``: whether a device can be used, and which dtypes it takes;
- ``cases``: how a case is written (``Op``, ``Call``, ``T``) and made real on a device;
- ``ops_mission``, ``ops_nn``, ``ops_tensor``: the catalogue, one entry per op;
- ``catalogue``: choosing ops by name or group;
- ``rules``: what the rules predict, and ``departs_at``;
- ``compare``: what is compared, and what counts as one check;
- ``runner``: the verdict on each case; ``report``: the table and the JSON file;
- ``__main__``: the command line (exit 0: no divergence, 1: divergences, 2: cannot run).

``docs/conformance.md`` says how to add an op or a device, and what it found.
"""

from .catalogue import ALL_OPS, select
from .devices import DeviceUnavailable, open_device
from .runner import Divergence, Result, run

__all__ = ["ALL_OPS", "DeviceUnavailable", "Divergence", "Result", "open_device", "run", "select"]
