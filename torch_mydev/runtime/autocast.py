"""Autocast on mydev: ``torch.autocast("mydev")`` casts as ``torch.autocast("cpu")`` does.

torch asks the device module for ``get_amp_supported_dtype`` (``torch/amp/autocast_mode.py``
``autocast.__init__``) and then dispatches every op through the ``AutocastPrivateUse1`` key,
for which torch registers nothing (not even a fallthrough). This module registers:

- a fallthrough fallback for ``AutocastPrivateUse1``: ops not listed run unchanged;
- for the ops of CPU's lists (``aten/src/ATen/autocast_mode.cpp``, ``TORCH_LIBRARY_IMPL(aten,
  AutocastCPU, m)``), a kernel that casts as ATen's ``cached_cast`` does and redispatches
  below autocast: ``lower_precision_fp`` casts floating mydev tensors (not float64) to
  ``torch.get_autocast_dtype("mydev")``, read at call time; ``fp32`` casts them to float32;
  ``promote`` casts them to the widest of the autocast dtype and their own float dtypes.

``torch.library.register_autocast`` cannot serve: it fixes one cast dtype at registration.
ATen's weight cache (one cast per leaf parameter per autocast region) is not kept: results are
the same, every call casts again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_map

from torch_mydev._names import DEVICE

KEY = "AutocastPrivateUse1"

# The lists of TORCH_LIBRARY_IMPL(aten, AutocastCPU, m), as "name.overload" ("" = default).
# tests/runtime/test_autocast.py checks they are exactly the ops torch gives an AutocastCPU
# kernel, so a torch upgrade that changes CPU's lists fails loudly.
LOWER_PRECISION_FP = [
    "conv1d",
    "conv1d.padding",
    "conv2d",
    "conv2d.padding",
    "conv3d",
    "conv3d.padding",
    "bmm",
    "mm",
    "linalg_vecdot",
    "baddbmm",
    "addmm",
    "_addmm_activation",
    "addbmm",
    "linear",
    "_convolution.deprecated",
    "matmul",
    "conv_tbc",
    "mkldnn_rnn_layer",
    "conv_transpose1d",
    "conv_transpose2d.input",
    "conv_transpose3d.input",
    "prelu",
    "scaled_dot_product_attention",
    "_native_multi_head_attention",
]
FP32 = [
    "avg_pool3d",
    "binary_cross_entropy",
    "grid_sampler",
    "polar",
    "prod",
    "prod.dim_int",
    "quantile",
    "quantile.scalar",
    "nanquantile",
    "nanquantile.scalar",
    "stft",
    "stft.center",
    "cdist",
    "grid_sampler_2d",
    "_grid_sampler_2d_cpu_fallback",
    "grid_sampler_3d",
    "trace",
    "view_as_complex",
    "cholesky",
    "cholesky_inverse",
    "cholesky_solve",
    "inverse",
    "lu_solve",
    "orgqr",
    "ormqr",
    "pinverse",
    "max_pool3d",
    "max_unpool2d",
    "max_unpool3d",
    "adaptive_avg_pool3d",
    "reflection_pad1d",
    "reflection_pad2d",
    "replication_pad1d",
    "replication_pad2d",
    "replication_pad3d",
    "mse_loss",
    "cosine_embedding_loss",
    "nll_loss",
    "nll_loss2d",
    "hinge_embedding_loss",
    "poisson_nll_loss",
    "smooth_l1_loss",
    "cross_entropy_loss",
    "l1_loss",
    "huber_loss",
    "margin_ranking_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
    "multi_margin_loss",
    "ctc_loss.IntList",
    "ctc_loss.Tensor",
    "kl_div",
    "multilabel_margin_loss",
    "binary_cross_entropy_with_logits",
    "fft_fft",
    "fft_ifft",
    "fft_fft2",
    "fft_ifft2",
    "fft_fftn",
    "fft_ifftn",
    "fft_rfft",
    "fft_irfft",
    "fft_rfft2",
    "fft_irfft2",
    "fft_rfftn",
    "fft_irfftn",
    "fft_hfft",
    "fft_ihfft",
    "linalg_cond",
    "linalg_cond.p_str",
    "linalg_matrix_rank",
    "linalg_matrix_rank.tol_tensor",
    "linalg_matrix_rank.atol_rtol_tensor",
    "linalg_matrix_rank.atol_rtol_float",
    "linalg_solve",
    "linalg_cholesky",
    "linalg_svdvals",
    "linalg_eigvals",
    "linalg_eigvalsh",
    "linalg_inv",
    "linalg_householder_product",
    "linalg_tensorinv",
    "linalg_tensorsolve",
    "fake_quantize_per_tensor_affine",
    "geqrf",
    "_lu_with_info",
    "qr",
    "svd",
    "triangular_solve",
    "fractional_max_pool2d",
    "fractional_max_pool3d",
    "adaptive_max_pool3d",
    "multilabel_margin_loss_forward",
    "linalg_qr",
    "linalg_cholesky_ex",
    "linalg_svd",
    "linalg_eig",
    "linalg_eigh",
    "linalg_lstsq",
    "linalg_inv_ex",
    "linalg_matrix_sqrth",  # torch 2.14 (an op 2.13 does not have)
]
PROMOTE = ["stack", "cat", "index_copy"]

_EXCLUDE = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)
_libraries: list[torch.library.Library] = []


def get_amp_supported_dtype() -> list[torch.dtype]:
    """The dtypes ``torch.autocast("mydev", dtype=...)`` accepts: float16 and bfloat16
    (``torch.cuda``'s list; the kernels compute both)."""
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """Whether bfloat16 works on mydev (``torch.cuda.is_bf16_supported``): always."""
    return True


def _eligible(x: Any) -> bool:
    """ATen's ``is_autocast_eligible`` for a backend device plus ``cached_cast``'s float64
    exclusion: a floating tensor on mydev that is not float64."""
    return (
        isinstance(x, torch.Tensor)
        and x.device.type == DEVICE
        and x.is_floating_point()
        and x.dtype != torch.float64
    )


def _cast_to(dtype: torch.dtype) -> Callable[[Any], Any]:
    def cast(x: Any) -> Any:
        return x.to(dtype) if _eligible(x) and x.dtype != dtype else x

    return cast


def _promote_dtype(args: Any, kwargs: Any) -> torch.dtype:
    """ATen's ``promote_type`` / ``prioritize``: the autocast dtype, or float32 when an
    eligible argument is float32 (float64 arguments are ignored); another lower-precision
    dtype raises RuntimeError with ATen's message."""
    lower = torch.get_autocast_dtype(DEVICE)
    found = lower
    for x in torch.utils._pytree.tree_leaves((args, kwargs)):
        if not _eligible(x):
            continue
        if x.dtype == torch.float32:
            found = torch.float32
        elif x.dtype != lower and found != torch.float32:
            raise RuntimeError("Unexpected floating ScalarType in at::autocast::prioritize")
    return found


def _kernel(op: torch._ops.OpOverload, policy: str) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        if policy == "lower_precision_fp":
            dtype = torch.get_autocast_dtype(DEVICE)
        elif policy == "fp32":
            dtype = torch.float32
        else:
            dtype = _promote_dtype(args, kwargs)
        args, kwargs = tree_map(_cast_to(dtype), (args, kwargs))
        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            return op(*args, **kwargs)

    kernel.__name__ = f"autocast_{policy}_{op.__name__}"
    return kernel


def _overload(name: str) -> torch._ops.OpOverload:
    base, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, base), overload or "default")


def _exists(name: str) -> bool:
    """Whether the torch in use has the operator ``aten::name`` (torch 2.14 removed some of
    the lists' ops, e.g. ``cholesky``, and added ``linalg_matrix_sqrth``)."""
    base, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, base, None)
    return packet is not None and (overload or "default") in packet.overloads()


def policies() -> dict[str, str]:
    """Each listed op ("name.overload") that the torch in use has, and its cast policy."""
    table = dict.fromkeys(LOWER_PRECISION_FP, "lower_precision_fp")
    table.update(dict.fromkeys(FP32, "fp32"))
    table.update(dict.fromkeys(PROMOTE, "promote"))
    return {name: policy for name, policy in table.items() if _exists(name)}


def register() -> None:
    """Register the fallthrough and the kernels for ``AutocastPrivateUse1`` (once)."""
    if _libraries:
        return
    fallback = torch.library.Library("_", "IMPL")
    fallback.fallback(torch.library.fallthrough_kernel, KEY)
    lib = torch.library.Library("aten", "IMPL")
    for name, policy in policies().items():
        op = _overload(name)
        lib.impl(op, _kernel(op, policy), KEY)
    _libraries.extend([fallback, lib])
