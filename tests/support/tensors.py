"""Pairs of equal tensors on CPU and on mydev, and the bit-exact and layout comparisons the
differential tests judge them by."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch

import torch_mydev
from tests.layout.strategies import storage_elements
from tests.support.dtypes import SAME_WIDTH, UNSIGNED


def values(n: int, dtype: torch.dtype, seed: int, low: float = -100.0) -> torch.Tensor:
    """`n` CPU values of `dtype` that every cast we test converts without undefined behaviour.

    Floats are in [low, 100) (so float -> int stays in range; pass low=0 for unsigned
    targets) and include -0.0 (float8_e8m0fnu's powers of two stop at 64, which int8
    holds); integers and bools come from the same range, unsigned ones from [0, 100).
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, generator=g, dtype=torch.float64) * (100.0 - low) + low
    if n:
        x[0] = -0.0
    if dtype.is_complex:
        y = torch.rand(n, generator=g, dtype=torch.float64) * 200.0 - 100.0
        return torch.complex(x, y).to(dtype)
    if dtype == torch.float8_e8m0fnu:
        return (x * 0.5).to(dtype)
    if dtype.is_floating_point:
        return x.to(dtype)
    if dtype == torch.bool:
        return x > 0
    return x.trunc().clamp(min=0 if dtype in UNSIGNED else -100).to(dtype)


def view_pair(
    view: tuple[tuple[int, ...], tuple[int, ...], int],
    dtype: torch.dtype,
    seed: int = 0,
    low: float = -100.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same strided view over the same values, once on CPU and once on mydev."""
    sizes, strides, offset = view
    base = values(max(storage_elements(sizes, strides, offset), 1), dtype, seed, low)
    cpu = base.as_strided(sizes, strides, offset)
    dev = base.to("mydev").as_strided(sizes, strides, offset)
    return cpu, dev


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-exact equality of two tensors of one dtype (NaNs and -0.0 included)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(_flat_bytes(a), _flat_bytes(b))


def same_bits_but_nan_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``same_bits``, except that a NaN may have any sign and payload: NaN in the same places
    (each part of a complex value on its own), every other element bit-exact. The contract
    of docs/ops.md, where torch's own vectorised and scalar loops disagree on a NaN's bits."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    a, b = a.cpu().resolve_conj(), b.cpu().resolve_conj()
    if a.is_complex():
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    if not a.is_floating_point():
        return same_bits(a, b)
    nan = a.isnan()
    if not torch.equal(nan, b.isnan()):
        return False
    bits = SAME_WIDTH[a.element_size()]
    return torch.equal(a.view(bits).masked_fill(nan, 0), b.view(bits).masked_fill(nan, 0))


def _flat_bytes(t: torch.Tensor) -> torch.Tensor:
    flat = torch.empty(t.numel(), dtype=t.dtype).copy_(t.cpu().reshape(-1))
    return flat.view(torch.uint8)


def same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Sizes, strides, storage offset, dtype and contiguity flags all equal."""
    formats = (torch.contiguous_format, torch.channels_last, torch.channels_last_3d)
    flags_a = [a.is_contiguous(memory_format=f) for f in formats]
    flags_b = [b.is_contiguous(memory_format=f) for f in formats]
    return (
        a.shape == b.shape
        and a.stride() == b.stride()
        and a.storage_offset() == b.storage_offset()
        and a.dtype == b.dtype
        and flags_a == flags_b
    )


def step_with_counts(run_both: Callable[[], tuple]) -> Iterator[tuple]:
    """A module fixture's body: one training step on both devices (``run_both()``, an
    example's), then ``(cpu, mydev, fallback counts of both runs)``; the counts are reset
    before and after."""
    torch_mydev.reset_fallback_stats()
    cpu, mydev = run_both()
    stats = torch_mydev.fallback_stats()
    yield cpu, mydev, stats
    torch_mydev.reset_fallback_stats()
