"""Decides how the mission's ops are tried: the layout ops, the elementwise families, the
reductions, each with the rules' prediction.

Every entry draws one case: a layout (``layouts.draw_layout``), a dtype, and what else the
op takes (a memory format, a second operand that broadcasts, a Python number, dims), and
names the rule that predicts it (``rules.from_explain`` for what ``explain()`` covers,
``rules.predict_to``, ``predict_empty_strided``, ``predict_reduction``).
"""

from __future__ import annotations

import random

import torch

from . import rules
from .cases import DEVICE, Call, Dtypes, Op, T, render
from .devices import COMPUTE_DTYPES, STORAGE_DTYPES
from .layouts import broadcast_shape, draw_layout, draw_shape, overlaps

__all__ = ["MISSION_OPS"]

FORMATS = (
    None,
    torch.preserve_format,
    torch.contiguous_format,
    torch.channels_last,
    torch.channels_last_3d,
)
# CPU refusals that are an op's own rule, not a layout rule: the rules do not model them
# (the kit's predecessor, tools/cuda_layout_check.py, left them out too).
BOOL_REFUSALS = (
    "Subtraction, the `-` operator",
    "Negation, the `-` operator",
    "Boolean inputs not supported for relu",
    "clamp is not supported for complex types",
)


def _tensor(rng: random.Random, dtype: torch.dtype, kind: str = "any", **draw) -> T:
    sizes = draw_shape(rng)
    return T(draw_layout(rng, sizes, **draw), dtype, kind)


def _fmt_kwargs(fmt: torch.memory_format | None) -> dict:
    return {} if fmt is None else {"memory_format": fmt}


def _layout_op(name: str, fn, *, values: str | None, formats=FORMATS) -> Op:
    """``empty_like`` / ``clone`` / ``contiguous`` with a memory format (``explain``)."""

    def draw(rng: random.Random, dtypes: Dtypes) -> Call:
        x = _tensor(rng, rng.choice(dtypes))
        kw = _fmt_kwargs(rng.choice(formats))
        return Call(
            render(name, x, **kw),
            lambda t: fn(t, **kw),
            (x,),
            values=values,
            rules=lambda t: rules.from_explain(name, t, **kw),
        )

    return Op(name, "layout", STORAGE_DTYPES, draw, f"{name} (empty_like's memory-format rule)")


def _draw_flags(rng: random.Random, dtypes: Dtypes) -> Call:
    """The tensor ``as_strided`` makes, as it is: its flags against c10's predicates."""
    x = _tensor(rng, rng.choice(dtypes))
    return Call(render("as_strided", x), lambda t: t, (x,), rules=rules.predict_flags)


def _draw_empty_strided(rng: random.Random, dtypes: Dtypes) -> Call:
    sizes, strides, _ = draw_layout(rng, draw_shape(rng))
    dtype = rng.choice(dtypes)
    return Call(
        render("empty_strided", sizes, strides, dtype=dtype, device=DEVICE),
        lambda dev: torch.empty_strided(sizes, strides, dtype=dtype, device=dev),
        (DEVICE,),
        values=None,
        rules=lambda dev: rules.predict_empty_strided(sizes, strides, dtype),
    )


def _draw_to_memory_format(rng: random.Random, dtypes: Dtypes) -> Call:
    x = _tensor(rng, rng.choice(dtypes))
    fmt = rng.choice(FORMATS[1:])
    return Call(
        render("Tensor.to", x, memory_format=fmt),
        lambda t: t.to(memory_format=fmt),
        (x,),
        rules=lambda t: rules.predict_to(t, None, fmt),
    )


def _draw_to_dtype(rng: random.Random, dtypes: Dtypes) -> Call:
    """``.to(other dtype)``: source values non-negative (a float to unsigned is undefined in
    C++ for negative values)."""
    x = _tensor(rng, rng.choice(dtypes), "nonneg")
    target = rng.choice(dtypes)
    fmt = rng.choice(FORMATS[1:3])
    return Call(
        render("Tensor.to", x, target, memory_format=fmt),
        lambda t: t.to(target, memory_format=fmt),
        (x,),
        rules=lambda t: rules.predict_to(t, target, fmt),
    )


def _draw_copy(rng: random.Random, dtypes: Dtypes) -> Call:
    """``dst.copy_(src)``: ``src`` broadcasts to ``dst``, maybe of another dtype; ``dst``
    sometimes overlaps itself (CPU refuses: ``assert_no_internal_overlap``)."""
    sizes = draw_shape(rng)
    dtype = rng.choice(dtypes)
    dst = T(draw_layout(rng, sizes, allow_overlap=rng.random() < 0.15), dtype)
    src_dtype = dtype if rng.random() < 0.6 else rng.choice(dtypes)
    src_sizes = broadcast_shape(rng, sizes)
    src = T(draw_layout(rng, src_sizes), src_dtype, "nonneg")
    return Call(
        render("Tensor.copy_", dst, src),
        lambda d, s: d.copy_(s),
        (dst, src),
        rules=lambda d, s: rules.from_explain("copy_", d, s),
    )


def _other_operand(rng: random.Random, a: T, kind: str, dtypes: Dtypes):
    """A second operand: a Python number, or a tensor that broadcasts with ``a`` (its dtype
    often ``a``'s), sometimes the larger of the two."""
    if rng.random() < 0.2:
        return rng.choice((2, 2.5, True))
    dtype = a.dtype if rng.random() < 0.6 else rng.choice(dtypes)
    sizes = broadcast_shape(rng, a.layout.sizes)
    return T(draw_layout(rng, sizes), dtype, kind)


def _binary(name: str, fn, *, values: str = "exact", kind: str = "any", **kwargs) -> Op:
    """A binary elementwise op (``binary_op_config``, ``comparison_op_config``,
    ``binary_float_op_config``): ``explain(fn, a, b)``."""

    def draw(rng: random.Random, dtypes: Dtypes) -> Call:
        a = _tensor(rng, rng.choice(dtypes), kind)
        b = _other_operand(rng, a, kind, dtypes)
        first, second = (b, a) if isinstance(b, T) and rng.random() < 0.3 else (a, b)
        return Call(
            render(fn.__name__, first, second, **kwargs),
            lambda x, y: fn(x, y, **kwargs),
            (first, second),
            values=values,
            rules=lambda x, y: rules.from_explain(fn, x, y, **kwargs),
            refusals=BOOL_REFUSALS,
        )

    return Op(name, "elementwise", COMPUTE_DTYPES, draw, "TensorIteratorBase::build")


def _draw_add_inplace(rng: random.Random, dtypes: Dtypes) -> Call:
    """``self.add_(other)``: ``self`` keeps its layout; an overlapping ``self`` is refused
    where ``has_internal_overlap`` can tell (a stride 0), and so is an ``other`` that would
    make ``self`` broadcast. Where it cannot tell, which write lands is undefined: the values
    are not compared."""
    a = _tensor(rng, rng.choice(dtypes), allow_overlap=rng.random() < 0.15)
    b = _other_operand(rng, a, "any", dtypes)
    return Call(
        render("Tensor.add_", a, b),
        lambda x, y: x.add_(y),
        (a, b),
        values=None if overlaps(a.layout) else "exact",
        rules=lambda x, y: rules.from_explain(torch.Tensor.add_, x, y),
        refusals=BOOL_REFUSALS,
    )


def _draw_add_out(rng: random.Random, dtypes: Dtypes) -> Call:
    """``torch.add(a, b, out=o)``: an ``out`` of the result's shape keeps its strides, one of
    another shape is resized to the plan's (``mark_resize_outputs``)."""
    a = _tensor(rng, rng.choice(dtypes))
    b = _other_operand(rng, a, "any", dtypes)
    sizes = a.layout.sizes if rng.random() < 0.5 else draw_shape(rng)
    out_dtype = a.dtype if rng.random() < 0.7 else rng.choice(dtypes)
    out = T(draw_layout(rng, sizes, allow_overlap=False), out_dtype)
    return Call(
        render("torch.add", a, b, out=out),
        lambda x, y, o: torch.add(x, y, out=o),
        (a, b, out),
        rules=lambda x, y, o: rules.from_explain(torch.add, x, y, out=o),
        refusals=BOOL_REFUSALS,
    )


def _unary(
    name: str,
    fn,
    *,
    values: str = "exact",
    complex_values: str | None = None,
    dtypes=COMPUTE_DTYPES,
) -> Op:
    """A unary op (``unary_op_config``, ``unary_float_op_config``, relu's clamp_min);
    ``complex_values`` how its values compare for a complex input (as ``values`` if None)."""

    def draw(rng: random.Random, dtypes: Dtypes) -> Call:
        a = _tensor(rng, rng.choice(dtypes))
        return Call(
            render(fn.__name__, a),
            fn,
            (a,),
            values=complex_values if complex_values and a.dtype.is_complex else values,
            rules=lambda x: rules.from_explain(fn, x),
            refusals=BOOL_REFUSALS,
        )

    return Op(name, "elementwise", dtypes, draw, "TensorIteratorBase::build")


def _reduction(name: str) -> Op:
    """``sum`` / ``mean`` / ``amax`` / ``amin`` over random dims, ``keepdim``, ``dtype=``
    (``reduction.dim_mask``, ``reduction_shape``, ``sum_dtype``, ``mean_dtype``)."""
    fn = getattr(torch, name)

    def draw(rng: random.Random, dtypes: Dtypes) -> Call:
        a = _tensor(rng, rng.choice(dtypes))
        ndim = len(a.layout.sizes)
        dims = None
        if ndim and rng.random() < 0.8:
            picked = rng.sample(range(ndim), rng.randint(1, ndim))
            dims = [d - ndim if rng.random() < 0.3 else d for d in picked]
            if rng.random() < 0.05:
                dims.append(dims[0] - ndim if dims[0] >= 0 else dims[0])  # repeated: refused
            dims = tuple(dims)
        keepdim = rng.random() < 0.5
        kwargs = {"keepdim": keepdim} if dims is not None else {}
        if name in ("sum", "mean") and rng.random() < 0.3:
            kwargs["dtype"] = torch.float64
        args = (a,) if dims is None else (a, dims)
        values = "exact" if name in ("amax", "amin") else "close"
        return Call(
            render(f"torch.{name}", *args, **kwargs),
            lambda x, *d: fn(x, *d, **kwargs),
            args,
            values=values,
            rules=lambda x, *d: rules.predict_reduction(
                name, x, dims, keepdim and dims is not None, kwargs.get("dtype")
            ),
            refusals=BOOL_REFUSALS,
        )

    return Op(name, "reduction", COMPUTE_DTYPES, draw, f"{name}'s meta function")


MISSION_OPS: tuple[Op, ...] = (
    Op("as_strided", "layout", STORAGE_DTYPES, _draw_flags, "TensorImpl::refresh_contiguous"),
    _layout_op("empty_like", torch.empty_like, values=None),
    Op("empty_strided", "layout", STORAGE_DTYPES, _draw_empty_strided, "empty_strided_generic"),
    _layout_op("clone", torch.clone, values="exact"),
    _layout_op("contiguous", lambda t, **kw: t.contiguous(**kw), values="exact"),
    Op("to_memory_format", "layout", STORAGE_DTYPES, _draw_to_memory_format, "to_impl"),
    Op("to_dtype", "layout", STORAGE_DTYPES, _draw_to_dtype, "_to_copy"),
    Op("copy_", "layout", STORAGE_DTYPES, _draw_copy, "copy_impl"),
    _binary("add", torch.add),
    _binary("sub", torch.sub),
    _binary("mul", torch.mul),
    _binary("div", torch.div, values="close"),
    _binary("div_floor", torch.div, values="close", kind="positive", rounding_mode="floor"),
    _binary("eq", torch.eq),
    _binary("lt", torch.lt),
    Op("add_", "elementwise", COMPUTE_DTYPES, _draw_add_inplace, "TensorIteratorBase::build"),
    Op("add_out", "elementwise", COMPUTE_DTYPES, _draw_add_out, "TensorIteratorBase::build"),
    _unary("neg", torch.neg),
    # complex -> real (explain's unary_op_impl_with_complex_to_float), a hypot that devices
    # round differently
    _unary("abs", torch.abs, complex_values="close"),
    _unary("relu", torch.relu),
    _unary("sqrt", torch.sqrt, values="close"),
    _unary("exp", torch.exp, values="close"),
    _reduction("sum"),
    _reduction("mean"),
    _reduction("amax"),
    _reduction("amin"),
)
