"""Decides nothing: remembers plans, so a layout seen before is not planned again.

``build`` is a pure function of its operand specs and its config, so a plan can be reused
whenever both are equal. The cache wraps the rule from outside and the rule stays free of
state: ``cached_build(operands, config)`` returns exactly what ``build(operands, config)``
returns (the same frozen ``Plan``), and ``build`` itself never looks at the cache.

``LRUCache`` is the bounded, least-recently-used map behind it; ops use their own instances
for per-call facts derived from a plan (kernel set-up, strides of a new tensor), keyed by
the sizes, strides and dtypes they read off their tensors.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Generic, TypeVar

from torch_mydev_rules.iterator.operands import IteratorConfig, OperandSpec
from torch_mydev_rules.iterator.plan import Plan, build

__all__ = ["PLAN_CACHE_SIZE", "LRUCache", "cached_build", "plan_cache"]

# Distinct (operands, config) pairs kept: a model touches a few hundred layouts; a plan is a
# few hundred bytes of tuples, so the cache stays well under a megabyte.
PLAN_CACHE_SIZE = 4096

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    """A map of at most ``maxsize`` entries that forgets the least recently used one first.

    Safe to share between threads without a lock: each step is one ``OrderedDict`` operation
    (atomic under the GIL for keys hashed in C: tuples of ints, dtypes, memory formats), and
    an entry another thread evicted between two steps is simply missing. ``hits`` and
    ``misses`` count lookups (approximately, under threads).
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, got {maxsize}")
        self.maxsize = maxsize
        self.hits = 0
        self.misses = 0
        self._data: OrderedDict[K, V] = OrderedDict()
        # The stored value or None, as one C call: no recency update, no counting. Per-call
        # paths use it; an entry they keep hitting may then be evicted as if unused, and is
        # made again on its next miss.
        self.peek: Callable[[K], V | None] = self._data.get

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: K) -> V | None:
        """The value stored for ``key`` (now the most recently used), or None."""
        data = self._data
        value = data.get(key)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        try:  # noqa: SIM105 (contextlib.suppress costs more than the lookup it guards)
            data.move_to_end(key)
        except KeyError:  # evicted by another thread meanwhile
            pass
        return value

    def put(self, key: K, value: V) -> None:
        """Store ``value`` (not None) for ``key``, forgetting the oldest entry when full."""
        data = self._data
        data[key] = value
        while len(data) > self.maxsize:
            try:
                data.popitem(last=False)
            except KeyError:  # emptied by another thread meanwhile
                break

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The value for ``key``, made by ``make()`` and stored on the first request.

        When ``make`` raises, nothing is stored (every request for that key raises again).
        Two threads missing the same key both make it; the results are equal, the second
        one stored wins.
        """
        value = self.get(key)
        if value is None:
            value = make()
            self.put(key, value)
        return value

    def clear(self) -> None:
        """Forget every entry and reset the counters (``peek`` sees the same, emptied map)."""
        self._data.clear()
        self.hits = 0
        self.misses = 0


_plans: LRUCache[tuple, Plan] = LRUCache(PLAN_CACHE_SIZE)


def plan_cache() -> LRUCache[tuple, Plan]:
    """The cache ``cached_build`` uses (for statistics, and ``clear()`` in tests)."""
    return _plans


def cached_build(
    operands: Sequence[OperandSpec], config: IteratorConfig, *, cpu: bool = True
) -> Plan:
    """``build(operands, config, cpu=cpu)``, made once per distinct key and then reused.

    Keyed by the operand specs (sizes, strides, dtype and the output / read-write / number
    flags), the config and ``cpu``: everything ``build`` reads. A call that raises is not
    remembered, so it raises again the next time.
    """
    given = tuple(operands)
    return _plans.get_or_make((given, config, cpu), lambda: build(given, config, cpu=cpu))
