"""Decides the float32 value of every float8 bit pattern: c10's decoders, as 256-entry tables.

A float8 source is read through ``DECODE[fmt]``, the float32 bit pattern of each of the 256
codes, exactly what ``c10::Float8_*::operator float()`` returns (torch widens every float8
value through float32 before converting it further: ``c10::convert`` has no other route).
The tables are computed here with numpy from c10's own bit arithmetic
(``torch/headeronly/util/Float8_*.h``, ``Float8_fnuz_cvt.h``):

- ``float8_e4m3fn``: ``fp8e4m3fn_to_fp32_value`` (no infinities; ``0x7F``/``0xFF`` are the
  NaNs and widen to ``0x7FF00000``/``0xFFF00000``);
- ``float8_e5m2``: the pattern shifted into a float16 and widened as x86's F16C does
  (``fp16_ieee_to_fp32_value``): infinities stay, NaNs get the quiet bit;
- ``float8_e4m3fnuz``, ``float8_e5m2fnuz``: ``fp8_fnuz_to_fp32_value`` (``0x80`` is the
  only NaN, widened to the signalling ``0x7F800001``; there is no negative zero);
- ``float8_e8m0fnu``: a power of two ``2**(x - 127)``; ``0x00`` is ``2**-127`` (the
  float32 subnormal ``0x00400000``), ``0xFF`` the NaN ``0x7F800001``.

Writing a float8 value (``c10::Float8_*(float)``) is a numba loop in ``_convert``. Importing
this module imports numpy only.
"""

from __future__ import annotations

import numpy as np

from torch_mydev.kernels.dtypes import E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E8M0FNU

__all__ = ["DECODE"]

_CODES = np.arange(256, dtype=np.uint32)


def _clz32(x: np.ndarray) -> np.ndarray:
    """Leading zeros of 32-bit values (32 for 0), as ``__builtin_clz``."""
    return np.array([32 - int(v).bit_length() for v in x], dtype=np.uint32)


def _e4m3fn() -> np.ndarray:
    """``fp8e4m3fn_to_fp32_value``: renormalise subnormals, NaN to an all-ones exponent."""
    w = _CODES << 24
    sign = w & 0x80000000
    nonsign = w & 0x7FFFFFFF
    renorm = _clz32(nonsign)
    renorm = np.where(renorm > 4, renorm - 4, 0).astype(np.uint32)
    inf_nan = (((nonsign + 0x01000000).astype(np.int32) >> 8) & 0x7F800000).astype(np.uint32)
    zero = ((nonsign.astype(np.int64) - 1).astype(np.int32) >> 31).astype(np.uint32)
    magnitude = ((nonsign << renorm) >> 4) + ((0x78 - renorm) << 23)
    return sign | ((magnitude | inf_nan) & ~zero)


def _e5m2() -> np.ndarray:
    """The pattern as the high byte of a float16, widened by ``fp16_ieee_to_fp32_value``
    (x86: F16C ``vcvtph2ps``; the float multiply quiets a NaN as the instruction does)."""
    w = _CODES << 24
    sign = w & 0x80000000
    two_w = (w + w) & 0xFFFFFFFF
    with np.errstate(invalid="ignore", over="ignore"):
        normal = ((two_w >> 4) + 0x70000000).view(np.float32) * np.float32(2.0**-112)
        subnormal = ((two_w >> 17) | 0x3F000000).view(np.float32) - np.float32(0.5)
    magnitude = np.where(two_w < (1 << 27), subnormal.view(np.uint32), normal.view(np.uint32))
    return sign | magnitude


def _fnuz(we: int, wm: int) -> np.ndarray:
    """``fp8_fnuz_to_fp32_value<we, wm>``: bias one more than IEEE's, 0x80 the only NaN."""
    out = np.zeros(256, dtype=np.uint32)
    for x in range(256):
        if x == 0:
            continue
        if x == 0x80:
            out[x] = 0x7F800001
            continue
        mantissa = x & ((1 << wm) - 1)
        exponent = (x & 0x7F) >> wm
        if exponent == 0:
            renorm = 32 - mantissa.bit_length()
            shift = 1 + renorm - (32 - wm)
            mantissa = (mantissa << shift) & ((1 << wm) - 1)
            exponent += 1 - shift
        exponent += (1 << 7) - (1 << (we - 1)) - 1
        out[x] = ((x >> 7) << 31) | ((exponent & 0xFF) << 23) | (mantissa << (23 - wm))
    return out


def _e8m0fnu() -> np.ndarray:
    """``Float8_e8m0fnu::operator float``: the code is the float32 exponent field."""
    out = _CODES << 23
    out[0] = 0x00400000
    out[0xFF] = 0x7F800001
    return out


# fmt (dtypes.E4M3FN ...) -> the float32 bits of each of the 256 codes.
DECODE: dict[int, np.ndarray] = {
    E4M3FN: _e4m3fn(),
    E4M3FNUZ: _fnuz(4, 3),
    E5M2: _e5m2(),
    E5M2FNUZ: _fnuz(5, 2),
    E8M0FNU: _e8m0fnu(),
}
for _table in DECODE.values():
    _table.setflags(write=False)
