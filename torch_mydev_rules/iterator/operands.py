"""Decides what the iterator is given: operand descriptions and the TensorIteratorConfig flags.

An ``OperandSpec`` is everything TensorIterator reads from a tensor -- sizes, element strides,
dtype -- plus the two facts it learns from how the op was called (is it an output, is it a
wrapped Python number). An ``IteratorConfig`` holds the ``TensorIteratorConfig`` flags that
change a layout or dtype decision; the preset functions give the configs of the ATen builders
(``build_borrowing_binary_op`` and friends in ``TensorIterator.cpp``, ``copy_impl`` in
``native/Copy.cpp``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "IteratorConfig",
    "OperandSpec",
    "binary_float_op_config",
    "binary_op_config",
    "comparison_op_config",
    "copy_config",
    "unary_float_op_config",
    "unary_op_config",
]


@dataclass(frozen=True)
class OperandSpec:
    """One TensorIterator operand (``OperandInfo``), as plain tuples.

    ``sizes`` / ``strides`` are None for an output the iterator must allocate (an undefined
    tensor); strides are in elements. ``dtype`` is None only for such an output.
    ``is_read_write`` marks an output that is also one of the inputs (in-place ops:
    ``mark_outputs`` sets ``OperandInfo::is_read_write``); such an output may not be resized.
    ``is_scalar`` marks a wrapped Python number (a zero-dim tensor with
    ``is_wrapped_number()``), which ranks lowest in type promotion.
    """

    sizes: tuple[int, ...] | None
    strides: tuple[int, ...] | None
    dtype: torch.dtype | None
    is_output: bool = False
    is_read_write: bool = False
    is_scalar: bool = False

    def __post_init__(self) -> None:
        if (self.sizes is None) != (self.strides is None):
            raise ValueError("sizes and strides must both be given or both be None")
        if self.sizes is not None:
            object.__setattr__(self, "sizes", tuple(int(s) for s in self.sizes))
            object.__setattr__(self, "strides", tuple(int(s) for s in self.strides))
            if len(self.sizes) != len(self.strides):
                raise ValueError(
                    f"sizes {list(self.sizes)} and strides {list(self.strides)} differ in length"
                )
            negative = [s for s in self.sizes if s < 0]
            if negative:
                raise RuntimeError(
                    f"Trying to create tensor with negative dimension {negative[0]}: "
                    f"{list(self.sizes)}"
                )
        elif not self.is_output:
            raise RuntimeError("Found undefined input tensor!")
        if self.is_scalar and self.sizes != ():
            raise ValueError("a wrapped number is a zero-dim operand: sizes must be ()")

    @property
    def defined(self) -> bool:
        """Whether a tensor exists (``tensor_base().defined()``); False for outputs to allocate."""
        return self.sizes is not None

    @property
    def ndim(self) -> int:
        """Number of dimensions; 0 for an undefined output."""
        return 0 if self.sizes is None else len(self.sizes)

    @classmethod
    def output(cls, dtype: torch.dtype | None = None) -> OperandSpec:
        """An undefined output: the iterator chooses its sizes, strides and (maybe) dtype."""
        return cls(None, None, dtype, is_output=True)


@dataclass(frozen=True)
class IteratorConfig:
    """The ``TensorIteratorConfig`` flags that change a layout or dtype decision.

    Defaults are ``TensorIteratorConfig``'s own. ``default_dtype`` stands for
    ``torch.get_default_dtype()`` (read by ``promote_integer_inputs_to_float`` and by wrapped
    float numbers), passed in so the rules stay free of global state.
    """

    check_all_same_dtype: bool = True
    check_all_same_device: bool = True
    promote_inputs_to_common_dtype: bool = False
    promote_integer_inputs_to_float: bool = False
    cast_common_dtype_to_outputs: bool = False
    enforce_safe_casting_to_output: bool = False
    resize_outputs: bool = True
    check_mem_overlap: bool = True
    enforce_linear_iteration: bool = False
    static_dtype: torch.dtype | None = None
    default_dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        # TensorIteratorConfig's setters: promoting or casting switches off the same-dtype check.
        if self.promote_inputs_to_common_dtype or self.cast_common_dtype_to_outputs:
            object.__setattr__(self, "check_all_same_dtype", False)
        if self.promote_integer_inputs_to_float and not self.promote_inputs_to_common_dtype:
            raise ValueError("promote_integer_inputs_to_float needs promote_inputs_to_common_dtype")
        if self.static_dtype is not None and self.check_all_same_dtype:
            raise ValueError(
                "check_all_same_dtype(false) must be called before declare_static_dtype(...)"
            )


def copy_config() -> IteratorConfig:
    """``copy_impl``: output then input, no resizing, any dtypes, any devices."""
    return IteratorConfig(
        resize_outputs=False, check_all_same_dtype=False, check_all_same_device=False
    )


def binary_op_config(*, default_dtype: torch.dtype = torch.float32) -> IteratorConfig:
    """``BINARY_OP_CONFIG`` (add, sub, mul, div with a rounding mode): promote, cast, check."""
    return IteratorConfig(
        promote_inputs_to_common_dtype=True,
        cast_common_dtype_to_outputs=True,
        enforce_safe_casting_to_output=True,
        default_dtype=default_dtype,
    )


def binary_float_op_config(*, default_dtype: torch.dtype = torch.float32) -> IteratorConfig:
    """``BINARY_FLOAT_OP_CONFIG`` (true division): as binary ops, integers compute in float."""
    return IteratorConfig(
        promote_inputs_to_common_dtype=True,
        cast_common_dtype_to_outputs=True,
        enforce_safe_casting_to_output=True,
        promote_integer_inputs_to_float=True,
        default_dtype=default_dtype,
    )


def comparison_op_config(
    out_dtype: torch.dtype | None = None, *, default_dtype: torch.dtype = torch.float32
) -> IteratorConfig:
    """``set_up_comparison_op_config`` (eq, ne, lt, ...): inputs promote, the output is bool.

    ``out_dtype`` is the dtype of an ``out=`` tensor, None for the functional form, whose output
    is declared bool. A non-bool ``out=`` gets the common dtype cast into it; a bool one does not
    (the kernels special-case bool outputs).
    """
    return IteratorConfig(
        promote_inputs_to_common_dtype=True,
        static_dtype=torch.bool if out_dtype is None else None,
        cast_common_dtype_to_outputs=out_dtype is not None and out_dtype is not torch.bool,
        default_dtype=default_dtype,
    )


def unary_op_config() -> IteratorConfig:
    """``UNARY_OP_CONFIG`` (neg, ...): input and output must share one dtype."""
    return IteratorConfig(check_all_same_dtype=True)


def unary_float_op_config(*, default_dtype: torch.dtype = torch.float32) -> IteratorConfig:
    """``UNARY_FLOAT_OP_CONFIG`` (sqrt, exp, ...): integer inputs compute in the default float.

    ATen spells out the same flags as ``BINARY_FLOAT_OP_CONFIG``; the config is that one.
    """
    return binary_float_op_config(default_dtype=default_dtype)
