"""Decides what one element of an elementwise op is, bit for bit as torch CPU (numba helpers).

Values are computed in a *compute type* chosen by the lane (``load``): int64 for bool and the
integers (stores wrap to the lane width, as C++ integer promotion then truncation does),
float32 for float16/bfloat16 and float32, float64, complex64, complex128. Ops with more than one
rounding step round each intermediate to the storage type when ``mid`` names a reduced format,
as ``c10::Half`` / ``c10::BFloat16`` arithmetic does (``rnd``); ``mid = PLAIN`` computes in
float32 and rounds once on store, as torch's ``opmath`` loops for a scalar divisor do.

The per-element rules (``ATen/native/cpu/BinaryOpsKernel.cpp``, ``ufunc/add.h``,
``c10/util/complex.h``, ``c10/util/generic_math.h``) live in the ``@overload``-ed functions
below, chosen by compute type at compile time; the float16 / bfloat16 bit patterns are
shared with the reductions. The loops that walk a plan with them are ``_loops.py``.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from torch_mydev.kernels.dtypes import (  # what a uint8 / uint16 lane holds
    BFLOAT16,
    BOOL,
    HALF,
    PLAIN,
)
from torch_mydev.kernels.jit._seal import JIT, seal

# Binary arithmetic; ``sub`` is ``add`` with ``-alpha``, as ATen's sub_stub is.
ADD = 0
MUL = 1
DIV = 2
DIV_TRUNC = 3
DIV_FLOOR = 4
# The relu family (``b`` unused by CLAMP_MIN; ``alpha`` holds the bound or the threshold).
CLAMP_MIN = 5  # a < alpha ? alpha : a
THRESHOLD = 6  # a <= alpha ? b : a (b: the value)
THRESHOLD_BACKWARD = 7  # a <= alpha ? 0 : b (a: self, b: grad)
# Comparisons.
EQ = 0
NE = 1
LT = 2
LE = 3
GT = 4
GE = 5
# Unary ops.
NEG = 0
ABS = 1


# ---- float16 / bfloat16 bit patterns ---------------------------------------------------------


# These are not ``_convert``'s branch-free conversions on purpose: inlined into the generic
# loops below, those made the float32 ``add`` loop several times slower per call (measured:
# 0.6 us -> 4.6 us for 1K elements), though that loop never converts.


@njit(**JIT)
def half_to_float(bits):
    """float16 bits to float32, exact; a NaN keeps its payload and gets the quiet bit."""
    h = np.int64(bits)
    sign = (h & 0x8000) << 16
    exponent = (h >> 10) & 0x1F
    mantissa = h & 0x3FF
    if exponent == 0x1F:
        u = sign | 0x7F800000 | (mantissa << 13)
        if mantissa != 0:
            u |= 0x400000
        return np.uint32(u).view(np.float32)
    if exponent == 0:  # zero or subnormal: mantissa * 2**-24
        magnitude = np.float32(mantissa) * np.float32(2.0**-24)
        return -magnitude if sign else magnitude
    return np.uint32(sign | ((exponent + 112) << 23) | (mantissa << 13)).view(np.float32)


@njit(**JIT)
def float_to_half(x):
    """float32 to float16 bits: round to nearest even, subnormals, overflow to inf (c10::Half).

    A NaN keeps its sign and top ten payload bits and gets the quiet bit (x86 F16C).
    """
    u = np.int64(np.float32(x).view(np.uint32))
    sign = (u >> 16) & 0x8000
    exponent = (u >> 23) & 0xFF
    mantissa = u & 0x7FFFFF
    if exponent == 0xFF:
        if mantissa == 0:
            return np.uint16(sign | 0x7C00)
        return np.uint16(sign | 0x7E00 | (mantissa >> 13))
    e = exponent - 112  # the float16 biased exponent
    if e >= 31:
        return np.uint16(sign | 0x7C00)
    if e >= 1:
        h = (e << 10) | (mantissa >> 13)
        rest = mantissa & 0x1FFF
        if rest > 0x1000 or (rest == 0x1000 and (h & 1) == 1):
            h += 1  # a carry out of the mantissa bumps the exponent, up to inf
        return np.uint16(sign | h)
    if exponent == 0:  # float32 zero or subnormal: far below float16's smallest subnormal
        return np.uint16(sign)
    significand = mantissa | 0x800000
    shift = 14 - e  # bits below float16's subnormal unit 2**-24
    if shift > 24:
        return np.uint16(sign)
    h = significand >> shift
    rest = significand & ((np.int64(1) << shift) - 1)
    halfway = np.int64(1) << (shift - 1)
    if rest > halfway or (rest == halfway and (h & 1) == 1):
        h += 1
    return np.uint16(sign | h)


@njit(**JIT)
def bfloat16_to_float(bits):
    """bfloat16 bits to float32: the 16-bit shift (exact, NaNs unchanged)."""
    return np.uint32(np.int64(bits) << 16).view(np.float32)


@njit(**JIT)
def float_to_bfloat16(x):
    """float32 to bfloat16 bits, round to nearest even; every NaN is 0x7FC0 (c10::BFloat16)."""
    if x != x:
        return np.uint16(0x7FC0)
    u = np.int64(np.float32(x).view(np.uint32))
    return np.uint16((u + 0x7FFF + ((u >> 16) & 1)) >> 16)


# ---- lanes <-> compute values ----------------------------------------------------------------


def load(arr, i, fmt):
    """Element ``i`` of a lane array as its compute value (int64, float32/64 or complex)."""


@overload(load)
def _load(arr, i, fmt):
    if arr.dtype == types.uint16:

        def load_reduced(arr, i, fmt):
            if fmt == BFLOAT16:
                return bfloat16_to_float(arr[i])
            return half_to_float(arr[i])

        return load_reduced
    if arr.dtype == types.uint8:

        def load_byte(arr, i, fmt):
            if fmt == BOOL:  # any nonzero byte is true, as a C++ bool load on x86 reads it
                return np.int64(1) if arr[i] != 0 else np.int64(0)
            return np.int64(arr[i])

        return load_byte
    if isinstance(arr.dtype, types.Integer):
        return lambda arr, i, fmt: np.int64(arr[i])
    return lambda arr, i, fmt: arr[i]


def store(arr, i, value, fmt):
    """Write a compute value into lane ``i``: wrap integers, ``!= 0`` for bool, round floats."""


@overload(store)
def _store(arr, i, value, fmt):
    if arr.dtype == types.uint16:

        def store_reduced(arr, i, value, fmt):
            if fmt == BFLOAT16:
                arr[i] = float_to_bfloat16(value)
            else:
                arr[i] = float_to_half(value)

        return store_reduced
    if arr.dtype == types.uint8:

        def store_byte(arr, i, value, fmt):
            if fmt == BOOL:
                arr[i] = 1 if value != 0 else 0
            else:
                arr[i] = value

        return store_byte

    def store_plain(arr, i, value, fmt):
        arr[i] = value

    return store_plain


def rnd(x, mid):
    """Round a float32 intermediate to float16/bfloat16 (``mid``), as c10's operators do."""


@overload(rnd)
def _rnd(x, mid):
    if x == types.float32:

        def rnd_float32(x, mid):
            if mid == HALF:
                return half_to_float(float_to_half(x))
            if mid == BFLOAT16:
                return bfloat16_to_float(float_to_bfloat16(x))
            return x

        return rnd_float32
    return lambda x, mid: x


@intrinsic
def fma(typingctx, x, y, z):
    """``x * y + z`` rounded once (``llvm.fma``), float32 or float64."""
    if not (isinstance(x, types.Float) and x == y == z):
        return None

    def codegen(context, builder, signature, args):
        ty = args[0].type
        name = "llvm.fma.f32" if ty == ir.FloatType() else "llvm.fma.f64"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ty, [ty] * 3), name)
        return builder.call(fn, args)

    return x(x, y, z), codegen


@intrinsic
def frem(typingctx, x, y):
    """C ``fmod`` (LLVM ``frem``): exact, the sign of ``x``."""
    if not (isinstance(x, types.Float) and x == y):
        return None

    def codegen(context, builder, signature, args):
        return builder.frem(args[0], args[1])

    return x(x, y), codegen


# ---- per-element rules, by compute type ------------------------------------------------------


def add_rule(x, y, alpha, mid):
    """``x + alpha * y`` (ufunc ``add``)."""


@overload(add_rule)
def _add_rule(x, y, alpha, mid):
    if isinstance(x, types.Float):

        def add_float(x, y, alpha, mid):
            if mid == PLAIN:  # torch's loops contract ``self + alpha * other`` into an FMA
                return fma(alpha, y, x)
            # c10::Half / BFloat16 operators: each product and sum rounds to the type.
            return rnd(x + rnd(alpha * y, mid), mid)

        return add_float
    return lambda x, y, alpha, mid: x + alpha * y


def div_rule(x, y):
    """True division: IEEE for floats, c10::complex's scaled (Smith) division for complex."""


@overload(div_rule)
def _div_rule(x, y):
    if isinstance(x, types.Complex):
        part = np.float32 if x == types.complex64 else np.float64
        cast = np.complex64 if x == types.complex64 else np.complex128

        def div_complex(x, y):
            a = x.real
            b = x.imag
            c = y.real
            d = y.imag
            one = part(1.0)
            abs_c = abs(c)
            abs_d = abs(d)
            if abs_c >= abs_d:
                if abs_c == 0 and abs_d == 0:  # complex inf or nan, as IEEE division gives
                    real = a / abs_c
                    imag = b / abs_d
                else:
                    rat = d / c
                    scl = one / (c + d * rat)
                    real = (a + b * rat) * scl
                    imag = (b - a * rat) * scl
            else:
                rat = c / d
                scl = one / (d + c * rat)
                real = (a * rat + b) * scl
                imag = (b * rat - a) * scl
            return cast(complex(real, imag))

        return div_complex
    if isinstance(x, types.Integer):
        return lambda x, y: x  # never used: integer true division computes in float
    return lambda x, y: x / y


def div_trunc_rule(x, y, mid):
    """Division rounded toward zero (``div_trunc_kernel``); integer ``y`` is never 0 here."""


@overload(div_trunc_rule)
def _div_trunc_rule(x, y, mid):
    if isinstance(x, types.Integer):

        def div_trunc_int(x, y, mid):
            if y == -1:  # INT_MIN / -1 wraps instead of trapping
                return -x
            q = x // y
            if q < 0 and q * y != x:
                q += 1
            return q

        return div_trunc_int
    if isinstance(x, types.Float):
        return lambda x, y, mid: np.trunc(rnd(x / y, mid))
    return lambda x, y, mid: x  # never used: complex has no rounding modes


def div_floor_rule(x, y, mid):
    """Division rounded down (``c10::div_floor_integer`` / ``c10::div_floor_floating``)."""


@overload(div_floor_rule)
def _div_floor_rule(x, y, mid):
    if isinstance(x, types.Integer):

        def div_floor_int(x, y, mid):
            if y == -1:
                return -x
            return x // y

        return div_floor_int
    if isinstance(x, types.Float):
        part = np.float32 if x == types.float32 else np.float64

        def div_floor_float(x, y, mid):
            zero = part(0.0)
            one = part(1.0)
            if y == zero:
                return rnd(x / y, mid)
            mod = rnd(frem(x, y), mid)
            div = rnd(rnd(x - mod, mid) / y, mid)
            if mod != zero and (y < zero) != (mod < zero):
                div = rnd(div - one, mid)
            if div != zero:
                floordiv = np.floor(div)
                if rnd(div - floordiv, mid) > part(0.5):
                    floordiv = rnd(floordiv + one, mid)
                return floordiv
            return np.copysign(zero, rnd(x / y, mid))

        return div_floor_float
    return lambda x, y, mid: x


def ordered(x, y, op):
    """``x < y`` and friends; complex values have no order (never asked for)."""


@overload(ordered)
def _ordered(x, y, op):
    if isinstance(x, types.Complex):
        return lambda x, y, op: False

    def ordered_real(x, y, op):
        if op == LT:
            return x < y
        if op == LE:
            return x <= y
        if op == GT:
            return x > y
        return x >= y

    return ordered_real


def clamp_min_rule(x, bound):
    """``clamp_min``: ``std::max(x, bound)`` with a NaN ``x`` kept (``x < bound`` is false for
    it), and ``-0.0`` kept against a zero bound, as torch CPU's loops give."""


@overload(clamp_min_rule)
def _clamp_min_rule(x, bound):
    if isinstance(x, types.Complex):
        return lambda x, bound: x  # never used: clamp refuses complex values
    return lambda x, bound: max(x, bound)


def threshold_rule(x, threshold, value, other):
    """``threshold_kernel``: ``x <= threshold ? value : other`` (a NaN ``x`` gives ``other``)."""


@overload(threshold_rule)
def _threshold_rule(x, threshold, value, other):
    if isinstance(x, types.Complex):
        return lambda x, threshold, value, other: other  # never used: no complex threshold
    return lambda x, threshold, value, other: value if x <= threshold else other


def zero_of(x):
    """Zero in ``x``'s compute type."""


@overload(zero_of)
def _zero_of(x):
    zero = {types.float32: np.float32(0.0), types.float64: np.float64(0.0)}.get(x)
    if zero is not None:
        return lambda x: zero
    if isinstance(x, types.Complex):
        return lambda x: x - x  # never used
    return lambda x: np.int64(0)


def abs_rule(x):
    """``abs``: integers wrap (``abs(INT_MIN) == INT_MIN``), floats clear the sign, complex
    values become ``hypot(re, im) + 0j``."""


@overload(abs_rule)
def _abs_rule(x):
    if isinstance(x, types.Complex):
        cast = np.complex64 if x == types.complex64 else np.complex128
        part = np.float32 if x == types.complex64 else np.float64
        return lambda x: cast(complex(part(np.hypot(x.real, x.imag)), part(0.0)))
    if isinstance(x, types.Integer):
        return lambda x: -x if x < 0 else x
    return lambda x: np.abs(x)


seal(__name__)  # keep last: keys the caches and widens the literals of the loops above
