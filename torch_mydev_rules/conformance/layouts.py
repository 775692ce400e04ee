"""Decides which layouts the kit tries: seeded random sizes, strides and storage offsets.

What is drawn mirrors the hypothesis strategies of the rules' own tests
(``tests/iterator/strategies.py`` and ``tests/layout/strategies.py``), with ``random.Random``
so the kit needs nothing beyond torch:

- sizes 0..4 per dim (1 and 2 favoured, 0 rare), rank 0..5; at ranks 4 and 5 often an
  ambiguous shape (C == 1, or every spatial dim 1);
- a dense base whose dims run in C order, channels_last(_3d) order, reversed or a random
  permutation (a transpose), then sliced: steps, gaps between rows and a storage offset;
- expanded dims (stride 0), size-1 dims with an arbitrary stride (what views leave, and what
  makes ``N,C,1,1`` tensors ambiguous), and now and then fully arbitrary (overlapping)
  strides.

``Layout`` is ``(sizes, strides, offset)`` in elements. ``materialise`` turns one into a
tensor on any device over a buffer whose values come from a seed, so CPU and the device
under test see the same elements.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import NamedTuple

import torch

__all__ = [
    "Layout",
    "broadcast_shape",
    "dense",
    "describe",
    "draw_layout",
    "draw_shape",
    "extent",
    "materialise",
    "overlaps",
    "values",
]


class Layout(NamedTuple):
    """Sizes, strides and storage offset of one tensor, in elements."""

    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int = 0


_SIZES = (0, 1, 1, 2, 2, 3, 4)


def draw_shape(
    rng: random.Random, min_dims: int = 0, max_dims: int = 5, *, positive: bool = False
) -> tuple[int, ...]:
    """A shape of rank ``min_dims..max_dims``, sizes 0..4 (``strategies.shapes``); rank 4/5
    shapes are often ambiguous (``C == 1`` or every spatial dim 1, ``sizes_of_rank``)."""
    ndim = rng.randint(min_dims, max_dims)
    sizes = [rng.choice(_SIZES[1:] if positive else _SIZES) for _ in range(ndim)]
    if ndim in (4, 5):
        kind = rng.choice(("free", "free", "channels_1", "spatial_1"))
        if kind == "channels_1":
            sizes[1] = 1
        elif kind == "spatial_1":
            sizes[2:] = [1] * (ndim - 2)
    return tuple(sizes)


def dense(sizes: Sequence[int], order: Sequence[int]) -> tuple[int, ...]:
    """Packed strides with the dims of ``order`` fastest first (size 0 counted as 1)."""
    strides = [0] * len(sizes)
    running = 1
    for d in order:
        strides[d] = running
        running *= max(sizes[d], 1)
    return tuple(strides)


def _order(rng: random.Random, ndim: int, kind: str) -> list[int]:
    """Fastest-first dim order of a base: C, channels_last(_3d), reversed or random."""
    c_order = list(range(ndim - 1, -1, -1))
    if kind == "channels_last" and ndim in (4, 5):
        return [1, *range(ndim - 1, 1, -1), 0]
    if kind == "reversed":
        return list(range(ndim))
    if kind == "random":
        rng.shuffle(c_order)
    return c_order


def draw_layout(
    rng: random.Random,
    sizes: Sequence[int],
    *,
    allow_overlap: bool = True,
    kind: str | None = None,
) -> Layout:
    """A layout for ``sizes`` (``strategies.layout_for``): permuted, sliced, expanded,
    ambiguous or arbitrary strides. ``kind`` forces the base order (``"contiguous"``,
    ``"channels_last"``, ``"reversed"``, ``"random"``); ``allow_overlap=False`` leaves out
    stride-0 dims and arbitrary strides (a tensor an op may write)."""
    ndim = len(sizes)
    kind = kind or rng.choice(
        ("contiguous", "channels_last", "channels_last", "reversed", "random")
    )
    order = _order(rng, ndim, kind)
    sliced = rng.random() < 0.5
    steps = [rng.choice((1, 1, 2)) if sliced else 1 for _ in range(ndim)]
    pads = [rng.choice((0, 0, 1)) if sliced else 0 for _ in range(ndim)]
    strides = [0] * ndim
    running = 1
    for d in order:
        strides[d] = running * steps[d]
        running *= max(sizes[d], 1) * steps[d] + pads[d]
    if allow_overlap and ndim and rng.randint(0, 3) == 0:
        for d in rng.sample(range(ndim), rng.randint(0, min(2, ndim))):
            strides[d] = 0  # expanded
    for d in range(ndim):
        if sizes[d] == 1 and rng.randint(0, 2) == 0:
            strides[d] = rng.randint(0, 40)  # a free stride: ambiguous layouts
    if allow_overlap and ndim and rng.randint(0, 7) == 0:
        strides = [rng.randint(0, 12) for _ in range(ndim)]
    offset = rng.randint(0, 3) if sliced or rng.random() < 0.2 else 0
    return Layout(tuple(sizes), tuple(strides), offset)


def broadcast_shape(rng: random.Random, target: Sequence[int]) -> tuple[int, ...]:
    """A shape that broadcasts to ``target``: a suffix of it, some dims set to 1."""
    keep = rng.randint(0, len(target))
    suffix = tuple(target)[len(target) - keep :]
    return tuple(1 if rng.randint(0, 3) == 0 else s for s in suffix)


def extent(layout: Layout) -> int:
    """Elements of storage the layout reaches, offset included (1 for an empty tensor, so
    every layout has a buffer to stand on)."""
    sizes, strides, offset = layout
    if 0 in sizes:
        return offset + 1
    return offset + 1 + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True))


def values(n: int, dtype: torch.dtype, kind: str, generator: torch.Generator) -> torch.Tensor:
    """``n`` CPU values of ``dtype`` that every dtype represents exactly.

    ``kind``: ``"any"`` (integers -4..4, unsigned 0..8; floats -3..3 in halves), ``"nonneg"``
    (no negative values: casts to unsigned types stay defined), ``"positive"`` (no zero: a
    divisor), ``"index:N"`` (int64 indices 0..N-1), ``"distinct:N"`` (the same, where
    ``materialise`` then makes the tensor's own elements distinct), ``"bool"``.
    """
    if kind.startswith(("index:", "distinct:")):
        return torch.randint(0, max(int(kind.split(":")[1]), 1), (n,), generator=generator)
    if dtype == torch.bool or kind == "bool":
        if kind == "positive":  # a bool divisor: False is a zero
            return torch.ones(n, dtype=dtype)
        return torch.randint(0, 2, (n,), generator=generator).to(dtype)
    low, high = {"any": (-6, 7), "nonneg": (0, 7), "positive": (1, 7)}[kind]
    unsigned = dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64)
    if unsigned:
        low = max(low, 0)
    halves = torch.randint(low, high, (n,), generator=generator, dtype=torch.int64)
    if dtype.is_floating_point or dtype.is_complex:
        real = halves.to(torch.float32) / 2
        if dtype.is_complex:
            imag = torch.randint(low, high, (n,), generator=generator).to(torch.float32) / 2
            return torch.complex(real, imag).to(dtype)
        return real.to(dtype)
    return (halves // 2 if low < 0 else halves).to(dtype)


def materialise(
    layout: Layout,
    dtype: torch.dtype,
    device: torch.device | str,
    *,
    kind: str = "any",
    seed: int = 0,
) -> torch.Tensor:
    """A tensor with exactly ``layout`` on ``device``: a 1-D buffer of seeded ``values`` made
    on CPU, moved to the device as it is, and viewed there with ``as_strided``."""
    generator = torch.Generator().manual_seed(seed)
    buffer = values(extent(layout), dtype, kind, generator)
    if kind.startswith("distinct:"):  # a layout without overlap, of at most N elements
        view = buffer.as_strided(layout.sizes, layout.strides, layout.offset)
        picked = torch.randperm(int(kind.split(":")[1]), generator=generator)[: view.numel()]
        view.copy_(picked.view(view.shape))
    if torch.device(device).type != "cpu":
        buffer = buffer.to(device)
    return buffer.as_strided(layout.sizes, layout.strides, layout.offset)


def overlaps(layout: Layout) -> bool:
    """Whether two elements of ``layout`` share an address (the layouts drawn here are small
    enough to list every address)."""
    addresses = {layout.offset}
    for size, stride in zip(layout.sizes, layout.strides, strict=True):
        addresses = {a + i * stride for a in addresses for i in range(size)}
    return len(addresses) < math.prod(layout.sizes)


def describe(layout: Layout, dtype: torch.dtype | None = None) -> str:
    """``[2, 3] (1, 2) +1 float32``: sizes, strides, a non-zero offset, and the dtype."""
    sizes, strides, offset = layout
    text = f"{list(sizes)} {tuple(strides)}"
    if offset:
        text += f" +{offset}"
    if dtype is not None:
        text += " " + str(dtype).removeprefix("torch.")
    return text
