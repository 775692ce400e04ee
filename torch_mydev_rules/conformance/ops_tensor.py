"""Decides how the layout-sensitive tensor ops are tried (compared with CPU).

``cat`` and ``stack`` (whose output follows the inputs' format, and skips legacy empty
``[0]`` inputs), indexing (``index_select``, ``gather``, advanced indexing,
``index_put_``, ``embedding``), ``matmul`` / ``linear``, TensorIterator ops beyond the
mission's (``where``, ``clamp``, ``maximum``, ``addcmul``), the ``*_like`` factories,
``reshape`` (a view where one exists, else a copy) and other views, and a few ops that
rebuild their input (``flip``, ``roll``, ``repeat``, ``tril``, ``cumsum``, ``sort``).
"""

from __future__ import annotations

import random

import torch
import torch.nn.functional as F

from .cases import Call, Dtypes, Op, T, render
from .devices import COMPUTE_DTYPES, FLOAT_DTYPES
from .layouts import broadcast_shape, draw_layout, draw_shape

__all__ = ["TENSOR_OPS"]

_REAL = tuple(d for d in COMPUTE_DTYPES if not d.is_complex)
_NUMERIC = tuple(d for d in _REAL if d != torch.bool)


def _tensor(rng: random.Random, dtype: torch.dtype, sizes=None, **kw) -> T:
    sizes = draw_shape(rng) if sizes is None else sizes
    return T(draw_layout(rng, sizes), dtype, **kw)


def _index(rng: random.Random, sizes: tuple[int, ...], bound: int) -> T:
    """An int64 index tensor with values in ``[0, bound)``, any layout."""
    return T(draw_layout(rng, sizes), torch.int64, f"index:{bound}")


def _dim(rng: random.Random, ndim: int) -> int:
    return rng.randint(-max(ndim, 1), max(ndim, 1) - 1)


def _draw_cat(rng: random.Random, dtypes: Dtypes) -> Call:
    """``torch.cat`` of 1..3 tensors that differ along ``dim``; each its own layout and maybe
    its own dtype (promoted); sometimes a legacy empty ``[0]`` input, which cat skips."""
    sizes = draw_shape(rng, 1, 5)
    dim = rng.randrange(len(sizes))
    parts = []
    for _ in range(rng.randint(1, 3)):
        part = list(sizes)
        part[dim] = rng.choice((0, 1, 2, 3))
        dtype = rng.choice(dtypes) if not parts or rng.random() < 0.3 else parts[0].dtype
        parts.append(_tensor(rng, dtype, tuple(part)))
    if rng.random() < 0.15:
        parts.insert(rng.randint(0, len(parts)), _tensor(rng, parts[0].dtype, (0,)))
    return Call(render("torch.cat", parts, dim), lambda ts: torch.cat(ts, dim), (parts,))


def _draw_stack(rng: random.Random, dtypes: Dtypes) -> Call:
    """``torch.stack`` of 1..3 tensors of one shape, each its own layout."""
    sizes, dtype = draw_shape(rng, 0, 4), rng.choice(dtypes)
    parts = [_tensor(rng, dtype, sizes) for _ in range(rng.randint(1, 3))]
    dim = rng.randint(-len(sizes) - 1, len(sizes))
    return Call(render("torch.stack", parts, dim), lambda ts: torch.stack(ts, dim), (parts,))


def _draw_index_select(rng: random.Random, dtypes: Dtypes) -> Call:
    x = _tensor(rng, rng.choice(dtypes), draw_shape(rng, 1, 4, positive=True))
    dim = _dim(rng, len(x.layout.sizes))
    idx = _index(rng, (rng.randint(0, 4),), x.layout.sizes[dim])
    return Call(
        render("torch.index_select", x, dim, idx),
        lambda a, i: torch.index_select(a, dim, i),
        (x, idx),
    )


def _draw_gather(rng: random.Random, dtypes: Dtypes) -> Call:
    x = _tensor(rng, rng.choice(dtypes), draw_shape(rng, 1, 4, positive=True))
    dim = _dim(rng, len(x.layout.sizes))
    sizes = tuple(rng.randint(0, s) for s in x.layout.sizes)
    idx = _index(rng, sizes, x.layout.sizes[dim])
    return Call(render("torch.gather", x, dim, idx), lambda a, i: torch.gather(a, dim, i), (x, idx))


def _draw_index(rng: random.Random, dtypes: Dtypes) -> Call:
    """``x[:, idx]`` / ``x[idx1, idx2]`` (``aten.index.Tensor``: the result's layout follows
    TensorIterator over the indexed and broadcast dims)."""
    x = _tensor(rng, rng.choice(dtypes), draw_shape(rng, 1, 4, positive=True))
    ndim = len(x.layout.sizes)
    first = rng.randint(0, ndim - 1)
    count = rng.randint(1, ndim - first)
    shape = draw_shape(rng, 0, 2, positive=True)
    indices = [None] * first + [
        _index(rng, broadcast_shape(rng, shape), x.layout.sizes[first + i]) for i in range(count)
    ]
    return Call(
        render("aten.index.Tensor", x, indices),
        lambda a, idx: torch.ops.aten.index.Tensor(a, idx),
        (x, indices),
    )


def _draw_index_put(rng: random.Random, dtypes: Dtypes) -> Call:
    """``x.index_put_((idx,), values, accumulate)`` into a copy of ``x`` (it keeps its
    layout; the values broadcast). Without ``accumulate`` the index has no repeats: which
    of two writes to one place lands is undefined (``index_put_``'s documentation)."""
    dtype = rng.choice(dtypes)
    x = T(draw_layout(rng, draw_shape(rng, 1, 4, positive=True), allow_overlap=False), dtype)
    accumulate = rng.random() < 0.5 and dtype != torch.bool
    bound = x.layout.sizes[0]
    if accumulate:
        idx = _index(rng, (rng.randint(1, 3),), bound)
    else:
        layout = draw_layout(rng, (rng.randint(1, min(3, bound)),), allow_overlap=False)
        idx = T(layout, torch.int64, f"distinct:{bound}")
    values = _tensor(rng, dtype, broadcast_shape(rng, idx.layout.sizes + x.layout.sizes[1:]))
    return Call(
        render("Tensor.index_put_", x, [idx], values, accumulate),
        lambda a, i, v: a.index_put_((i,), v, accumulate),
        (x, idx, values),
        values="close" if accumulate else "exact",
    )


def _draw_embedding(rng: random.Random, dtypes: Dtypes) -> Call:
    weight = _tensor(rng, rng.choice(dtypes), (rng.randint(1, 5), rng.randint(1, 4)))
    idx = _index(rng, draw_shape(rng, 0, 3), weight.layout.sizes[0])
    return Call(render("F.embedding", idx, weight), F.embedding, (idx, weight))


def _draw_matmul(rng: random.Random, dtypes: Dtypes) -> Call:
    """``torch.matmul`` of 1..4-D operands (batched, broadcast, transposed operands)."""
    dtype = rng.choice(dtypes)
    m, k, n = rng.randint(1, 4), rng.randint(1, 4), rng.randint(1, 4)
    batch = draw_shape(rng, 0, 2, positive=True)
    a_sizes = (*batch, m, k) if rng.random() < 0.8 else (k,)
    b_sizes = (*broadcast_shape(rng, batch), k, n) if rng.random() < 0.8 else (k,)
    a, b = _tensor(rng, dtype, a_sizes), _tensor(rng, dtype, b_sizes)
    return Call(render("torch.matmul", a, b), torch.matmul, (a, b), values="close")


def _draw_linear(rng: random.Random, dtypes: Dtypes) -> Call:
    dtype, i, o = rng.choice(dtypes), rng.randint(1, 4), rng.randint(1, 4)
    x = _tensor(rng, dtype, (*draw_shape(rng, 0, 3, positive=True), i))
    w = T(draw_layout(rng, (o, i), kind=rng.choice(("contiguous", "reversed"))), dtype)
    b = _tensor(rng, dtype, (o,)) if rng.random() < 0.5 else None
    return Call(render("F.linear", x, w, b), F.linear, (x, w, b), values="close")


def _draw_where(rng: random.Random, dtypes: Dtypes) -> Call:
    """``torch.where(cond, a, b)``: three operands broadcast, the result TensorIterator's."""
    a = _tensor(rng, rng.choice(dtypes))
    cond = _tensor(rng, torch.bool, broadcast_shape(rng, a.layout.sizes))
    b = _tensor(rng, a.dtype, broadcast_shape(rng, a.layout.sizes))
    return Call(render("torch.where", cond, a, b), torch.where, (cond, a, b))


def _draw_clamp(rng: random.Random, dtypes: Dtypes) -> Call:
    a = _tensor(rng, rng.choice(dtypes))
    low = _tensor(rng, a.dtype, broadcast_shape(rng, a.layout.sizes))
    return Call(render("torch.clamp", a, min=low), lambda x, y: torch.clamp(x, min=y), (a, low))


def _draw_maximum(rng: random.Random, dtypes: Dtypes) -> Call:
    a = _tensor(rng, rng.choice(dtypes))
    b = _tensor(rng, rng.choice(dtypes), broadcast_shape(rng, a.layout.sizes))
    first, second = (b, a) if rng.random() < 0.3 else (a, b)
    return Call(render("torch.maximum", first, second), torch.maximum, (first, second))


def _draw_addcmul(rng: random.Random, dtypes: Dtypes) -> Call:
    a = _tensor(rng, rng.choice(dtypes))
    b = _tensor(rng, a.dtype, broadcast_shape(rng, a.layout.sizes))
    c = _tensor(rng, a.dtype, broadcast_shape(rng, a.layout.sizes))
    return Call(render("torch.addcmul", a, b, c), torch.addcmul, (a, b, c), values="close")


def _like(name: str) -> Op:
    """``zeros_like`` / ``full_like`` with a memory format: ``empty_like``'s rule, filled."""
    fn = getattr(torch, name)
    extra = (3,) if name == "full_like" else ()
    formats = (None, torch.preserve_format, torch.contiguous_format, torch.channels_last)

    def draw(rng: random.Random, dtypes: Dtypes) -> Call:
        x = _tensor(rng, rng.choice(dtypes))
        fmt = rng.choice(formats)
        kw = {} if fmt is None else {"memory_format": fmt}
        return Call(render(f"torch.{name}", x, *extra, **kw), lambda a: fn(a, *extra, **kw), (x,))

    return Op(name, "curated", COMPUTE_DTYPES, draw, f"{name} (empty_like, then fill_)")


def _draw_reshape(rng: random.Random, dtypes: Dtypes) -> Call:
    """``reshape`` to a random factorisation (``computeStride``: a view when the strides
    allow one, else ``_unsafe_view`` of a contiguous copy), or ``flatten``."""
    x = _tensor(rng, rng.choice(dtypes))
    numel = 1
    for s in x.layout.sizes:
        numel *= s
    shape = [-1]
    if numel and rng.random() < 0.7:
        factors = [f for f in range(1, numel + 1) if numel % f == 0]
        first = rng.choice(factors)
        shape = [first, numel // first] if rng.random() < 0.5 else [numel // first, -1, first]
        shape = [s for s in shape if s != 1] if rng.random() < 0.3 else shape
    return Call(render("Tensor.reshape", x, shape), lambda a: a.reshape(shape), (x,))


_VIEWS = {
    "transpose": lambda a, r: a.transpose(_dim(r, a.dim()), _dim(r, a.dim())),
    "unsqueeze": lambda a, r: a.unsqueeze(r.randint(-a.dim() - 1, a.dim())),
    "squeeze": lambda a, r: a.squeeze(),
    "diagonal": lambda a, r: a.diagonal(0, 0, -1) if a.dim() >= 2 else a.t(),
    "unfold": lambda a, r: a.unfold(-1, 1, 1) if a.dim() else a.unfold(0, 1, 1),
    "narrow": lambda a, r: a.narrow(-1, 0, max(a.shape[-1] - 1, 0)) if a.dim() else a[...],
    "expand": lambda a, r: a.expand(2, *a.shape),
    "movedim": lambda a, r: a.movedim(0, -1) if a.dim() else a,
}


def _draw_view(rng: random.Random, dtypes: Dtypes) -> Call:
    """A view op (transpose, unsqueeze, squeeze, diagonal, unfold, narrow, expand, movedim):
    its sizes, strides and offset are arithmetic on the input's, done by every backend's
    view kernels (``as_strided`` underneath)."""
    x = _tensor(rng, rng.choice(dtypes))
    name = rng.choice(sorted(_VIEWS))
    seed = rng.random()  # the same dims picked on every device
    return Call(
        render(f"Tensor.{name}", x),
        lambda a: _VIEWS[name](a, random.Random(seed)),
        (x,),
    )


def _draw_rebuild(rng: random.Random, dtypes: Dtypes) -> Call:
    """Ops that write a new tensor from their input's layout: flip, roll, repeat, tril,
    cumsum, sort (values and indices, stable)."""
    x = _tensor(rng, rng.choice(dtypes), draw_shape(rng, 1, 4))
    ndim = len(x.layout.sizes)
    dim = _dim(rng, ndim)
    table = {
        "flip": lambda a: a.flip(dim),
        "roll": lambda a: a.roll(1, dim),
        "repeat": lambda a: a.repeat(*([2] + [1] * (ndim - 1))),
        "tril": lambda a: a.tril() if a.dim() >= 2 else a.clone(),
        "cumsum": lambda a: a.cumsum(dim),
        "sort": lambda a: a.sort(dim, stable=True),
    }
    name = rng.choice(sorted(table))
    return Call(render(f"Tensor.{name}", x, dim), table[name], (x,))


TENSOR_OPS: tuple[Op, ...] = (
    Op(
        "cat",
        "curated",
        COMPUTE_DTYPES,
        _draw_cat,
        "cat's meta function (compute_output_memory_format)",
    ),
    Op("stack", "curated", COMPUTE_DTYPES, _draw_stack, "stack"),
    Op("index_select", "curated", COMPUTE_DTYPES, _draw_index_select, "index_select"),
    Op("gather", "curated", COMPUTE_DTYPES, _draw_gather, "gather"),
    Op("index", "curated", COMPUTE_DTYPES, _draw_index, "index.Tensor (make_info, TensorIterator)"),
    Op("index_put_", "curated", _NUMERIC, _draw_index_put, "index_put_"),
    Op("embedding", "curated", FLOAT_DTYPES, _draw_embedding, "embedding"),
    Op("matmul", "curated", FLOAT_DTYPES, _draw_matmul, "matmul"),
    Op("linear", "curated", FLOAT_DTYPES, _draw_linear, "linear / addmm"),
    Op("where", "curated", COMPUTE_DTYPES, _draw_where, "where_self_out"),
    Op("clamp", "curated", _NUMERIC, _draw_clamp, "clamp.Tensor"),
    Op("maximum", "curated", _REAL, _draw_maximum, "maximum"),
    Op("addcmul", "curated", FLOAT_DTYPES, _draw_addcmul, "addcmul"),
    _like("zeros_like"),
    _like("full_like"),
    Op("reshape", "curated", COMPUTE_DTYPES, _draw_reshape, "reshape (computeStride)"),
    Op("views", "curated", COMPUTE_DTYPES, _draw_view, "view ops"),
    Op("rebuild", "curated", _NUMERIC, _draw_rebuild, "flip, roll, repeat, tril, cumsum, sort"),
)
