"""``torch.histc`` on mydev: CUDA's integer histogram, CPU's kernel for everything else.

CPU's ``histc`` (``histogram_histc``) refuses integer inputs ("histogram_cpu" not
implemented for 'Int'); CUDA's (``_histc_cuda``, aten/src/ATen/native/cuda/SummaryOps.cu)
dispatches ``AT_DISPATCH_ALL_TYPES``: uint8, int8, int16, int32 and int64 besides float and
double. Libraries count ids with it on every device but CPU and MPS (Hugging Face MoE
experts: ``torch.histc(ids.int(), bins=num_experts, min=0, max=num_experts - 1)``).

An integer input runs ``cuda_histc``, the rule of ``_histc_cuda_template`` and ``getBin``
written with CPU torch ops over a CPU alias of the mydev input; its result is a new mydev
tensor. This is mydev's own kernel: it is not counted in ``fallback_stats``. Every other
dtype runs CPU's kernel through the fallback as any op without a kernel does (counted as
``aten::histc`` / ``aten::histc.out``): floating inputs keep CPU's values and errors, and
bool, uint16/32/64 and complex inputs raise CPU's ``NotImplementedError`` (CUDA raises one
too: ``"histc" not implemented for 'Bool'``). Where CUDA itself departs from CPU for
floating inputs, mydev follows CPU: CUDA refuses float16 ("HalfTensor is not supported")
and bfloat16, CPU counts them.
"""

from __future__ import annotations

import math

import torch

from torch_mydev import _C
from torch_mydev.ops.elementwise.plan import resize_output
from torch_mydev.ops.fallback import boxed as fallback
from torch_mydev.ops.fallback import copy as fc
from torch_mydev.ops.fallback import devices as fd

__all__ = ["INTEGRAL", "KERNELS", "cuda_histc", "histc", "histc_out"]

# The integer dtypes of AT_DISPATCH_ALL_TYPES; at::acc_type<T, /*is_cuda=*/true> of each
# is int64_t, the type of CUDA's bounds and of its bin arithmetic.
INTEGRAL = frozenset({torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64})

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_OVERFLOW = "value cannot be converted to type int64_t without overflow"


def _to_int64(value: bool | int | float | complex) -> int:
    """``Scalar::to<int64_t>()``: c10's ``checked_convert``, which raises ``RuntimeError``
    for NaN, an imaginary part and values outside int64; a float is truncated toward zero.

    One case is refused here that C++ converts: a float of exactly 2**63 passes c10's
    ``overflows`` check (``int64_t`` max rounds up to 2**63 as a double), and its
    ``static_cast`` is undefined behaviour (x86 gives -2**63, Arm 2**63 - 1).
    """
    if isinstance(value, complex):
        if value.imag != 0:
            raise RuntimeError(_OVERFLOW)
        value = value.real
    if isinstance(value, float):
        if math.isnan(value) or not -(2.0**63) <= value < 2.0**63:
            raise RuntimeError(_OVERFLOW)
        return math.trunc(value)
    result = int(value)
    if not _INT64_MIN <= result <= _INT64_MAX:
        raise RuntimeError(_OVERFLOW)
    return result


def _clamp(bound: int) -> int:
    return _INT64_MIN if bound < _INT64_MIN else _INT64_MAX if bound > _INT64_MAX else bound


def _bins_exact(values: torch.Tensor, low: int, high: int, bins: int) -> torch.Tensor:
    """``floor((v - low) * bins / (high - low))`` per value in Python integers: the range
    where CUDA's int64 arithmetic overflows (see ``cuda_histc``)."""
    span = high - low
    found = [(v - low) * bins // span for v in values.tolist()]
    return torch.tensor(found, dtype=torch.int64)


def cuda_histc(self: torch.Tensor, bins: int, min: float, max: float) -> torch.Tensor:
    """CUDA's ``histc`` of an integer CPU tensor (``_histc_cuda``, ``_histc_cuda_template``
    and ``getBin`` of aten/src/ATen/native/cuda/SummaryOps.cu), as a new CPU tensor.

    In CUDA's order: ``min`` and ``max`` become int64 (``Scalar::to<int64_t>``, truncating);
    ``bins <= 0`` raises; when they are equal and ``self`` has elements they become its
    smallest and largest value; still equal, they widen to ``min - 1``, ``max + 1``;
    ``min < max`` must then hold ("max must be larger than min"). Values outside
    ``[min, max]`` are ignored; a value ``v`` counts in bin
    ``(v - min) * bins / (max - min)`` (int64, rounded toward zero), ``bins`` itself
    meaning the last bin. The counts have ``self``'s dtype and wrap in it as CUDA's atomic
    adds do (300 equal int8 values count 44). An empty ``self`` gives zeros, after the same
    checks.

    Where ``(max - min) * bins`` exceeds int64, CUDA's arithmetic overflows (undefined
    behaviour in C++: it computes bins outside the output, on the device): the bins here
    are exact. So is a bin of ``bins >= 2**31``, which CUDA truncates through ``(int)``.
    """
    low, high = _to_int64(min), _to_int64(max)
    if bins <= 0:
        raise RuntimeError("bins must be > 0")
    if low == high and self.numel() > 0:
        smallest, largest = torch.aminmax(self)
        low, high = int(smallest), int(largest)
    if low == high:
        low, high = low - 1, high + 1
    if not low < high:
        raise RuntimeError("max must be larger than min")
    values = self.reshape(-1).to(torch.int64)
    # Bounds widened past int64 (an int64 ``self`` at its ends) compare as int64's ends.
    inside = (values >= _clamp(low)) & (values <= _clamp(high))
    values = values[inside]
    if low >= _INT64_MIN and (high - low) * bins <= _INT64_MAX:
        found = (values - low) * bins // (high - low)  # CUDA's own int64 arithmetic
    else:
        found = _bins_exact(values, low, high, bins)
    found = torch.where(found == bins, bins - 1, found)
    return torch.bincount(found, minlength=bins).to(self.dtype)


def histc(self: torch.Tensor, bins: int = 100, min: float = 0, max: float = 0) -> torch.Tensor:
    """aten::histc: ``cuda_histc`` over a CPU alias of an integer ``self``, CPU's kernel
    (through the fallback) for any other dtype."""
    if self.dtype not in INTEGRAL:
        return fallback.run_on_cpu(torch.ops.aten.histc.default, (self, bins, min, max), {})
    counts = cuda_histc(_C._cpu_alias(self, None, True), bins, min, max)
    return fc.to_mydev(counts, self.device)


def histc_out(
    self: torch.Tensor,
    bins: int = 100,
    min: float = 0,
    max: float = 0,
    *,
    out: torch.Tensor,
) -> torch.Tensor:
    """aten::histc.out: ``_histc_out_cuda`` for an integer ``self`` -- the functional
    result, then ``resize_output`` (a warning when ``out`` had other elements) and
    ``out.copy_`` (so ``out`` may have another dtype) -- and CPU's kernel otherwise.
    ``self`` and ``out`` must be on one device, as CUDA's generated wrapper checks."""
    if self.dtype not in INTEGRAL:
        return fallback.run_on_cpu(torch.ops.aten.histc.out, (self, bins, min, max), {"out": out})
    fd.check_same_device([self], [out])
    source = self if self.device.type == "cpu" else _C._cpu_alias(self, None, True)
    counts = cuda_histc(source, bins, min, max)
    resize_output(out, tuple(counts.shape))
    _C._cpu_alias(out).copy_(counts)  # CPU's cast, for every dtype ``out`` may have
    return out


KERNELS = {"histc": histc, "histc.out": histc_out}
