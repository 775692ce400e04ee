"""Decides which conversion loops turn one chunk of a dtype into another (``c10::convert``).

``converters(src, dst, chunk, convert, vector_nan)`` gives the two steps of a cast over a
contiguous chunk (``copy.py`` gathers and scatters around them; the rules are in
``_convert``'s docstring):

- *read*: source lanes -> a **canonical** chunk ``(values, step)``: int64 for bool and the
  integers up to uint32, uint64 and int64 as they are, float32 for float16, bfloat16,
  complex32 (``step`` 2) and the float8 types, the array itself for float32, float64 and
  complex (``step`` 2: interleaved real/imaginary);
- *write*: canonical -> destination lanes. Unsigned destinations wider than a byte are
  written through the signed type of their width (the same bytes), a uint64 canonical
  chunk is read as int64 where only its low bits matter (bool, integers), and complex32 and
  the float8 types (and float16/bfloat16 from uint64) are written from a float32 chunk first,
  as their c10 constructors take a float. complex32 -> float16 moves the real part's bits
  (bcomplex32 -> bfloat16 likewise: the "complex32" kind is either, by its ``fmt``), and
  bfloat16 -> bcomplex32 keeps the bits in the real part.

Few numba specialisations: every loop here is one of ``_convert``'s, and a new dtype adds
a loop signature only where its lanes need one (uint16/uint32 reads, uint64 to float, the
float8 table lookup and encoder). Importing this module imports numpy and torch only.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np
import torch

from torch_mydev.kernels.dtypes import BFLOAT16, DtypeLayout
from torch_mydev.kernels.float8 import DECODE

__all__ = ["Canonical", "Reader", "Writer", "converters"]

Canonical = tuple[np.ndarray, int]  # values, step (2: interleaved complex parts)
Reader = Callable[[np.ndarray, int], Canonical]
Writer = Callable[[np.ndarray, Canonical, int], None]

_SIGNED = {
    np.dtype(np.uint16): np.int16,
    np.dtype(np.uint32): np.int32,
    np.dtype(np.uint64): np.int64,
}


def _signed(values: np.ndarray) -> np.ndarray:
    """``values`` as the signed integers of their width (uint8 stays: it has its own loops)."""
    signed = _SIGNED.get(values.dtype)
    return values if signed is None else values.view(signed)


def converters(
    src: DtypeLayout, dst: DtypeLayout, chunk: int, convert: ModuleType, vector_nan: bool
) -> tuple[Reader, Writer]:
    """The read and write steps of a ``src`` -> ``dst`` cast over chunks of ``chunk``
    elements, with their private buffers; ``vector_nan`` asks for torch's vector-loop
    bfloat16 NaN (see ``_convert``)."""
    if src.kind == "complex32" and dst.kind == "reduced" and dst.fmt == src.fmt:
        return _raw_lanes, _real_half
    if src.fmt == dst.fmt == BFLOAT16 and src.kind == "reduced" and dst.kind == "complex32":
        return _raw_lane, _into_real_part
    return _reader(src, chunk, convert), _writer(dst, src, chunk, convert, vector_nan)


def _raw_lanes(lanes: np.ndarray, n: int) -> Canonical:
    return lanes, 2


def _raw_lane(lanes: np.ndarray, n: int) -> Canonical:
    return lanes, 1


def _into_real_part(target: np.ndarray, canonical: Canonical, n: int) -> None:
    """bfloat16 -> bcomplex32: ``c10::complex<BFloat16>(x)`` keeps the real part's bits."""
    np.copyto(target[: 2 * n : 2], canonical[0][:n])
    target[1 : 2 * n : 2] = 0


def _real_half(target: np.ndarray, canonical: Canonical, n: int) -> None:
    """complex32 -> float16 (bcomplex32 -> bfloat16): ``static_cast<Half>`` of the real
    Half keeps its bits."""
    np.copyto(target[:n], canonical[0][: 2 * n : 2])


def _reader(layout: DtypeLayout, chunk: int, convert: ModuleType) -> Reader:
    """Source lanes -> ``(canonical values, step)``."""
    kind = layout.kind
    if kind in ("bool", "int") and layout.lane not in (np.int64, np.uint64):
        out = np.empty(chunk, np.int64)
        is_bool = kind == "bool"

        def read_integral(lanes: np.ndarray, n: int) -> Canonical:
            convert.read_integral(out, lanes, is_bool, n)
            return out[:n], 1

        return read_integral
    if kind in ("reduced", "complex32"):
        parts = layout.lanes
        bits = np.empty(chunk * parts, np.uint32)
        is_bfloat16 = layout.fmt == BFLOAT16

        def read_reduced(lanes: np.ndarray, n: int) -> Canonical:
            convert.read_reduced(bits, lanes, is_bfloat16, n * parts)
            return bits[: n * parts].view(np.float32), parts

        return read_reduced
    if kind == "float8":
        bits = np.empty(chunk, np.uint32)
        table = DECODE[layout.fmt]

        def read_float8(lanes: np.ndarray, n: int) -> Canonical:
            convert.read_float8(bits, lanes, table, n)
            return bits[:n].view(np.float32), 1

        return read_float8
    step = layout.lanes

    def read_as_is(lanes: np.ndarray, n: int) -> Canonical:
        return lanes, step

    return read_as_is


def _writer(
    dst: DtypeLayout, src: DtypeLayout, chunk: int, convert: ModuleType, vector_nan: bool
) -> Writer:
    """``(destination lanes, canonical, n)`` -> None, for the destination dtype."""
    if dst.kind == "bool":

        def write_bool(target: np.ndarray, canonical: Canonical, n: int) -> None:
            convert.write_bool(target, _signed(canonical[0]), canonical[1], n)

        return write_bool
    if dst.kind == "int":
        return _integral_writer(dst, src, convert)
    if dst.kind in ("float", "complex"):
        dst_step = dst.lanes

        def write_floating(target: np.ndarray, canonical: Canonical, n: int) -> None:
            convert.write_floating(target, dst_step, canonical[0], canonical[1], n)

        return write_floating
    return _through_float32(dst, chunk, convert, vector_nan)


def _integral_writer(dst: DtypeLayout, src: DtypeLayout, convert: ModuleType) -> Writer:
    """To an integer type: the low bytes of an integer, or a truncated floating value."""
    if src.kind in ("bool", "int"):

        def write_from_int(target: np.ndarray, canonical: Canonical, n: int) -> None:
            convert.write_integral_from_int(_signed(target), _signed(canonical[0]), n)

        return write_from_int
    # c10::convert: uint8 through int64 (c10's specialisation); the rest as x86 converts
    # to a register of at least 32 bits (uint32 needs the 64-bit one), uint64 to unsigned.
    route = {
        np.dtype(np.uint8): convert.VIA_INT64,
        np.dtype(np.int64): convert.VIA_INT64,
        np.dtype(np.uint32): convert.VIA_INT64,
        np.dtype(np.uint64): convert.VIA_UINT64,
    }.get(dst.lane, convert.VIA_INT32)

    def write_from_float(target: np.ndarray, canonical: Canonical, n: int) -> None:
        convert.write_integral_from_float(_signed(target), canonical[0], canonical[1], route, n)

    return write_from_float


def _through_float32(dst: DtypeLayout, chunk: int, convert: ModuleType, vector_nan: bool) -> Writer:
    """float16/bfloat16, complex32 and float8: a float32 (or complex64) chunk first, where
    the canonical values are not float32 already, then c10's rounding from float."""
    parts = dst.lanes
    floats = np.empty(chunk * parts, np.float32)

    def as_float32(canonical: Canonical, n: int) -> np.ndarray:
        values, step = canonical
        if values.dtype == np.float32 and step == parts:
            return values[: n * parts]
        convert.write_floating(floats, parts, values, step, n)
        return floats[: n * parts]

    if dst.kind == "float8":
        fmt = dst.fmt

        def write_float8(target: np.ndarray, canonical: Canonical, n: int) -> None:
            convert.write_float8(target, as_float32(canonical, n), fmt, n)

        return write_float8
    is_bfloat16 = dst.dtype == torch.bfloat16
    nan_bits = convert.BFLOAT16_VECTOR_NAN if vector_nan else convert.BFLOAT16_NAN

    if dst.kind == "complex32":
        parts_bfloat16 = dst.fmt == BFLOAT16  # bcomplex32
        scalar_nan = convert.BFLOAT16_NAN

        def write_complex32(target: np.ndarray, canonical: Canonical, n: int) -> None:
            values = as_float32(canonical, n)
            convert.write_reduced(target, values, 1, parts_bfloat16, scalar_nan, 2 * n)

        return write_complex32

    def write_reduced(target: np.ndarray, canonical: Canonical, n: int) -> None:
        values, step = canonical
        if values.dtype == np.uint64:  # Half(float(x)): uint64 rounds to float32 first
            values, step = as_float32(canonical, n), 1
        convert.write_reduced(target, values, step, is_bfloat16, nan_bits, n)

    return write_reduced
