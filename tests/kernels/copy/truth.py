"""Torch CPU as the truth for the copy kernel: storages, layouts, values, and the comparison.

A case is two 1-D CPU storages and two ``as_strided`` views over them. Torch's answer is
``dst_view.copy_(src_view)`` on one copy of the destination storage; the kernel's is
``copy_strided`` over the raw bytes of another copy. The whole destination storages are
compared, so bytes outside the view must stay untouched.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tests.support.dtypes import COPY_DTYPES
from torch_mydev.kernels.copy import kernel as kcopy
from torch_mydev.kernels.operand import Operand

DTYPES = COPY_DTYPES
UNSIGNED = (torch.uint16, torch.uint32, torch.uint64)
INTEGRAL = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, *UNSIGNED)
FLOAT8 = (
    torch.float8_e4m3fn,
    torch.float8_e4m3fnuz,
    torch.float8_e5m2,
    torch.float8_e5m2fnuz,
    torch.float8_e8m0fnu,
)
FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64, *FLOAT8)
# torch 2.14's bcomplex32 (bfloat16 parts) where torch has it.
_BCOMPLEX32 = (torch.bcomplex32,) if hasattr(torch, "bcomplex32") else ()
COMPLEX = (torch.complex32, torch.complex64, torch.complex128, *_BCOMPLEX32)
_PART = {torch.complex32: torch.float16, torch.complex64: torch.float32}
_PART.update({dtype: torch.bfloat16 for dtype in _BCOMPLEX32})

# torch's vectorised CPU loops write another NaN than its scalar conversion (which the kernel
# follows) at positions that depend on vector widths and thread splits, for these pairs:
# (src, dst) -> the NaN bits torch's vector path writes. (float32 -> bfloat16 is not here:
# the kernel follows torch's vector NaN where torch's rule is a plain layout rule.)
VECTOR_NAN_BITS = {
    (torch.float64, torch.bfloat16): 0xFFFF,
    (torch.float16, torch.float32): 0x7FFFFFFF,
}

_BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def storage_bytes(t: torch.Tensor) -> np.ndarray:
    """The whole storage of a CPU tensor as a writable 1-D uint8 numpy array (shared memory)."""
    return torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage()).numpy()


@dataclass(frozen=True)
class Layout:
    """A strided view: sizes and element strides in torch order, and a storage offset."""

    sizes: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int

    def storage_numel(self, slack: int = 0) -> int:
        """Elements a storage needs to hold the view (plus ``slack``)."""
        if any(n == 0 for n in self.sizes):
            return self.offset + slack
        last = sum((n - 1) * s for n, s in zip(self.sizes, self.strides, strict=True))
        return self.offset + last + 1 + slack


def iteration_order(sizes: Sequence[int], strides: Sequence[int]) -> list[int]:
    """TensorIterator's dim order for a copy into this destination, fastest first.

    ``reorder_dimensions`` sorts dims by the output's strides first; a non-overlapping
    destination has distinct strides on its dims longer than 1, so a stable sort by
    (size 1 last, stride) gives the same order where it matters.
    """
    return sorted(range(len(sizes)), key=lambda d: (sizes[d] == 1, strides[d]))


def copy_bytes(
    dst: np.ndarray,
    dst_offset: int,
    dst_dtype: torch.dtype,
    src: np.ndarray,
    src_offset: int,
    src_dtype: torch.dtype,
    shape: Sequence[int],
    dst_strides: Sequence[int],
    src_strides: Sequence[int],
) -> None:
    """``kcopy.copy_strided`` with each operand's parts spelled out (the tests' shorthand)."""
    kcopy.copy_strided(
        Operand(dst, dst_offset, dst_dtype, tuple(dst_strides)),
        Operand(src, src_offset, src_dtype, tuple(src_strides)),
        tuple(shape),
    )


def kernel_copy(dst: torch.Tensor, src: torch.Tensor, order: Sequence[int] | None = None) -> None:
    """``dst.copy_(src)`` by ``copy_strided``; dims go fastest-first as ``order`` says.

    ``order`` lists torch dims, fastest first; by default TensorIterator's order. ``src``
    must already have ``dst``'s shape (broadcast dims with stride 0).
    """
    dims = iteration_order(dst.shape, dst.stride()) if order is None else list(order)
    copy_bytes(
        storage_bytes(dst),
        dst.storage_offset() * dst.element_size(),
        dst.dtype,
        storage_bytes(src),
        src.storage_offset() * src.element_size(),
        src.dtype,
        tuple(dst.shape[d] for d in dims),
        tuple(dst.stride(d) * dst.element_size() for d in dims),
        tuple(src.stride(d) * src.element_size() for d in dims),
    )


def run_case(
    src_storage: torch.Tensor,
    src_layout: Layout,
    dst_dtype: torch.dtype,
    dst_layout: Layout,
    rng: np.random.Generator,
    order: Sequence[int] | None = None,
) -> None:
    """Copy ``src_layout`` of ``src_storage`` into ``dst_layout`` both ways; compare bytes."""
    itemsize = torch.empty(0, dtype=dst_dtype).element_size()
    filler = rng.integers(0, 256, dst_layout.storage_numel(slack=2) * itemsize, dtype=np.uint8)
    if dst_dtype == torch.bool:
        filler &= 1  # keep bool storages valid for torch
    truth = torch.from_numpy(filler.copy()).view(dst_dtype)
    ours = torch.from_numpy(filler.copy()).view(dst_dtype)
    src_view = src_storage.as_strided(src_layout.sizes, src_layout.strides, src_layout.offset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex -> real discards the imaginary part
        truth.as_strided(dst_layout.sizes, dst_layout.strides, dst_layout.offset).copy_(src_view)
    kernel_copy(
        ours.as_strided(dst_layout.sizes, dst_layout.strides, dst_layout.offset), src_view, order
    )
    loose = dict(VECTOR_NAN_BITS)
    natural = iteration_order(dst_layout.sizes, dst_layout.strides)
    if order is not None and _first_long_dim(order, dst_layout) != _first_long_dim(
        natural, dst_layout
    ):
        # Not TensorIterator's dim 0: the kernel cannot see torch's float32 -> bfloat16
        # vector loop, whose NaN bits depend on dim 0.
        loose[(torch.float32, torch.bfloat16)] = 0xFFFF
    assert_same_bits(ours, truth, src_storage.dtype, loose)


def _first_long_dim(order: Sequence[int], layout: Layout) -> int | None:
    return next((d for d in order if layout.sizes[d] != 1), None)


def assert_same_bits(
    ours: torch.Tensor,
    truth: torch.Tensor,
    src_dtype: torch.dtype,
    loose: dict[tuple[torch.dtype, torch.dtype], int] = VECTOR_NAN_BITS,
) -> None:
    """Bit-exact, except NaNs torch's vector loops write differently (``loose`` pairs)."""
    a = storage_bytes(ours)
    b = storage_bytes(truth)
    if np.array_equal(a, b):
        return
    size = ours.element_size()
    vector_nan = loose.get((src_dtype, ours.dtype))
    if vector_nan is not None:
        mine = a.view(_BITS[size])
        theirs = b.view(_BITS[size])
        differ = mine != theirs
        exponent, magnitude = (0x7F80, 0x7FFF) if size == 2 else (0x7F800000, 0x7FFFFFFF)
        mine_nan = (mine & magnitude) > exponent
        if np.all(theirs[differ] == vector_nan) and np.all(mine_nan[differ]):
            return
    where = np.flatnonzero(a != b)[:8]
    raise AssertionError(
        f"{src_dtype} -> {ours.dtype}: bytes differ at {where.tolist()}: "
        f"ours {a[where].tolist()} torch {b[where].tolist()}"
    )


# ---- values ---------------------------------------------------------------------------------

_F32_SPECIAL = np.array(
    [
        0x00000000,
        0x80000000,
        0x7F800000,
        0xFF800000,
        0x7FC00000,
        0xFFC00000,
        0x7F800001,
        0x7FA12345,
        0xFFFFFFFF,
        0x00000001,
        0x807FFFFF,
        0x00800000,
        0x477FE000,
        0x477FEFFF,
        0x477FF000,
        0x477FF001,
        0x33000000,
        0x33000001,
        0x33800000,
        0x387FC000,
        0x387FE000,
        0x38800000,
        0x3F808000,
        0x3F818000,
        0x3F808001,
        0x7F7FFFFF,
        0x7F7F8000,
        0x3F801000,
        0x3F803000,
        0x4B800001,
        0x38000000,
        0x37FFFFFF,
    ],
    dtype=np.uint32,
)


def _float32_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    """float32 bit patterns: raw, half/bfloat16 range, rounding ties, specials."""
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    pick = rng.integers(0, 5, n)
    exponent = rng.integers(98, 145, n).astype(np.uint32) << 23  # around half's range
    bits = np.where(pick == 1, (bits & 0x807FFFFF) | exponent, bits)
    bits = np.where(pick == 2, (bits & 0xFFFF0000) | 0x8000, bits)  # bfloat16 ties
    half_tie = (bits & 0x807FE000) | 0x1000 | exponent
    bits = np.where(pick == 3, half_tie, bits)  # float16 ties
    special = _F32_SPECIAL[rng.integers(0, _F32_SPECIAL.size, n)]
    return np.where(pick == 4, special, bits).astype(np.uint32)


def _float64_bits(rng: np.random.Generator, n: int) -> np.ndarray:
    """float64 bit patterns: raw, float32 values nudged by one ulp (double rounding), specials."""
    raw = rng.integers(0, 1 << 63, n, dtype=np.int64).astype(np.uint64) << np.uint64(1)
    raw |= rng.integers(0, 2, n).astype(np.uint64)
    with np.errstate(invalid="ignore"):  # signalling NaNs widen quietly
        widened = _float32_bits(rng, n).view(np.float32).astype(np.float64).view(np.uint64)
    nudge = rng.integers(-1, 2, n).astype(np.int64).view(np.uint64)
    finite = (widened & np.uint64(0x7FF0000000000000)) != np.uint64(0x7FF0000000000000)
    nudged = np.where(finite, widened + nudge, widened)
    pick = rng.integers(0, 3, n)
    specials = np.array(
        [0x7FF0000000000001, 0xFFF8000000000000, 0x7FF4000000000000, 0x8000000000000000],
        dtype=np.uint64,
    )
    out = np.where(pick == 0, raw, nudged)
    return np.where(rng.integers(0, 16, n) == 0, specials[rng.integers(0, 4, n)], out)


def _raw_values(dtype: torch.dtype, n: int, rng: np.random.Generator) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.from_numpy(rng.integers(0, 2, n).astype(np.bool_))
    if dtype in UNSIGNED or dtype in FLOAT8 or dtype in (torch.complex32, *_BCOMPLEX32):
        raw = rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8)  # every bit pattern
        return torch.from_numpy(raw).view(dtype)
    if dtype in INTEGRAL:
        info = torch.iinfo(dtype)
        values = rng.integers(info.min, info.max, n, endpoint=True, dtype=np.int64)
        return torch.from_numpy(values).to(dtype)
    if dtype in (torch.float16, torch.bfloat16):
        bits = rng.integers(0, 1 << 16, n).astype(np.uint16).view(np.int16)
        return torch.from_numpy(bits).view(dtype)
    if dtype == torch.float32:
        return torch.from_numpy(_float32_bits(rng, n).view(np.float32))
    if dtype == torch.float64:
        return torch.from_numpy(_float64_bits(rng, n).view(np.float64))
    part = _PART.get(dtype, torch.float64)
    real = _raw_values(part, n, rng)
    imag = _raw_values(part, n, rng)
    return torch.complex(real, imag)


def _in_range_values(
    dtype: torch.dtype, target: torch.dtype, n: int, rng: np.random.Generator
) -> torch.Tensor:
    """Floating values whose truncation fits ``target`` (c10: uint8 goes through int64)."""
    if target == torch.uint8:
        low, high = -1000.0, 1000.0
    elif target == torch.int64:
        low, high = -(2.0**62), 2.0**62
    elif target == torch.uint64:
        low, high = 0.0, 2.0**64 - 2.0**11  # the largest double below 2**64
    else:
        info = torch.iinfo(target)
        low, high = float(info.min), float(info.max)
    part = {**_PART, torch.complex128: torch.float64}.get(dtype, dtype)
    scale = rng.choice([1.0, 0.01, 1e-6], n) * rng.uniform(low, high, n)
    small = rng.choice([-0.9, -0.5, -0.0, 0.0, 0.5, 0.99, 1.5, -2.5], n)
    wide = torch.from_numpy(np.where(rng.integers(0, 4, n) == 0, small, scale))
    whole = wide.to(part).double().trunc()  # as the source holds it (float8 may saturate)
    wide[(whole < low) | (whole > high) | whole.isnan()] = 0
    values = wide.to(part)
    if dtype in COMPLEX:
        return _complex(values, _raw_values(part, n, rng), dtype)
    return values


def _complex(real: torch.Tensor, imag: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The complex tensor of these parts (torch.complex takes no bfloat16 parts)."""
    if dtype not in _BCOMPLEX32:
        return torch.complex(real, imag)
    return torch.stack([real, imag], dim=1).view(torch.int16).view(torch.int32).view(dtype)[:, 0]


def make_values(
    src: torch.dtype, dst: torch.dtype, n: int, rng: np.random.Generator
) -> torch.Tensor:
    """``n`` source values for a ``src`` -> ``dst`` copy: every bit pattern allowed, except
    that floating -> integer values stay in range (out of range is undefined behaviour)."""
    if dst in INTEGRAL and (src in FLOATING or src in COMPLEX):
        return _in_range_values(src, dst, n, rng)
    return _raw_values(src, n, rng)
