"""Native ``sum``, ``mean``, ``amax`` and ``amin`` on mydev: checks, result, plan, kernel.

Each op follows its structured ATen kernel (``native/ReduceOps.cpp``):

1. the meta function's checks and dtype (``torch_mydev_rules.iterator.reduction``:
   ``sum_dtype``, ``mean_dtype``, ``amax_checks``, ``dim_mask``), in ATen's order, so a bad
   call raises what CPU raises;
2. the result: a new contiguous tensor (``set_output_raw_strided`` without strides), or the
   ``out=`` tensor checked (dtype, device) and resized as ``resize_out`` does (a warning when
   it had elements; its strides are kept when its shape already fits);
3. the input the iterator reads: ``make_reduction_from_out_ty`` reduces ``self.to(dtype)``
   when the dtypes differ. The kernel widens values itself where that cast is exact (to a
   wider float, int to int: a sum wraps the same either way), so only the other casts
   (int to float, float to int, a narrower float) make a temporary through ``_to_copy``;
4. ``build_reduction`` (``TensorIterator::reduce_op``) and one loop of
   ``torch_mydev.kernels.reduction.kernel``. A functional call whose kernel ran straight on the
   input is remembered by its signature (``reduction.entries``): its repeat allocates the
   result and runs that kernel. An empty reduction fills the result as CPU does:
   ``sum`` zeros (``result.zero_()``), ``mean`` 0/0 = NaN.

What stays on CPU, through the fallback (``fallback.run_on_cpu``, counted in
``fallback_stats`` under the overload called): complex inputs or results, dtypes the kernels
lack, a bool ``sum`` result, and an ``out=`` tensor that overlaps itself (CPU's result there
depends on its loop order). An ``out=`` tensor sharing memory with the input: a float sum
below ``GRAIN_SIZE`` follows CPU's steps (the result is zeroed, then summed), any other
reduction is computed into a temporary and copied (CPU reads what it already wrote there).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from torch_mydev.kernels.dtypes import SUPPORTED_DTYPES
from torch_mydev.kernels.reduction import kernel as kernels
from torch_mydev.ops.buffers import byte_offset, storage_span, writable
from torch_mydev.ops.copy.aten import copy_
from torch_mydev.ops.elementwise.checks import shares_storage
from torch_mydev.ops.elementwise.plan import resize_output
from torch_mydev.ops.factories import allocate
from torch_mydev.ops.reduction import entries
from torch_mydev_rules import layout
from torch_mydev_rules.iterator.cache import LRUCache
from torch_mydev_rules.iterator.reduction import (
    amax_checks,
    build_reduction,
    check_mean_result,
    dim_mask,
    mean_dtype,
    reduced_count,
    reduction_shape,
    scalar_type_name,
    sum_dtype,
    uses_acc_buffer,
    viewed_strides,
)

__all__ = ["KERNELS", "amax", "amin", "mean", "mean_all", "sum", "sum_all"]

Dims = int | list[int] | tuple[int, ...] | None

_REDUCED = (torch.float16, torch.bfloat16)
_NATIVE = frozenset(d for d in SUPPORTED_DTYPES if not d.is_complex)
_prepared: LRUCache[tuple, kernels.PreparedReduction] = LRUCache(4096)


# ---- the registered kernels ------------------------------------------------------------------


def _summing(op: str, result_dtype: Callable, functional: Any, out_overload: Any) -> Callable:
    """The kernel of ``sum`` or ``mean`` (their calls differ only in these arguments): a
    functional call through its signature's entry (``entries.served``), else ``full``."""

    def full(
        self: torch.Tensor,
        dim: Dims,
        keepdim: bool,
        dtype: torch.dtype | None,
        out: torch.Tensor | None,
    ) -> tuple[torch.Tensor, entries.Repeat | None]:
        to = result_dtype(self.dtype, dtype, None if out is None else out.dtype)
        overload = functional if out is None else out_overload
        call = (overload, (self, dim, keepdim), {"dtype": dtype, **_out(out)})
        return _reduce(op, self, dim, keepdim, to, out, call)

    def kernel(
        self: torch.Tensor,
        dim: Dims = None,
        keepdim: bool = False,
        *,
        dtype: torch.dtype | None = None,
        out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if out is None:
            result = entries.served(op, full, self, dim, keepdim, dtype)
            if result is not None:
                return result
        return full(self, dim, keepdim, dtype, out)[0]

    kernel.__name__ = kernel.__qualname__ = op
    return kernel


sum = _summing("sum", sum_dtype, torch.ops.aten.sum.dim_IntList, torch.ops.aten.sum.IntList_out)
sum.__doc__ = """aten::sum.dim_IntList / sum.IntList_out."""


def sum_all(self: torch.Tensor, *, dtype: torch.dtype | None = None) -> torch.Tensor:
    """aten::sum (no dim): every dim, as ``sum.dim_IntList(self, [])``."""
    return sum(self, None, False, dtype=dtype)


mean = _summing("mean", mean_dtype, torch.ops.aten.mean.dim, torch.ops.aten.mean.out)
mean.__doc__ = (
    """aten::mean.dim / mean.out: ``sum`` over the dims divided by their element count."""
)


def mean_all(self: torch.Tensor, *, dtype: torch.dtype | None = None) -> torch.Tensor:
    """aten::mean (no dim): every dim."""
    return mean(self, None, False, dtype=dtype)


def amax(
    self: torch.Tensor, dim: Dims = (), keepdim: bool = False, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """aten::amax / amax.out."""
    return _extreme("amax", self, dim, keepdim, out)


def amin(
    self: torch.Tensor, dim: Dims = (), keepdim: bool = False, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """aten::amin / amin.out."""
    return _extreme("amin", self, dim, keepdim, out)


# ---- the steps -------------------------------------------------------------------------------


def _out(out: torch.Tensor | None) -> dict[str, Any]:
    return {} if out is None else {"out": out}


def _extreme(
    name: str, self: torch.Tensor, dim: Dims, keepdim: bool, out: torch.Tensor | None
) -> torch.Tensor:
    """amax/amin: a functional call through its signature's entry (``entries.served``),
    else ``_extreme_full``."""
    if out is None:
        result = entries.served(name, _EXTREME_FULL[name], self, dim, keepdim, None)
        if result is not None:
            return result
    return _extreme_full(name, self, dim, keepdim, None, out)[0]


def _extreme_full(
    name: str,
    self: torch.Tensor,
    dim: Dims,
    keepdim: bool,
    dtype: None,
    out: torch.Tensor | None,
) -> tuple[torch.Tensor, entries.Repeat | None]:
    """amax/amin's meta: out's dtype must be self's, an empty input needs non-empty dims;
    then ``_reduce``."""
    if out is not None and out.dtype != self.dtype:
        raise RuntimeError(
            "Expected the dtype for input and out to match, but got "
            f"{scalar_type_name(self.dtype)} for input's dtype and "
            f"{scalar_type_name(out.dtype)} for out's dtype."
        )
    # every dtype: amax's meta (zero_numel_check_dims) runs before any kernel, so an empty
    # dim raises CPU's IndexError before _reduce's dim_mask sees a repeated one
    amax_checks(name, tuple(self.shape), dim)
    packet = getattr(torch.ops.aten, name)
    overload = packet.default if out is None else packet.out
    call = (overload, (self, dim, keepdim), _out(out))
    return _reduce(name, self, dim, keepdim, self.dtype, out, call)


_EXTREME_FULL = {name: functools.partial(_extreme_full, name) for name in ("amax", "amin")}


def _reduce(
    op: str,
    self: torch.Tensor,
    dim: Dims,
    keepdim: bool,
    result_dtype: torch.dtype,
    out: torch.Tensor | None,
    call: tuple,
) -> tuple[torch.Tensor, entries.Repeat | None]:
    """The whole path of one call: the result, and what a repeat of a functional call may
    run (``entries.Repeat``) when the kernel ran straight from ``self`` into a new result."""
    sizes = tuple(self.shape)
    mask = dim_mask(dim, len(sizes))
    shape = reduction_shape(sizes, mask, keepdim)
    if op == "mean" and self.dtype in _NATIVE:
        check_mean_result(result_dtype)
    in_dtype = _in_dtype(op, result_dtype)
    if not _native(op, self, result_dtype, out):
        from torch_mydev.ops.fallback.boxed import run_on_cpu

        overload, args, kwargs = call
        return run_on_cpu(overload, args, kwargs), None
    if out is None:
        result = allocate(shape, layout.contiguous_strides(shape), result_dtype, self.device)
    else:
        _check_out(out, self, result_dtype)
        resize_output(out, shape)
        writable(out)  # materialised before self's address is read (buffers.py)
        result = out
    if layout.numel(shape) == 0:
        return result, None
    if layout.numel(sizes) == 0:  # CPU: result.zero_(), and a mean divides it by 0
        if op == "sum":
            return result.zero_(), None
        total = result if result.dtype == in_dtype else result.to(in_dtype)
        total.zero_().div_(0)  # the NaN's sign bit as CPU's 0 / 0 sets it
        return (result if total is result else copy_(result, total)), None
    count = reduced_count(sizes, mask)
    if op in ("sum", "mean") and kernels.exact_float_sum(in_dtype, layout.numel(sizes)):
        # CPU's steps, in its order: an out= aliasing self is zeroed before it is read
        return result, _exact_sum(op, self, result, in_dtype, mask, keepdim, count)
    if op in ("amax", "amin") and kernels.exact_float_extreme(self.dtype, layout.numel(sizes)):
        # CPU's steps in its order: an out= sharing self's memory is filled before it is read
        return result, _exact_extreme(op, self, result, mask, keepdim)
    written = result
    if out is not None and shares_storage(out, self):  # a temporary: no order to follow
        written = allocate(shape, layout.contiguous_strides(shape), result_dtype, self.device)
    source = self if _reads_directly(self.dtype, in_dtype) else self.to(in_dtype)
    prepared = _run(op, source, written, mask, keepdim, count)
    if written is not result:
        copy_(result, written)
        return result, None
    if source is not self:
        return result, None
    return result, (kernels.runner(prepared), prepared.extents[1])


def _exact_sum(
    op: str,
    self: torch.Tensor,
    result: torch.Tensor,
    in_dtype: torch.dtype,
    mask: tuple[bool, ...],
    keepdim: bool,
    count: int,
) -> entries.Repeat | None:
    """CPU's serial float ``mean_out`` / ``sum_out`` step by step: a float32 result for a
    float16/bfloat16 mean (``result.to(float)``), the sum, ``div_(count)`` for a mean, then
    the cast into the result. Returns what a repeat may run (``reduction.entries``) when
    the replica ran straight from ``self`` into ``result``, else None."""
    total = result if result.dtype == in_dtype else result.to(in_dtype)
    divisor = count if op == "mean" else 0
    prepared = _cascade_sum(self, total, in_dtype, mask, keepdim, divisor)
    if op == "mean" and prepared is None:
        total.div_(count)
    if total is not result:
        copy_(result, total)
        return None
    if prepared is None or self.dtype != in_dtype:
        return None
    return kernels.cascade_runner(prepared, divisor), prepared.extents[1]


def _exact_extreme(
    op: str, self: torch.Tensor, result: torch.Tensor, mask: tuple[bool, ...], keepdim: bool
) -> Callable[[int, int, int], None]:
    """CPU's serial float32/float64 ``amax_out`` / ``amin_out`` (``reduction._extreme``): its ties
    between +0 and -0 and its NaN bits. Returns what a repeat may run."""
    key = ("extreme", op, tuple(self.shape), self.stride(), self.dtype, result.stride(), mask)
    key += (keepdim,)
    prepared = _prepared.peek(key)
    if prepared is None:
        plan = _plan(self, result, mask, keepdim)
        prepared = kernels.prepare_extreme(plan, self.dtype, op == "amax")
        _prepared.put(key, prepared)
    kernels.run_cascade(prepared, _operand(result), _operand(self))
    return kernels.cascade_runner(prepared, 0), prepared.extents[1]


def _cascade_sum(
    self: torch.Tensor,
    total: torch.Tensor,
    dtype: torch.dtype,
    mask: tuple[bool, ...],
    keepdim: bool,
    divisor: int = 0,
) -> kernels.PreparedCascade | None:
    """``sum_out`` on CPU: reduce ``self.to(dtype)``, or through a float32 buffer
    (``uses_acc_buffer``), into ``total`` with the cascade replica (which zero-fills it
    first, and divides by ``divisor`` when it is above 0). Returns the replica's set-up, or
    None when the sum went through the buffer (nothing divided then)."""
    source = self if self.dtype == dtype else self.to(dtype)
    key = ("cascade", tuple(source.shape), source.stride(), dtype, total.stride(), mask)
    key += (keepdim,)
    prepared = _prepared.peek(key)
    if prepared is None:
        plan = _plan(source, total, mask, keepdim)
        prepared = "acc" if uses_acc_buffer(plan, dtype) else kernels.prepare_cascade(plan, dtype)
        _prepared.put(key, prepared)
    if isinstance(prepared, str):  # "acc": through a float32 buffer
        shape = tuple(total.shape)
        buffer = allocate(shape, layout.contiguous_strides(shape), torch.float32, total.device)
        _cascade_sum(self, buffer, torch.float32, mask, keepdim)
        copy_(total, buffer)
        return None
    kernels.run_cascade(prepared, _operand(total), _operand(source), divisor)
    return prepared


def _operand(t: torch.Tensor) -> kernels.Buffer:
    """Element ``[0, ..., 0]``'s address and the storage bytes from there (const access:
    an output has been made ``writable`` already)."""
    base, nbytes = storage_span(t)
    offset = byte_offset(t)
    return kernels.Buffer(base + offset, nbytes - offset)


def _plan(source: torch.Tensor, result: torch.Tensor, mask: tuple[bool, ...], keepdim: bool):
    """``make_reduction``'s iterator over ``source`` into ``result`` (viewed)."""
    return build_reduction(
        tuple(source.shape),
        source.stride(),
        source.element_size(),
        reduction_shape(tuple(source.shape), mask, True),
        viewed_strides(result.stride(), mask, keepdim),
        result.element_size(),
    )


def _in_dtype(op: str, result_dtype: torch.dtype) -> torch.dtype:
    """The dtype the iterator reads (``make_reduction_from_out_ty``); a float16/bfloat16 mean
    is a float32 sum divided, then rounded (``mean_out`` on CPU)."""
    if op == "mean" and result_dtype in _REDUCED:
        return torch.float32
    return result_dtype


def _reads_directly(src: torch.Tensor | torch.dtype, dst: torch.dtype) -> bool:
    """Whether the kernel may read ``src`` values as ``dst`` values: the same dtype, an exact
    widening of floats, or int/bool to a non-bool int (a sum wraps the same either way)."""
    if src == dst:
        return True
    if dst.is_floating_point:
        return src.is_floating_point and src.itemsize < dst.itemsize
    integral = not (src.is_floating_point or src.is_complex)
    return integral and dst != torch.bool and not dst.is_complex


def _native(op: str, self: torch.Tensor, result_dtype: torch.dtype, out: torch.Tensor | None):
    """Whether mydev's kernels run this call (else the CPU fallback does)."""
    if self.dtype not in _NATIVE or result_dtype not in _NATIVE:
        return False
    if op == "sum" and result_dtype == torch.bool:
        return False
    if out is not None and out.device == self.device:
        overlap = layout.has_internal_overlap(tuple(out.shape), out.stride())
        if overlap is layout.MemOverlap.YES:
            return False
    return True


def _check_out(out: torch.Tensor, self: torch.Tensor, dtype: torch.dtype) -> None:
    """``resize_out``'s checks of a structured kernel's ``out=`` tensor."""
    if out.dtype != dtype:
        raise RuntimeError(
            f"Expected out tensor to have dtype {dtype}, but got {out.dtype} instead"
        )
    if out.device != self.device:
        raise RuntimeError(
            f"Expected out tensor to have device {self.device}, but got {out.device} instead"
        )


def _run(
    op: str,
    source: torch.Tensor,
    result: torch.Tensor,
    mask: tuple[bool, ...],
    keepdim: bool,
    count: int,
) -> kernels.PreparedReduction:
    """Plan (cached per layout) and run the kernel of ``op`` into ``result``."""
    key = (
        op,
        tuple(source.shape),
        source.stride(),
        source.dtype,
        result.stride(),
        result.dtype,
        mask,
        keepdim,
    )
    prepared = _prepared.peek(key)
    if prepared is None:
        plan = _plan(source, result, mask, keepdim)
        prepared = kernels.prepare(op, plan, result.dtype, source.dtype, count)
        _prepared.put(key, prepared)
    kernels.run(prepared, _operand(result), _operand(source))
    return prepared


# The overloads registered for PrivateUse1 (``ops/registry.py``).
KERNELS = {
    "sum.dim_IntList": sum,
    "sum.IntList_out": sum,
    "sum": sum_all,
    "mean.dim": mean,
    "mean.out": mean,
    "mean": mean_all,
    "amax": amax,
    "amax.out": amax,
    "amin": amin,
    "amin.out": amin,
}
