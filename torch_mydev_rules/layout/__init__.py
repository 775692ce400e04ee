"""Decides what a (sizes, strides) layout is: contiguity, memory format, density and overlap.

This is the c10/ATen layout vocabulary re-implemented over plain tuples of ints, one
function per rule, each named after the c10/ATen function it mirrors, one module per job
(all of them read as ``layout.<name>``):

- ``formats``: ``MemoryFormat``, ``numel``, contiguous strides and the channels_last
  orders;
- ``contiguity``: contiguity flags as ``TensorImpl::_refresh_contiguous`` caches them
  (c10/core/Contiguity.h, c10/core/TensorImpl.h), which is what
  ``Tensor.is_contiguous(memory_format=...)`` and ``is_non_overlapping_and_dense`` report;
  the "strides like channels_last" guesses (c10/core/MemoryFormat.h) and
  ``TensorBase::suggest_memory_format``;
- ``strides``: the strides ``at::empty`` gives for a memory format, and the strides
  ``empty_like`` / ``clone`` give with ``preserve_format`` (``at::infer_dense_strides``,
  ATen/ExpandUtils.cpp);
- ``storage``: ``at::detail::computeStorageNbytes`` (ATen/EmptyTensor.cpp);
- ``overlap``: ``at::has_internal_overlap`` and ``at::get_overlap_status``
  (ATen/MemoryOverlap.cpp).

Nothing here touches memory or tensors; torch is imported only inside the two
``MemoryFormat`` converters. Functions that take a memory format accept a
``torch.memory_format`` as well as a ``MemoryFormat``.
"""

from torch_mydev_rules.layout.contiguity import (
    is_channels_last_3d_contiguous,
    is_channels_last_contiguous,
    is_channels_last_strides_2d,
    is_channels_last_strides_3d,
    is_contiguous,
    is_contiguous_for,
    is_non_overlapping_and_dense,
    is_strides_like,
    suggest_memory_format,
)
from torch_mydev_rules.layout.formats import MemoryFormat, contiguous_strides, numel
from torch_mydev_rules.layout.overlap import (
    MemOverlap,
    MemOverlapStatus,
    MemRange,
    get_overlap_status,
    has_internal_overlap,
)
from torch_mydev_rules.layout.storage import compute_storage_nbytes
from torch_mydev_rules.layout.strides import (
    infer_dense_strides,
    preserve_format_strides,
    sort_dims,
    strides_for_memory_format,
)

__all__ = [
    "MemOverlap",
    "MemOverlapStatus",
    "MemRange",
    "MemoryFormat",
    "compute_storage_nbytes",
    "contiguous_strides",
    "get_overlap_status",
    "has_internal_overlap",
    "infer_dense_strides",
    "is_channels_last_3d_contiguous",
    "is_channels_last_contiguous",
    "is_channels_last_strides_2d",
    "is_channels_last_strides_3d",
    "is_contiguous",
    "is_contiguous_for",
    "is_non_overlapping_and_dense",
    "is_strides_like",
    "numel",
    "preserve_format_strides",
    "sort_dims",
    "strides_for_memory_format",
    "suggest_memory_format",
]
