"""Quantized tensors are not supported on mydev: every way to make one raises one clear error.

CUDA has a few quantized kernels (``QuantizedCUDA``: ``quantize_per_tensor``,
``_empty_affine_quantized``, ``dequantize``, ``int_repr``, …); a quantized tensor is a C++
``QTensorImpl`` that holds its quantizer, which Python kernels cannot make. Without this
module a mydev ``torch.quantize_per_tensor`` ran on CPU through the fallback and failed
copying its quantized result back ("Copying from quantized Tensor to non-quantized Tensor
is not allowed"), and a quantized dtype or a quantized CPU tensor meeting mydev failed with
"Could not run ... from the 'Quantizedmydev' backend".

Two places refuse, with one message: the fallback, when a CPU kernel returns a quantized
tensor for mydev (``fallback.copy.to_mydev``), and a boxed fallback for the
``QuantizedPrivateUse1`` dispatch key (quantized dtypes on mydev, quantized CPU tensors
passed with mydev ones).
"""

from __future__ import annotations

from typing import Any, NoReturn

import torch

from torch_mydev._names import DEVICE

ADVICE = (
    "quantize on CPU instead (torch.quantize_per_tensor(x.cpu(), scale, zero_point, dtype)) "
    "and call .dequantize() before moving a result to mydev"
)

_library: torch.library.Library | None = None


def not_supported(what: str) -> NotImplementedError:
    """The error every refusal raises: what was refused, and what to do instead."""
    return NotImplementedError(f"{DEVICE} does not support quantized tensors ({what}); {ADVICE}")


def refuse(op: torch._ops.OpOverload, *args: Any, **kwargs: Any) -> NoReturn:
    """The boxed fallback of ``QuantizedPrivateUse1``: any op that reaches it raises."""
    raise not_supported(f"{op._schema.name}.{op._overloadname}".removesuffix(".default"))


def register() -> None:
    """Register ``refuse`` as the ``QuantizedPrivateUse1`` fallback (once)."""
    global _library
    if _library is not None:
        return
    _library = torch.library.Library("_", "IMPL")
    _library.fallback(refuse, "QuantizedPrivateUse1")
