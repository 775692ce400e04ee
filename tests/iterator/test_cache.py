"""The plan cache: ``cached_build`` returns what ``build`` returns, and the LRU stays bounded.

Truth: ``build`` itself (uncached) for the plans; for ``LRUCache``, the least-recently-used
rule written out by hand.
"""

from __future__ import annotations

import re
import threading

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from torch_mydev_rules.iterator import OperandSpec, binary_op_config, build, copy_config
from torch_mydev_rules.iterator.cache import LRUCache, cached_build, plan_cache

from .strategies import broadcast_shapes, layout_for, shapes


def test_lru_forgets_the_least_recently_used_entry():
    cache: LRUCache[str, int] = LRUCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "a" is now the most recent
    cache.put("c", 3)  # forgets "b"
    assert "b" not in cache
    assert cache.get("a") == 1
    assert cache.get("c") == 3
    assert len(cache) == 2
    assert (cache.hits, cache.misses) == (3, 0)
    assert cache.get("b") is None
    assert cache.misses == 1
    cache.clear()
    assert len(cache) == 0 and (cache.hits, cache.misses) == (0, 0)


def test_lru_needs_room_for_one_entry():
    with pytest.raises(ValueError, match="maxsize"):
        LRUCache(0)


def test_get_or_make_does_not_keep_errors():
    cache: LRUCache[int, int] = LRUCache(4)
    calls = []

    def fail() -> int:
        calls.append(1)
        raise RuntimeError("no")

    for _ in range(2):
        with pytest.raises(RuntimeError, match="no"):
            cache.get_or_make(1, fail)
    assert len(calls) == 2 and 1 not in cache
    assert cache.get_or_make(1, lambda: 5) == 5
    assert cache.get_or_make(1, fail) == 5  # made once, then remembered


def test_lru_stays_bounded_under_threads():
    cache: LRUCache[int, int] = LRUCache(8)

    def work(seed: int) -> None:
        for i in range(2000):
            key = (seed * 7919 + i) % 50
            value = cache.get_or_make(key, lambda k=key: k * 2)
            assert value == key * 2

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) <= 8


@given(shape=shapes(), data=st.data())
def test_cached_plan_is_the_plan_build_makes(shape, data):
    """Same decisions and the same explain text, whether cached or built afresh."""
    a = data.draw(layout_for(shape))[:2]
    b = data.draw(layout_for(data.draw(broadcast_shapes(shape))))[:2]
    dtype = data.draw(st.sampled_from([torch.float32, torch.int64, torch.float16]))
    ops = [OperandSpec.output(), OperandSpec(*a, dtype), OperandSpec(*b, torch.float32)]
    config = binary_op_config()
    try:
        fresh = build(ops, config)
    except RuntimeError as error:
        with pytest.raises(RuntimeError, match=re.escape(str(error)[:30])):
            cached_build(ops, config)
        return
    cached = cached_build(ops, config)
    assert cached == fresh
    assert cached.steps == fresh.steps
    assert cached_build(list(ops), config) is cached  # the second request is a hit


def test_key_holds_config_and_cpu():
    """Plans differing only in config or ``cpu`` are kept apart."""
    ops = [
        OperandSpec((3, 4), (1, 3), torch.float32, is_output=True),
        OperandSpec((3, 4), (4, 1), torch.float64),
    ]
    assert cached_build(ops, copy_config()) == build(ops, copy_config())
    out = [OperandSpec.output(), *ops[1:]]
    cpu = cached_build(out, binary_op_config())
    device = cached_build(out, binary_op_config(), cpu=False)
    assert cpu == build(out, binary_op_config())
    assert device == build(out, binary_op_config(), cpu=False)
    assert plan_cache().get((tuple(out), binary_op_config(), False)) is device


def test_steps_are_made_only_when_read():
    """``build`` records the describe calls; ``steps`` turns them into text once."""
    ops = [OperandSpec.output(), OperandSpec((2, 3), (1, 2), torch.float32)]
    plan = build(ops, binary_op_config())
    assert any(callable(text) for _, text in plan.recorded_steps)
    assert plan.steps is plan.steps  # made once
    assert all(isinstance(text, str) for _, text in plan.steps)
    assert [name for name, _ in plan.steps] == [name for name, _ in plan.recorded_steps]
