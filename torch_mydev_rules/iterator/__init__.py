"""Decides elementwise layouts: a pure-Python TensorIterator build, DIPU's OpInferrer, explain.

Sizes, strides and dtypes in; a ``Plan`` out (output strides to allocate, the coalesced
fastest-first iteration a kernel walks). No tensor memory is touched. One module per step:

- ``operands``: ``OperandSpec`` and ``IteratorConfig`` (+ the ATen builder presets)
- ``promotion``: ``promote_types`` / ``result_type`` / ``can_cast``
- ``steps/``: the build's steps, one module each, in ATen's order: ``shape``
  (``infer_size``, ``compute_shape``, ``mark_resize_outputs``), ``compute_types`` (common
  dtype, CPU cast temporaries), ``fast_setup`` (``compute_fast_setup_type`` /
  ``fast_set_up``), ``strides`` (``compute_strides``, ``reorder_dimensions``,
  ``allocate_or_resize_outputs``), ``coalesce`` (``coalesce_dimensions``,
  ``get_dim_to_split``)
- ``plan``: ``Plan`` and ``build`` (the steps in ATen's order)
- ``casts``: the dtypes ``copy_`` casts and ``c10::convert``'s route between two of them
- ``reduction``: the reduction iterator (``TensorIterator::reduce_op``'s layout)
- ``families``: which ATen iterator config each op family builds with
- ``numbers``: the dtype of a Python number; ``cache``: ``cached_build``, a bounded LRU
- ``explain``: ``explain(op, *args, **kwargs) -> Report`` (``describe`` prints it)
- ``reference/``: ATen's ``DimCounter`` and DIPU's OpInferrer, kept for the tests only
"""

from torch_mydev_rules.iterator.explain import Report, explain
from torch_mydev_rules.iterator.operands import (
    IteratorConfig,
    OperandSpec,
    binary_float_op_config,
    binary_op_config,
    comparison_op_config,
    copy_config,
    unary_float_op_config,
    unary_op_config,
)
from torch_mydev_rules.iterator.plan import Plan, build
from torch_mydev_rules.iterator.promotion import can_cast, promote_types, result_type

__all__ = [
    "IteratorConfig",
    "OperandSpec",
    "Plan",
    "Report",
    "binary_float_op_config",
    "binary_op_config",
    "build",
    "can_cast",
    "comparison_op_config",
    "copy_config",
    "explain",
    "promote_types",
    "result_type",
    "unary_float_op_config",
    "unary_op_config",
]
