"""``at::detail::computeStorageNbytes`` (ATen/EmptyTensor.cpp): the bytes a layout needs."""

from __future__ import annotations

from collections.abc import Sequence

from torch_mydev_rules.layout.formats import _STORAGE_MAX, _check_size_nonnegative


def compute_storage_nbytes(
    sizes: Sequence[int], strides: Sequence[int], itemsize: int, storage_offset: int = 0
) -> int:
    """Bytes a storage needs to hold the layout; ``at::detail::computeStorageNbytes``.

    Rule: any size 0 gives 0; otherwise ``(storage_offset + 1 + sum(stride * (size - 1)))
    * itemsize``. Errors, all RuntimeError with torch's messages, in ``empty_strided``'s
    order: a negative size (``check_size_nonnegative``); sizes and strides of different
    lengths; a negative storage offset (``as_strided``'s check); and
    ATen's overflow check: a result above ``2**63 - 1``, or a negative stride on a dim of
    size 2 or more (which ATen's uint64 arithmetic wraps to a huge value).
    """
    _check_size_nonnegative(sizes)
    if len(sizes) != len(strides):
        raise RuntimeError(
            f"dimensionality of sizes ({len(sizes)}) must match dimensionality of "
            f"strides ({len(strides)})"
        )
    if storage_offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {storage_offset}")
    nbytes = storage_offset + 1
    for size, stride in zip(sizes, strides, strict=True):
        if size == 0:
            return 0
        nbytes += stride * (size - 1)
    nbytes *= itemsize
    # ATen sums in uint64_t and fails on any wrap-around or a result above int64's maximum.
    # With non-negative strides every partial sum is at most the final one, so only the
    # final value matters; a negative stride on a dim of size >= 2 becomes a huge uint64
    # term, which always fails.
    overflowed = nbytes > _STORAGE_MAX or any(
        stride < 0 and size > 1 for size, stride in zip(sizes, strides, strict=True)
    )
    if overflowed:
        raise RuntimeError(
            f"Storage size calculation overflowed with sizes={list(sizes)} "
            f"and strides={list(strides)}"
        )
    return nbytes
