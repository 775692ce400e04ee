"""Decides which ops a run tries: every catalogue entry, by name or by group.

The groups: ``layout``, ``elementwise`` and ``reduction`` (the mission's ops, with the
rules' predictions: ``ops_mission``; ``mission`` names all three) and ``curated``
(layout-sensitive ops compared with CPU alone: ``ops_nn``, ``ops_tensor``). To add an op,
add an ``Op`` to one of those tuples; its name must be new.
"""

from __future__ import annotations

from collections.abc import Sequence

from .cases import Op
from .ops_mission import MISSION_OPS
from .ops_nn import NN_OPS
from .ops_tensor import TENSOR_OPS

__all__ = ["ALL_OPS", "GROUPS", "select"]

ALL_OPS: tuple[Op, ...] = (*MISSION_OPS, *NN_OPS, *TENSOR_OPS)
GROUPS = {
    "layout": ("layout",),
    "elementwise": ("elementwise",),
    "reduction": ("reduction",),
    "mission": ("layout", "elementwise", "reduction"),
    "curated": ("curated",),
}


def select(names: Sequence[str] | None) -> list[Op]:
    """The ops named (op names or group names, in catalogue order); all when None.
    ``ValueError`` for a name that is neither."""
    if not names:
        return list(ALL_OPS)
    by_name = {op.name: op for op in ALL_OPS}
    chosen: set[str] = set()
    for name in names:
        if name in GROUPS:
            chosen.update(op.name for op in ALL_OPS if op.group in GROUPS[name])
        elif name in by_name:
            chosen.add(name)
        else:
            known = ", ".join([*GROUPS, *by_name])
            raise ValueError(f"unknown op or group {name!r}; known: {known}")
    return [op for op in ALL_OPS if op.name in chosen]
