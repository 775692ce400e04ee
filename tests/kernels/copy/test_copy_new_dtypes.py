"""Casts of float8, complex32 and uint16/32/64 against torch CPU, at their edges.

Truth: ``dst_view.copy_(src_view)`` on CPU (``copy_kernel`` -> ``c10::convert``: float8
through float32 with c10's rounding and saturation, complex32 as ``c10::complex<Half>``,
unsigned wrap-around), compared byte for byte over the whole destination storage, for a
contiguous and a strided layout (torch's vectorised and scalar loops). The random pairs of
every dtype are in ``test_copy_cast``; these tests cover what random bits rarely hit: every
float8 code, every rounding boundary of every float8 format, every float16 half of a
complex32, 64-bit unsigned values from 2**63. Floating -> integer values stay in range
(out of range is undefined behaviour in C++; see ``_convert``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.support.dtypes import SAME_WIDTH
from torch_mydev.kernels.dtypes import layout_of
from torch_mydev.kernels.float8 import DECODE

from .truth import (
    COMPLEX,
    DTYPES,
    FLOAT8,
    FLOATING,
    INTEGRAL,
    Layout,
    kernel_copy,
    make_values,
    run_case,
)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _both_layouts(values: torch.Tensor, dst: torch.dtype, seed: int = 0) -> None:
    """``values`` (1-D) into ``dst``: contiguous, then every other element into a strided
    destination, each against CPU's copy."""
    rng = np.random.default_rng(seed)
    n = values.numel()
    run_case(values, Layout((n,), (1,), 0), dst, Layout((n,), (1,), 0), rng)
    run_case(values, Layout((n // 2,), (2,), 1), dst, Layout((n // 2,), (3,), 2), rng)


def _select(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``values[mask]`` for any dtype (CPU cannot index float8 or complex32 directly)."""
    bits = values.view(SAME_WIDTH[values.element_size()])
    return bits[mask].view(values.dtype)


def _fits(values: torch.Tensor, dst: torch.dtype) -> torch.Tensor:
    """Which floating (or complex: real part) values truncate into ``dst``'s range; uint8
    goes through int64 (c10), so any value below 2**62 in size fits it."""
    real = (values.real if values.is_complex() else values).double()
    whole = real.trunc()
    if dst == torch.uint8:
        low, high = -(2.0**62), 2.0**62
    elif dst == torch.uint64:
        low, high = 0.0, 2.0**64 - 2.0**11
    else:
        info = torch.iinfo(dst)
        low, high = float(info.min), float(info.max)
    return real.isfinite() & (whole >= low) & (whole <= high)


@pytest.mark.parametrize("src", FLOAT8, ids=_name)
def test_every_float8_code_to_every_dtype(src: torch.dtype) -> None:
    """All 256 codes (NaNs, subnormals, fnuz's single NaN, e8m0's 2**-127) to each dtype."""
    codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(src)
    for dst in DTYPES:
        values = codes
        if dst in INTEGRAL:
            values = _select(codes, _fits(codes.float(), dst))
        _both_layouts(values, dst)


def test_float8_decode_tables_are_cpus() -> None:
    """``float8.DECODE`` holds what CPU's float8 -> float32 gives for all 256 codes."""
    for dtype in FLOAT8:
        codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(dtype)
        truth = codes.float().view(torch.int32).numpy().view(np.uint32)
        assert np.array_equal(DECODE[layout_of(dtype).fmt], truth), dtype


def _float8_edges(dtype: torch.dtype) -> np.ndarray:
    """float32 bit patterns at every rounding decision of ``dtype``: each finite value, each
    midpoint between neighbours (a tie), one float32 ulp either side of both, the same
    around the largest value (saturation or overflow) and the smallest subnormal, every
    float32 subnormal class, infinities and NaNs with payloads, all with both signs."""
    table = DECODE[layout_of(dtype).fmt].view(np.float32)
    finite = np.unique(np.abs(table[np.isfinite(table)]).astype(np.float32))
    top = finite[-1]
    with np.errstate(over="ignore"):  # e8m0fnu's top * 2 is infinity
        points = [finite, (finite[:-1] + finite[1:]) / 2, finite * 1.5, [top * 2, top * 1.0625]]
        points.append([finite[finite > 0][0] / 2, finite[finite > 0][0] / 4, 1e-30, 1e30, 3e38])
        core = np.concatenate([np.asarray(p, np.float32) for p in points])
        near = [core, np.nextafter(core, np.float32(np.inf)), np.nextafter(core, np.float32(0))]
    bits = np.concatenate(near).view(np.uint32)
    special = np.array(
        [0x7F800000, 0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0x00000001, 0x00200000, 0x00400000,
         0x00400001, 0x00600000, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0x3FC00000, 0x3FA00000],
        dtype=np.uint32,
    )  # fmt: skip
    bits = np.concatenate([bits, special])
    return np.unique(np.concatenate([bits, bits | np.uint32(0x80000000)]))


@pytest.mark.parametrize("dst", FLOAT8, ids=_name)
def test_rounding_and_saturation_into_float8(dst: torch.dtype) -> None:
    """float32 at every edge of ``dst``; float64 one double ulp either side of them (rounded
    to float32 first, then to float8: twice, as torch); large integers and uint64."""
    bits = _float8_edges(dst)
    floats = torch.from_numpy(bits.view(np.float32).copy())
    _both_layouts(floats, dst)
    wide = bits.view(np.float32).astype(np.float64)
    with np.errstate(invalid="ignore"):
        nudged = np.concatenate([wide, np.nextafter(wide, np.inf), np.nextafter(wide, -np.inf)])
    _both_layouts(torch.from_numpy(nudged), dst)
    _both_layouts(torch.from_numpy(nudged.astype(np.complex128) * (1 - 2j)), dst)
    finite = np.abs(wide[np.isfinite(wide) & (np.abs(wide) < 2.0**62)])
    ints = np.concatenate([np.floor(finite), [(1 << 62) + 1, (1 << 40) + (1 << 31), 480, 57344]])
    _both_layouts(torch.from_numpy(np.concatenate([ints, -ints]).astype(np.int64)), dst)
    _both_layouts(torch.from_numpy(ints.astype(np.uint64) | np.uint64(1 << 63)), dst)


def test_float8_to_float8_rounds_through_float32() -> None:
    """Every code of every float8 format into every other format."""
    for src in FLOAT8:
        codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(src)
        for dst in FLOAT8:
            _both_layouts(codes, dst)


def _halves() -> torch.Tensor:
    return torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16)


# complex32, and torch 2.14's bcomplex32 (bfloat16 parts) where torch has it.
REDUCED_COMPLEX = [d for d in COMPLEX if d.itemsize == 4]


@pytest.mark.parametrize("complex_dtype", REDUCED_COMPLEX, ids=_name)
def test_every_complex32_half_to_every_dtype(complex_dtype: torch.dtype) -> None:
    """All 65536 float16 (bfloat16) patterns as real parts (imaginary parts a shuffle of
    them) to each dtype; complex32 -> float16 keeps a signalling NaN's bits
    (``static_cast<Half>``), as bcomplex32 -> bfloat16 does, the widening ones quiet it."""
    part = complex_dtype.to_real()
    real = _halves()
    imag = real[torch.randperm(real.numel(), generator=torch.Generator().manual_seed(0))]
    values = torch.stack([real, imag], dim=1).reshape(-1).view(complex_dtype)
    for dst in DTYPES:
        chosen = values
        if dst in INTEGRAL:
            chosen = _select(values, _fits(values.view(part)[::2].float(), dst))
        _both_layouts(chosen, dst)


@pytest.mark.parametrize("complex_dtype", REDUCED_COMPLEX, ids=_name)
def test_every_dtype_into_complex32(complex_dtype: torch.dtype) -> None:
    """float16 (bfloat16) patterns -- NaNs quieted on the way through float32, except that
    bfloat16 -> bcomplex32 keeps the bits --, and random values of every dtype."""
    _both_layouts(_halves().view(complex_dtype.to_real()), complex_dtype)
    rng = np.random.default_rng(1)
    for src in DTYPES:
        _both_layouts(make_values(src, complex_dtype, 4000, rng), complex_dtype)


_U64_EDGES = [
    0,
    1,
    (1 << 24) + 1,
    (1 << 31),
    (1 << 32) - 1,
    (1 << 32),
    (1 << 53) + 1,
    (1 << 63) - 1,
    1 << 63,
    (1 << 63) + 1,
    (1 << 63) + (1 << 39) + 1,
    (1 << 64) - (1 << 40),
    (1 << 64) - 1,
]


def test_uint64_above_two_to_the_63() -> None:
    """uint64 from 2**63 to every dtype: floats round the unsigned value (once for
    float32/float64, through float32 for the 16-bit and 8-bit floats), integers keep the
    low bytes, bool is nonzero."""
    rng = np.random.default_rng(2)
    raw = rng.integers(0, 1 << 64, 3000, dtype=np.uint64, endpoint=False)
    values = np.concatenate([np.array(_U64_EDGES, dtype=np.uint64), raw, raw | (1 << 63)])
    values = torch.from_numpy(values)
    for dst in DTYPES:
        _both_layouts(values, dst)


@pytest.mark.parametrize("dst", [torch.uint16, torch.uint32, torch.uint64], ids=_name)
def test_wrap_around_into_unsigned(dst: torch.dtype) -> None:
    """Negative and wide integers wrap into the unsigned types (modular, as C++ defines);
    in-range floats from every floating dtype truncate toward zero, uint64's from 2**63."""
    ints = torch.tensor([-1, -2, -(1 << 15), -(1 << 31) - 1, -(1 << 63), (1 << 40) + 7, 65537])
    for src in (torch.int8, torch.int16, torch.int32, torch.int64, torch.bool, torch.uint8):
        _both_layouts(ints.to(src) if src != torch.bool else ints > 0, dst)
    top = float(torch.iinfo(dst).max)
    floats = torch.tensor([0.0, -0.0, -0.99, 0.5, 1.5, 65535.9, 4294967295.0, 2.0**63, top])
    floats = torch.cat([floats, torch.rand(500, dtype=torch.float64) * top])
    for src in (*FLOATING, *COMPLEX):
        part = src.to_real() if src.is_complex else src
        cast = floats.to(part)
        values = _select(cast, _fits(cast.float(), dst))
        _both_layouts(values.to(src), dst)


def test_known_answers_of_the_new_dtypes() -> None:
    """A few conversions pinned down by value, as c10 defines them."""

    def cast(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        out = torch.empty(values.shape, dtype=dtype)
        kernel_copy(out, values)
        return out

    def codes(t: torch.Tensor) -> list[int]:
        return t.view(torch.uint8).tolist()

    big = torch.tensor([448.0, 464.0, 480.0, 1e9, float("inf"), float("nan")])
    # e4m3fn saturates (infinity too: it has none), e5m2 overflows to infinity, 464 is a tie
    # in e4m3fn (to even: 448) but below one in e5m2; 448 is past e4m3fnuz's 240: NaN.
    assert codes(cast(big, torch.float8_e4m3fn)) == [0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7F]
    assert codes(cast(big, torch.float8_e5m2)) == [0x5F, 0x5F, 0x60, 0x7C, 0x7C, 0x7F]
    assert codes(cast(big, torch.float8_e4m3fnuz)) == [0x80] * 6
    # fnuz has no negative zero; e8m0fnu drops the sign and rounds up from 1.5
    assert codes(cast(torch.tensor([-0.0, -1e-30]), torch.float8_e4m3fnuz)) == [0, 0]
    e8m0 = torch.tensor([-2.0, 3.0, 2.9, 0.0, float("nan")])
    assert codes(cast(e8m0, torch.float8_e8m0fnu)) == [128, 129, 128, 0, 255]
    # float64 -> float8 rounds to float32 first: this value ties in float32, then to even.
    assert codes(cast(torch.tensor([1.0625 + 2.0**-40], dtype=torch.float64),
                      torch.float8_e4m3fn)) == [0x38]  # fmt: skip
    # uint64 from 2**63 converts the unsigned value; int64 -1 wraps to the maximum.
    assert cast(torch.tensor([1 << 63], dtype=torch.uint64), torch.float64).item() == 2.0**63
    assert cast(torch.tensor([-1]), torch.uint64).tolist() == [(1 << 64) - 1]
