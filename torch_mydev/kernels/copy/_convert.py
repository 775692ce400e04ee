"""Decides how one element value becomes another dtype, bit for bit as torch CPU (numba loops).

A cast runs in two steps over a contiguous chunk, so that numba compiles a few dozen small
loops instead of one loop per (source dtype, destination dtype) pair:

1. *read*: the source chunk becomes a **canonical** chunk that holds every source value
   exactly -- int64 for bool and the integer types up to uint32, float32 for float16,
   bfloat16, complex32 (interleaved) and the float8 types (the values ``c10::Half``,
   ``c10::BFloat16`` and ``c10::Float8_*`` widen to; float8 through the 256-entry tables of
   ``float8.DECODE``), and the source array itself for int64, uint64, float32, float64 and
   complex (a complex chunk is read as interleaved real/imag floats, ``step`` 2). float32
   sources are never widened to float64: widening quiets a signalling NaN, and torch keeps
   it when it only copies the real part of a complex64 or widens a bfloat16.
2. *write*: the canonical chunk is converted into the destination storage type. Every rule is
   ``c10::convert`` / ``c10::static_cast_with_inter_type``:

   - to bool: ``v != 0``; complex: ``re != 0 or im != 0`` (NaN is true);
   - to integers from integers: two's-complement wrap (the low bytes; an unsigned
     destination is written through the signed type of its width, same bytes);
   - to integers from floating values: truncation toward zero, through int64 for uint8,
     uint32 and int64 (c10's uint8 specialisation; x86's 64-bit ``cvttss2si`` for uint32)
     and through int32 for int8, int16, int32 and uint16 (x86 ``cvttss2si``); uint64 as
     x86-64 converts to unsigned (``VIA_UINT64``: values from 2**63 go through
     ``x - 2**63``). Out of range is undefined in C++; here it is deterministic and equal to
     what torch's scalar loop does on x86: a value (NaN, +-inf included) that does not fit
     the intermediate becomes its minimum (INT64_MIN or INT32_MIN), which is then wrapped
     (torch's vectorised loops can give other values there, e.g. for uint32);
   - to float32/float64: the C++ conversion (int64 and uint64 to float32 round once,
     directly);
   - to float16/bfloat16, complex32 and the float8 types: through float32 first, as
     ``c10::Half(float)``, ``c10::BFloat16(float)`` and ``c10::Float8_*(float)`` take a
     float (complex32 is ``c10::complex<Half>`` made from a ``complex<float>``) -- so
     float64 and 64-bit integer sources round twice, which is what torch does. The one
     exception: complex32 -> float16 keeps the real part's bits (``static_cast<Half>`` of a
     Half), which ``copy.py`` moves without a conversion;
   - complex to real keeps the real part; real to complex sets the imaginary part to 0.

Half and bfloat16 are uint16 bit patterns (numba has no CPU float16):

- float32 -> bfloat16 is ``c10::detail::round_to_nearest_even``: add ``0x7FFF`` plus the
  lowest kept bit, keep the high half; every NaN becomes ``0x7FC0``.
- float32 -> float16 rounds to nearest even, with subnormals and overflow to infinity, and a
  NaN keeps its sign and top ten payload bits with the quiet bit set (x86 F16C
  ``vcvtps2ph``, which ``c10::Half`` uses).
- float16 -> float32 is exact; a NaN keeps its payload and gets the quiet bit (F16C
  ``vcvtph2ps``). bfloat16 -> float32 is the 16-bit shift, no quieting.

float32 -> float8 is ``c10::detail::fp8*_from_fp32_value`` bit for bit
(``float32_to_float8_bits``): round to nearest even with subnormals; e4m3fn and e5m2 keep
the sign of a NaN, e4m3fn (which has no infinity) saturates every overflow, infinity
included, to +-448 (``0x7E``), e5m2 rounds overflow to infinity; the fnuz types turn NaN,
infinity and overflow into ``0x80`` (their NaN) and never write a negative zero; e8m0fnu
keeps only the exponent (sign dropped), rounding up from half way, with NaN and infinity
``0xFF``.

These are torch's scalar conversions. torch's vectorised x86 loops (AVX2 and AVX512 builds;
not ``ATEN_CPU_CAPABILITY=default``) write other NaN bits in three places, measured on torch
2.13:

- float32 -> bfloat16 where ``reduced_float_copy_kernel`` runs vectorised (destination
  stride 2 and source stride 4 along dim 0): every NaN is ``0xFFFF``. The rule depends only
  on the plan, so ``copy.py`` follows it (``nan_bits``); a broadcast source (stride 0), a
  0-dim copy and every other layout get ``0x7FC0``.
- float64 -> bfloat16 with both operands contiguous along dim 0: ``0xFFFF`` in whole blocks
  of 16 from the start of each inner loop, ``0x7FC0`` in the rest;
- float16 -> float32, contiguous: ``0x7FFFFFFF`` in the masked tail of each inner loop.

The last two depend on vector widths and on how torch splits the loop among its threads;
these kernels give the scalar bits there. The value is NaN either way.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from torch_mydev.kernels.jit._seal import seal

INT64_MIN = -(1 << 63)
INT32_MIN = -(1 << 31)

# Routes from a floating value to an integer destination (``c10::convert``).
VIA_INT64 = 0  # uint8 (c10's explicit int64 step) and int64
VIA_INT32 = 1  # int8, int16, int32, uint16: the 32-bit truncating conversion
VIA_UINT64 = 2  # uint64: x86-64's conversion to unsigned

# NaN bits of a bfloat16: c10's scalar conversion, and torch's vectorised float32 loop.
BFLOAT16_NAN = 0x7FC0
BFLOAT16_VECTOR_NAN = 0xFFFF


@njit(cache=True, nogil=True, inline="always")
def float_to_int64(x: float) -> int:
    """Truncate toward zero; NaN and values outside int64 give INT64_MIN (x86 ``cvttsd2si``)."""
    if x >= -9.223372036854775808e18 and x < 9.223372036854775808e18:
        return np.int64(x)
    return np.int64(INT64_MIN)


@njit(cache=True, nogil=True, inline="always")
def float_to_int32(x: float) -> int:
    """Truncate toward zero; NaN and values outside int32 give INT32_MIN (x86 ``cvttss2si``)."""
    if x > -2147483649.0 and x < 2147483648.0:
        return np.int64(x)
    return np.int64(INT32_MIN)


@njit(cache=True, nogil=True, inline="always")
def float_to_uint64(x: float) -> int:
    """``static_cast<uint64_t>`` on x86-64: from 2**63 convert ``x - 2**63`` and set the top
    bit, below it convert as int64 (NaN, -inf and values under -2**63 give 2**63, as torch)."""
    if x >= 9.223372036854775808e18:
        return float_to_int64(x - 9.223372036854775808e18) ^ np.int64(INT64_MIN)
    return float_to_int64(x)


@njit(cache=True, nogil=True, inline="always")
def float32_to_bfloat16_bits(x: float, nan_bits: int) -> int:
    """``c10::detail::round_to_nearest_even``: float32 to bfloat16 bits; NaN is ``nan_bits``
    (c10's 0x7FC0, or 0xFFFF where torch's vector loop runs)."""
    if x != x:
        return np.uint16(nan_bits)
    u = np.int64(np.float32(x).view(np.uint32))
    return np.uint16((u + 0x7FFF + ((u >> 16) & 1)) >> 16)


@njit(cache=True, nogil=True, inline="always")
def float32_to_half_bits(x: float) -> int:
    """``c10::Half(float)``: round to nearest even, subnormals, overflow to inf, F16C NaNs.

    The arithmetic of ``c10::detail::fp16_ieee_from_fp32_value``: scaling |x| up by 2**112
    and down by 2**-110 lets the float unit round the mantissa (and saturate to infinity);
    adding a power of two aligned with the result's exponent shifts the half's mantissa into
    the low float bits. Branch-free, so the loop vectorises. NaNs take F16C's rule instead of
    the canonical 0x7E00: sign, quiet bit and the top ten payload bits.
    """
    w = np.int64(np.float32(x).view(np.uint32))
    shl1 = (w + w) & 0xFFFFFFFF
    sign = (w >> 16) & 0x8000
    bias = shl1 & 0xFF000000
    if bias < 0x71000000:
        bias = 0x71000000
    base = np.abs(np.float32(x)) * np.float32(2.0**112) * np.float32(2.0**-110)
    base = np.uint32((bias >> 1) + 0x07800000).view(np.float32) + base
    bits = np.int64(np.float32(base).view(np.uint32))
    nonsign = ((bits >> 13) & 0x7C00) + (bits & 0x0FFF)
    if shl1 > 0xFF000000:  # NaN
        nonsign = 0x7E00 | ((w >> 13) & 0x3FF)
    return np.uint16(sign | nonsign)


@njit(cache=True, nogil=True, inline="always")
def half_bits_to_float32_bits(h: int) -> int:
    """``c10::Half`` to float, exact (``c10::detail::fp16_ieee_to_fp32_value``).

    Normal halves (and inf/NaN) move their exponent and mantissa into place and rescale by
    2**-112; a NaN comes out of that multiply quiet with its payload, as F16C ``vcvtph2ps``
    gives. Subnormal halves are ``mantissa * 2**-24`` built as ``magic - 0.5``. Branch-free.
    """
    w = np.int64(h) << 16
    sign = w & 0x80000000
    two_w = (w + w) & 0xFFFFFFFF
    normal = np.uint32((two_w >> 4) + 0x70000000).view(np.float32) * np.float32(2.0**-112)
    subnormal = np.uint32((two_w >> 17) | 0x3F000000).view(np.float32) - np.float32(0.5)
    if two_w < (1 << 27):
        magnitude = np.int64(np.float32(subnormal).view(np.uint32))
    else:
        magnitude = np.int64(np.float32(normal).view(np.uint32))
    return np.uint32(sign | magnitude)


@njit(cache=True, nogil=True, inline="always")
def _f32_bits(x: float) -> int:
    return np.int64(np.float32(x).view(np.uint32))


@njit(cache=True, nogil=True, inline="always")
def _float8_ieee(bits: int, mbits: int, bias: int, low: int) -> int:
    """c10's rounding of a finite ``|x|`` (float32 bits) below the format's overflow: under
    ``low`` (the smallest normal) by one float32 add of a magic number, whose low byte is
    the subnormal code; above it by integer round-to-nearest-even on the mantissa."""
    shift = 23 - mbits
    if bits < low:
        magic = (127 - bias + shift + 1) << 23
        total = _f32_bits(np.uint32(bits).view(np.float32) + np.uint32(magic).view(np.float32))
        code = (total - magic) & 0xFF
    else:
        odd = (bits >> shift) & 1
        code = ((bits + ((bias - 127) << 23) + (1 << (shift - 1)) - 1 + odd) >> shift) & 0xFF
    return code


@njit(cache=True, nogil=True, inline="always")
def float32_to_float8_bits(x: float, fmt: int) -> int:
    """``c10::Float8_*(float)`` (``fp8*_from_fp32_value``) for the format ``fmt``."""
    bits = _f32_bits(x)
    sign = (bits >> 24) & 0x80
    bits &= 0x7FFFFFFF
    if fmt == 8:  # e8m0fnu: the exponent, rounded up from half way (sign ignored)
        exponent = bits >> 23
        if exponent == 0xFF:
            return np.uint8(0xFF)
        if (bits & 0x400000) and ((bits & 0x3FFFFF) or exponent > 0):
            exponent += 1
        return np.uint8(exponent & 0xFF)
    if fmt == 4:  # e4m3fn: overflow and infinity saturate to 448, NaN stays NaN
        if bits >= 0x43F00000:
            code = 0x7F if bits > 0x7F800000 else 0x7E
        else:
            code = _float8_ieee(bits, 3, 7, 121 << 23)
            if code == 0x7F:
                code = 0x7E
        return np.uint8(code | sign)
    if fmt == 6:  # e5m2: overflow to infinity, NaN stays NaN
        if bits >= 143 << 23:
            code = 0x7F if bits > 0x7F800000 else 0x7C
        else:
            code = _float8_ieee(bits, 2, 15, 113 << 23)
        return np.uint8(code | sign)
    # fnuz (5: e4m3fnuz, 7: e5m2fnuz): one more bias, 0x80 for NaN/inf/overflow, no -0
    mbits = 3 if fmt == 5 else 2
    bias = 8 if fmt == 5 else 16
    top = (0x87 if fmt == 5 else 0x8F) << 23
    if bits >= top:
        return np.uint8(0x80)
    low = (0x78 if fmt == 5 else 0x70) << 23
    code = _float8_ieee(bits, mbits, bias, low)
    if bits < low and code == 0:
        return np.uint8(0)
    return np.uint8(code | sign)


# ---- read: source storage -> canonical ------------------------------------------------------


@njit(cache=True, nogil=True)
def read_integral(out: np.ndarray, src: np.ndarray, is_bool: bool, n: int) -> None:
    """bool/uint8/int8/int16/int32 to int64 (``static_cast<int64_t>``; bool bytes as 0/1)."""
    if is_bool:
        for i in range(n):
            out[i] = 1 if src[i] != 0 else 0
    else:
        for i in range(n):
            out[i] = src[i]


@njit(cache=True, nogil=True)
def read_reduced(out_bits: np.ndarray, src: np.ndarray, is_bfloat16: bool, n: int) -> None:
    """float16/bfloat16 bit patterns to float32 bit patterns (exact widening)."""
    if is_bfloat16:
        for i in range(n):
            out_bits[i] = np.uint32(src[i]) << 16
    else:
        for i in range(n):
            out_bits[i] = half_bits_to_float32_bits(src[i])


@njit(cache=True, nogil=True)
def read_float8(out_bits: np.ndarray, src: np.ndarray, table: np.ndarray, n: int) -> None:
    """float8 codes to float32 bit patterns through ``table`` (``float8.DECODE``, exact)."""
    for i in range(n):
        out_bits[i] = table[src[i]]


# ---- write: canonical -> destination storage ------------------------------------------------
# Each write has a loop for step 1 (real canonical) and one for step 2 (interleaved complex,
# real part at 2*i): a constant step lets LLVM vectorise, a runtime one does not.


@njit(cache=True, nogil=True)
def write_bool(dst: np.ndarray, canon: np.ndarray, step: int, n: int) -> None:
    """To bool: ``v != 0``; with ``step`` 2 (complex) either part nonzero."""
    if step == 2:
        for i in range(n):
            dst[i] = 1 if (canon[2 * i] != 0 or canon[2 * i + 1] != 0) else 0
    else:
        for i in range(n):
            dst[i] = 1 if canon[i] != 0 else 0


@njit(cache=True, nogil=True)
def write_integral_from_int(dst: np.ndarray, canon: np.ndarray, n: int) -> None:
    """int64 to an integer type: keep the low bytes (two's-complement wrap)."""
    for i in range(n):
        dst[i] = canon[i]


@njit(cache=True, nogil=True)
def write_integral_from_float(
    dst: np.ndarray, canon: np.ndarray, step: int, route: int, n: int
) -> None:
    """Floating (real part) to an integer type: truncate via int64, int32 or x86-64's
    unsigned conversion (``route``), then wrap."""
    if route == VIA_UINT64:
        if step == 1:
            for i in range(n):
                dst[i] = float_to_uint64(canon[i])
        else:
            for i in range(n):
                dst[i] = float_to_uint64(canon[2 * i])
    elif route == VIA_INT64:
        if step == 1:
            for i in range(n):
                dst[i] = float_to_int64(canon[i])
        else:
            for i in range(n):
                dst[i] = float_to_int64(canon[2 * i])
    elif step == 1:
        for i in range(n):
            dst[i] = float_to_int32(canon[i])
    else:
        for i in range(n):
            dst[i] = float_to_int32(canon[2 * i])


@njit(cache=True, nogil=True)
def write_floating(dst: np.ndarray, dst_step: int, canon: np.ndarray, step: int, n: int) -> None:
    """To float32/float64 (``dst_step`` 1) or complex64/complex128 (``dst_step`` 2).

    One C++ conversion per part: the real part (or the value) converts; the imaginary part is
    the source's when both are complex, else 0. int64 to float32 rounds once (``sitofp``).
    """
    if dst_step == 1:
        if step == 1:
            for i in range(n):
                dst[i] = canon[i]
        else:
            for i in range(n):
                dst[i] = canon[2 * i]
    elif step == 2:
        for i in range(n):
            dst[2 * i] = canon[2 * i]
            dst[2 * i + 1] = canon[2 * i + 1]
    else:
        for i in range(n):
            dst[2 * i] = canon[i]
            dst[2 * i + 1] = 0


@njit(cache=True, nogil=True)
def write_reduced(
    dst: np.ndarray, canon: np.ndarray, step: int, is_bfloat16: bool, nan_bits: int, n: int
) -> None:
    """To float16/bfloat16 bits, through float32 (``c10::Half(float)``/``BFloat16(float)``);
    a NaN becomes ``nan_bits`` in bfloat16."""
    if is_bfloat16:
        if step == 1:
            for i in range(n):
                dst[i] = float32_to_bfloat16_bits(np.float32(canon[i]), nan_bits)
        else:
            for i in range(n):
                dst[i] = float32_to_bfloat16_bits(np.float32(canon[2 * i]), nan_bits)
    elif step == 1:
        for i in range(n):
            dst[i] = float32_to_half_bits(np.float32(canon[i]))
    else:
        for i in range(n):
            dst[i] = float32_to_half_bits(np.float32(canon[2 * i]))


@njit(cache=True, nogil=True)
def write_float8(dst: np.ndarray, values: np.ndarray, fmt: int, n: int) -> None:
    """float32 values to float8 codes of the format ``fmt`` (``c10::Float8_*(float)``)."""
    for i in range(n):
        dst[i] = float32_to_float8_bits(values[i], fmt)


seal(__name__)  # keep last: keys the caches and widens the literals of the loops above
