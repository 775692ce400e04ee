"""Decides how the layout-sensitive ``torch.nn.functional`` ops are tried (compared with CPU).

Each entry draws an input of the shape the op takes (``N, C, *spatial``), laid out by
``layouts.draw_layout`` (channels_last and channels_last_3d often, transposed, sliced,
ambiguous), and weights contiguous or channels_last: convolution (forward, transposed,
``convolution_backward``), pooling, padding, upsampling, softmax, the norms,
``pixel_shuffle`` and ``scaled_dot_product_attention``. These are where backends have
found their stride bugs: a meta kernel predicting NCHW where the kernel returns
channels_last, a ``constant_pad_nd`` that loses the input's format.
"""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F

from .cases import Call, Dtypes, Op, T, render
from .devices import FLOAT_DTYPES
from .layouts import draw_layout

__all__ = ["NN_OPS"]

_KINDS = ("contiguous", "channels_last", "channels_last", "random", "reversed")


def _input(rng: random.Random, sizes: tuple[int, ...], dtype: torch.dtype, **kw) -> T:
    """An activation: channels_last often, sometimes expanded or overlapping."""
    kind = rng.choice(_KINDS)
    return T(draw_layout(rng, sizes, kind=kind, allow_overlap=rng.random() < 0.15), dtype, **kw)


def _weight(rng: random.Random, sizes: tuple[int, ...], dtype: torch.dtype) -> T:
    """A weight: contiguous or channels_last (what ``module.to(memory_format=...)`` gives)."""
    kind = rng.choice(("contiguous", "channels_last"))
    return T(draw_layout(rng, sizes, kind=kind, allow_overlap=False), dtype)


def _conv_geometry(rng: random.Random, nd: int) -> dict:
    """Kernel, stride, padding, dilation and groups of a small convolution."""
    return {
        "groups": rng.choice((1, 1, 2)),
        "kernel": tuple(rng.randint(1, 3) for _ in range(nd)),
        "stride": rng.choice((1, 1, 2)),
        "padding": rng.choice((0, 0, 1)),
        "dilation": rng.choice((1, 1, 2)),
    }


def _spatial(rng: random.Random, g: dict) -> tuple[int, ...]:
    """Input sizes the kernel fits in (1 often: the ambiguous layouts)."""
    return tuple(
        max(g["dilation"] * (k - 1) + 1 - 2 * g["padding"], 1) + rng.choice((0, 0, 1, 3, 5))
        for k in g["kernel"]
    )


def _conv_out(size: int, k: int, g: dict) -> int:
    return (size + 2 * g["padding"] - g["dilation"] * (k - 1) - 1) // g["stride"] + 1


def _conv(nd: int, transposed: bool = False) -> Op:
    """``F.conv{nd}d`` / ``F.conv_transpose2d`` (``at::convolution``)."""
    fn = F.conv_transpose2d if transposed else getattr(F, f"conv{nd}d")
    name = "conv_transpose2d" if transposed else f"conv{nd}d"

    def draw(rng: random.Random, dtypes: Dtypes) -> Call:
        dtype, g = rng.choice(dtypes), _conv_geometry(rng, nd)
        cin, cout = g["groups"] * rng.randint(1, 2), g["groups"] * rng.randint(1, 3)
        n = rng.choice((1, 2))
        x = _input(rng, (n, cin, *_spatial(rng, g)), dtype)
        w_sizes = (cin, cout // g["groups"]) if transposed else (cout, cin // g["groups"])
        w = _weight(rng, (*w_sizes, *g["kernel"]), dtype)
        bias = T(draw_layout(rng, (cout,)), dtype) if rng.random() < 0.5 else None
        kw = {k: g[k] for k in ("stride", "padding", "dilation", "groups")}
        return Call(
            render(f"F.{name}", x, w, bias, **kw),
            lambda a, b, c: fn(a, b, c, **kw),
            (x, w, bias),
            values="close",
        )

    return Op(name, "curated", FLOAT_DTYPES, draw, "at::convolution")


def _draw_conv_backward(rng: random.Random, dtypes: Dtypes) -> Call:
    """``aten.convolution_backward`` with a grad_output laid out as a backward pass may
    give it (channels_last, transposed, expanded)."""
    dtype, g = rng.choice(dtypes), _conv_geometry(rng, 2)
    cin, cout = g["groups"] * rng.randint(1, 2), g["groups"] * rng.randint(1, 3)
    n = rng.choice((1, 2))
    spatial = _spatial(rng, g)
    x = _input(rng, (n, cin, *spatial), dtype)
    w = _weight(rng, (cout, cin // g["groups"], *g["kernel"]), dtype)
    out = tuple(_conv_out(s, k, g) for s, k in zip(spatial, g["kernel"], strict=True))
    grad = _input(rng, (n, cout, *out), dtype)
    bias = rng.random() < 0.5
    mask = [rng.random() < 0.8, True, bias]
    args = (
        [cout] if bias else None,
        [g["stride"]] * 2,
        [g["padding"]] * 2,
        [g["dilation"]] * 2,
        False,
        [0, 0],
        g["groups"],
        mask,
    )
    return Call(
        render("aten.convolution_backward", grad, x, w, *args),
        lambda go, a, b: torch.ops.aten.convolution_backward(go, a, b, *args),
        (grad, x, w),
        values="close",
    )


def _pool(name: str) -> Op:
    """``F.max_pool2d`` (with indices), ``F.avg_pool2d``, ``F.max_pool3d``, ``F.avg_pool3d``."""
    fn = getattr(F, name)
    nd = 3 if name.endswith("3d") else 2

    def draw(rng: random.Random, dtypes: Dtypes) -> Call:
        dtype, k = rng.choice(dtypes), rng.randint(1, 3)
        kw: dict = {
            "kernel_size": k,
            "stride": rng.choice((None, 1, 2)),
            "padding": rng.randint(0, k // 2),
            "ceil_mode": rng.random() < 0.3,
        }
        if name.startswith("max"):
            kw["return_indices"] = rng.random() < 0.5
        else:
            kw["count_include_pad"] = rng.random() < 0.5
        batch = (rng.choice((1, 2)),) if rng.random() < 0.8 else ()
        sizes = (*batch, rng.randint(1, 3), *(k + rng.choice((0, 1, 3)) for _ in range(nd)))
        x = _input(rng, sizes, dtype)
        return Call(render(f"F.{name}", x, **kw), lambda a: fn(a, **kw), (x,), values="close")

    return Op(name, "curated", FLOAT_DTYPES, draw, f"{name}'s meta and CPU kernels")


def _adaptive(name: str) -> Op:
    """``F.adaptive_avg_pool2d`` / ``F.adaptive_max_pool2d`` to a random output size."""
    fn = getattr(F, name)

    def draw(rng: random.Random, dtypes: Dtypes) -> Call:
        dtype = rng.choice(dtypes)
        sizes = (rng.choice((1, 2)), rng.randint(1, 3), rng.randint(1, 5), rng.randint(1, 5))
        x = _input(rng, sizes, dtype)
        out = (rng.randint(1, 3), rng.randint(1, 3))
        return Call(render(f"F.{name}", x, out), lambda a: fn(a, out), (x,), values="close")

    return Op(name, "curated", FLOAT_DTYPES, draw, f"{name}")


def _draw_pad(rng: random.Random, dtypes: Dtypes) -> Call:
    """``F.pad``: ``constant`` on any rank (negative pads crop: ``constant_pad_nd``),
    ``reflect`` / ``replicate`` / ``circular`` on the last two dims of a 4-D input."""
    dtype = rng.choice(dtypes)
    mode = rng.choice(("constant", "constant", "reflect", "replicate", "circular"))
    if mode == "constant":
        ndim = rng.randint(1, 5)
        sizes = tuple(rng.choice((1, 2, 3, 4)) for _ in range(ndim))
        pads = [rng.choice((-1, 0, 1, 2)) for _ in range(2 * rng.randint(1, ndim))]
    else:
        sizes = (rng.choice((1, 2)), rng.randint(1, 3), rng.randint(2, 5), rng.randint(2, 5))
        pads = [rng.randint(0, 1) for _ in range(4)]
    x = _input(rng, sizes, dtype)
    kw = {"mode": mode}
    return Call(render("F.pad", x, pads, **kw), lambda a: F.pad(a, pads, **kw), (x,))


def _draw_interpolate(rng: random.Random, dtypes: Dtypes) -> Call:
    """``F.interpolate``: nearest / linear / bilinear / bicubic / trilinear by rank."""
    dtype, ndim = rng.choice(dtypes), rng.choice((3, 4, 4, 5))
    modes = {3: ("nearest", "linear"), 4: ("nearest", "bilinear", "bicubic"), 5: ("nearest",)}
    mode = rng.choice(modes[ndim] + (("trilinear",) if ndim == 5 else ()))
    sizes = (rng.choice((1, 2)), rng.randint(1, 3), *(rng.randint(1, 4) for _ in range(ndim - 2)))
    x = _input(rng, sizes, dtype)
    kw: dict = {"mode": mode}
    if rng.random() < 0.5:
        kw["scale_factor"] = rng.choice((2, 0.5, 1.5))
    else:
        kw["size"] = tuple(rng.randint(1, 5) for _ in range(ndim - 2))
    if mode != "nearest" and rng.random() < 0.5:
        kw["align_corners"] = True
    return Call(
        render("F.interpolate", x, **kw), lambda a: F.interpolate(a, **kw), (x,), values="close"
    )


def _softmax(name: str) -> Op:
    """``torch.softmax`` / ``torch.log_softmax`` along a random dim (``host_softmax``)."""
    fn = getattr(torch, name)

    def draw(rng: random.Random, dtypes: Dtypes) -> Call:
        dtype = rng.choice(dtypes)
        ndim = rng.randint(0, 5)
        sizes = tuple(rng.choice((0, 1, 2, 3, 4)) for _ in range(ndim))
        x = _input(rng, sizes, dtype)
        dim = rng.randint(-max(ndim, 1), max(ndim, 1) - 1)
        return Call(render(f"torch.{name}", x, dim), lambda a: fn(a, dim), (x,), values="close")

    return Op(name, "curated", FLOAT_DTYPES, draw, name)


def _draw_layer_norm(rng: random.Random, dtypes: Dtypes) -> Call:
    """``F.layer_norm`` over the last 1..3 dims, with and without weight and bias."""
    dtype, ndim = rng.choice(dtypes), rng.randint(1, 4)
    sizes = tuple(rng.randint(1, 4) for _ in range(ndim))
    shape = sizes[ndim - rng.randint(1, min(ndim, 3)) :]
    x = _input(rng, sizes, dtype)
    affine = rng.random() < 0.5
    w = T(draw_layout(rng, shape), dtype) if affine else None
    b = T(draw_layout(rng, shape), dtype) if affine else None
    return Call(
        render("F.layer_norm", x, shape, w, b),
        lambda a, c, d: F.layer_norm(a, shape, c, d),
        (x, w, b),
        values="close",
    )


def _draw_batch_norm(rng: random.Random, dtypes: Dtypes) -> Call:
    """``F.batch_norm``, eval (running statistics) and training, ranks 2..5."""
    dtype, ndim = rng.choice(dtypes), rng.randint(2, 5)
    sizes = (rng.randint(1, 3), rng.randint(1, 3), *(rng.randint(1, 4) for _ in range(ndim - 2)))
    c = sizes[1]
    x = _input(rng, sizes, dtype)
    mean = T(draw_layout(rng, (c,), allow_overlap=False), dtype)
    var = T(draw_layout(rng, (c,), allow_overlap=False), dtype, "positive")
    w = T(draw_layout(rng, (c,)), dtype)
    training = rng.random() < 0.5
    return Call(
        render("F.batch_norm", x, mean, var, w, None, training=training),
        lambda a, m, v, s: F.batch_norm(a, m, v, s, None, training=training),
        (x, mean, var, w),
        values="close",
    )


def _draw_group_norm(rng: random.Random, dtypes: Dtypes) -> Call:
    """``F.group_norm`` with 1 or 2 groups, ranks 2..5."""
    dtype, groups = rng.choice(dtypes), rng.choice((1, 2))
    ndim = rng.randint(2, 5)
    sizes = (
        rng.randint(1, 3),
        groups * rng.randint(1, 2),
        *(rng.randint(1, 4) for _ in range(ndim - 2)),
    )
    x = _input(rng, sizes, dtype)
    return Call(
        render("F.group_norm", x, groups), lambda a: F.group_norm(a, groups), (x,), values="close"
    )


def _pixel(name: str) -> Op:
    """``F.pixel_shuffle`` / ``F.pixel_unshuffle`` with factor 1 or 2, ranks 3..5."""
    fn = getattr(F, name)

    def draw(rng: random.Random, dtypes: Dtypes) -> Call:
        dtype, r = rng.choice(dtypes), rng.choice((1, 2, 2))
        batch = tuple(rng.randint(1, 2) for _ in range(rng.randint(0, 2)))
        if name == "pixel_shuffle":
            sizes = (*batch, rng.randint(1, 2) * r * r, rng.randint(1, 3), rng.randint(1, 3))
        else:
            sizes = (*batch, rng.randint(1, 3), rng.randint(1, 2) * r, rng.randint(1, 2) * r)
        x = _input(rng, sizes, dtype)
        return Call(render(f"F.{name}", x, r), lambda a: fn(a, r), (x,))

    return Op(name, "curated", (*FLOAT_DTYPES, torch.int64, torch.bool), draw, name)


def _draw_sdpa(rng: random.Random, dtypes: Dtypes) -> Call:
    """``F.scaled_dot_product_attention`` with q, k, v often ``[B, L, H, E]`` transposed to
    ``[B, H, L, E]`` (what attention layers hand it), a mask or ``is_causal``."""
    dtype = rng.choice(dtypes)
    b, h, lq, lk, e = (
        rng.randint(1, 2),
        rng.randint(1, 3),
        rng.randint(1, 4),
        rng.randint(1, 4),
        rng.choice((2, 4, 8)),
    )

    def qkv(length: int) -> T:
        kind = rng.choice(("contiguous", "random"))
        if kind == "contiguous" and rng.random() < 0.6:  # [B, L, H, E].transpose(1, 2)
            strides = (length * h * e, e, h * e, 1)
            return T(
                draw_layout(rng, (b, h, length, e), kind="contiguous")._replace(strides=strides),
                dtype,
            )
        return T(draw_layout(rng, (b, h, length, e), kind=kind, allow_overlap=False), dtype)

    q, k, v = qkv(lq), qkv(lk), qkv(lk)
    causal = rng.random() < 0.3
    return Call(
        render("F.scaled_dot_product_attention", q, k, v, is_causal=causal),
        lambda x, y, z: F.scaled_dot_product_attention(x, y, z, is_causal=causal),
        (q, k, v),
        values="close",
    )


NN_OPS: tuple[Op, ...] = (
    _conv(1),
    _conv(2),
    _conv(3),
    _conv(2, transposed=True),
    Op(
        "convolution_backward", "curated", FLOAT_DTYPES, _draw_conv_backward, "convolution_backward"
    ),
    _pool("max_pool2d"),
    _pool("avg_pool2d"),
    _pool("max_pool3d"),
    _pool("avg_pool3d"),
    _adaptive("adaptive_avg_pool2d"),
    _adaptive("adaptive_max_pool2d"),
    Op("pad", "curated", FLOAT_DTYPES, _draw_pad, "constant_pad_nd, reflection/replication_pad"),
    Op("interpolate", "curated", FLOAT_DTYPES, _draw_interpolate, "upsample_*"),
    _softmax("softmax"),
    _softmax("log_softmax"),
    Op("layer_norm", "curated", FLOAT_DTYPES, _draw_layer_norm, "native_layer_norm"),
    Op("batch_norm", "curated", FLOAT_DTYPES, _draw_batch_norm, "native_batch_norm"),
    Op("group_norm", "curated", FLOAT_DTYPES, _draw_group_norm, "native_group_norm"),
    _pixel("pixel_shuffle"),
    _pixel("pixel_unshuffle"),
    Op("sdpa", "curated", FLOAT_DTYPES, _draw_sdpa, "scaled_dot_product_attention"),
)
