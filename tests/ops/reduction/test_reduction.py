"""Native sum, mean, amax and amin on mydev against torch CPU (docs/reductions.md).

Truth: the same call on CPU tensors with the same sizes, strides, offsets and values. Results
agree in dtype, shape and strides; in value bit for bit for every layout below torch's
``GRAIN_SIZE`` (32768 elements: CPU reduces on one thread there and mydev replays its
kernel: the cascade sum, and float32/float64 amax/amin's ties between +0 and -0 and NaN
bits), and for integer sums and amax/amin at any size (above it a signed zero or a NaN's
bits may differ in a float amax/amin, which compare with ``==`` there). Larger float sums
are checked within the documented bound: ``1e-5``
(float32), ``1e-12`` (float64) or ``4e-3`` (float16/bfloat16) of the sum of magnitudes.
When CPU raises, mydev raises the same exception type.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import torch_mydev
from tests.layout.strategies import views
from tests.support.dtypes import DEVICE_DTYPES, FLOATS, REDUCED
from tests.support.profile import deep
from tests.support.raises import outcome
from tests.support.subprocess_run import run_python
from tests.support.tensors import same_bits, view_pair

REAL = tuple(d for d in DEVICE_DTYPES if not d.is_complex)
OPS = ("sum", "mean", "amax", "amin")


def _call(op: str, x: torch.Tensor, dim, keepdim: bool, dtype, out=None):
    kwargs = {} if out is None else {"out": out}
    if op in ("amax", "amin"):
        return getattr(torch, op)(x, () if dim is None else dim, keepdim, **kwargs)
    if dim is None and not keepdim and out is None:
        return getattr(torch, op)(x, dtype=dtype)
    return getattr(torch, op)(x, dim, keepdim, dtype=dtype, **kwargs)


def _outcome(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return outcome(fn)


def _assert_same(op: str, expected: torch.Tensor, actual: torch.Tensor) -> None:
    assert actual.device.type == "mydev"
    got = actual.cpu()
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    assert actual.stride() == expected.stride()
    if op in ("amax", "amin"):
        nan = _nan(expected)
        assert torch.equal(_nan(got), nan)
        assert torch.equal(got[~nan], expected[~nan])
    else:
        assert same_bits(got, expected), (got, expected)


def _nan(t: torch.Tensor) -> torch.Tensor:
    return t.isnan() if t.is_floating_point() else torch.zeros_like(t, dtype=torch.bool)


@st.composite
def dims_of(draw, ndim: int):
    """None, [], one int, or a list of distinct dims (negative ones too), and now and then a
    repeated or out-of-range dim (both errors on CPU)."""
    kind = draw(st.sampled_from(("none", "empty", "int", "list", "list", "bad")))
    if kind == "none":
        return None
    if kind == "empty":
        return []
    rank = max(ndim, 1)
    if kind == "int":
        return draw(st.integers(-rank, rank - 1))
    if kind == "bad":
        return draw(st.sampled_from(([0, 0], [rank], [-rank - 1], [0, -rank])))
    chosen = draw(st.lists(st.integers(0, rank - 1), unique=True, min_size=1, max_size=rank))
    return [d - rank if draw(st.booleans()) else d for d in chosen]


@given(
    view=views(max_dims=4),
    op=st.sampled_from(OPS),
    dtype=st.sampled_from(REAL),
    keepdim=st.booleans(),
    data=st.data(),
)
def test_matches_cpu(view, op, dtype, keepdim, data) -> None:
    """Every layout, dims choice and dtype= gives CPU's values, shape, strides, dtype or
    exception type."""
    cpu, dev = view_pair(view, dtype, seed=len(view[0]))
    dim = data.draw(dims_of(len(view[0])))
    cast = None
    if op == "sum":
        cast = data.draw(st.sampled_from((None, None, torch.int64, torch.float64, torch.float32)))
    elif op == "mean":
        cast = data.draw(st.sampled_from((None, None, torch.float64, torch.float32)))
    expected, error = _outcome(lambda: _call(op, cpu, dim, keepdim, cast))
    for _ in range(2):  # the second call through the signature's entry (reduction_entries)
        actual, dev_error = _outcome(lambda: _call(op, dev, dim, keepdim, cast))
        assert dev_error == error, (error, dev_error)
        if error is None:
            _assert_same(op, expected, actual)


@given(
    view=views(max_dims=4),
    op=st.sampled_from(OPS),
    dtype=st.sampled_from((torch.int32, torch.float32, torch.float16)),
    keepdim=st.booleans(),
    data=st.data(),
)
def test_out_matches_cpu(view, op, dtype, keepdim, data) -> None:
    """``out=``: CPU's resizing (and its warning), kept strides, dtype and device checks."""
    cpu, dev = view_pair(view, dtype, seed=1)
    dim = data.draw(dims_of(len(view[0])))
    out_dtype = data.draw(st.sampled_from((dtype, torch.float32, torch.int64)))
    out_shape = data.draw(st.sampled_from(((0,), (2, 3), None)))
    if out_shape is None:  # the right shape, transposed when it has two dims
        reference = _outcome(lambda: _call(op, cpu, dim, keepdim, None))[0]
        out_shape = tuple(reference.shape) if reference is not None else (1,)
    cpu_out = torch.zeros(out_shape, dtype=out_dtype)
    if cpu_out.dim() == 2:
        cpu_out = torch.zeros(out_shape[::-1], dtype=out_dtype).t()
    dev_out = cpu_out.to("mydev") if cpu_out.is_contiguous() else cpu_out.t().to("mydev").t()
    with warnings.catch_warnings(record=True) as cpu_warned:
        warnings.simplefilter("always")
        _, error = _outcome(lambda: _call(op, cpu, dim, keepdim, None, cpu_out))
    with warnings.catch_warnings(record=True) as dev_warned:
        warnings.simplefilter("always")
        actual, dev_error = _outcome(lambda: _call(op, dev, dim, keepdim, None, dev_out))
    assert dev_error == error
    if error is None:
        assert actual is dev_out
        _assert_same(op, cpu_out, dev_out)
        assert len(dev_warned) == len(cpu_warned)


# Each dtype compiles three parallel loops of its own (about 15 s with an empty cache): the
# default profile takes float32, the 16-bit floats (float16 and bfloat16 share their loops)
# and one integer type; the deep profile every dtype.
_LARGE_DTYPES = (
    (*FLOATS, torch.int32, torch.bool)
    if deep()
    else (torch.float16, torch.bfloat16, torch.float32, torch.int32)
)


@pytest.mark.parametrize("dtype", _LARGE_DTYPES)
@pytest.mark.parametrize(
    "shape, dims",
    [((300, 300), 0), ((300, 300), 1), ((300, 300), None), ((64, 40, 30), [0, 2]),
     ((1 << 17,), None), ((7, 40000), 1)],
)  # fmt: skip
def test_large_within_bound(shape, dims, dtype) -> None:
    """Above GRAIN_SIZE (parallel loops): integers and amax/amin exact, float sums within
    the documented bound of the sum of magnitudes."""
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(shape, generator=g, dtype=torch.float64) * 100).to(dtype)
    d = x.to("mydev")
    for op in OPS:
        if op == "mean" and not dtype.is_floating_point:
            continue
        expected = getattr(torch, op)(x) if dims is None else getattr(torch, op)(x, dims)
        args = (d,) if dims is None else (d, dims)
        getattr(torch, op)(*args)  # the second call runs through the signature's entry
        actual = getattr(torch, op)(*args)
        assert actual.dtype == expected.dtype and actual.stride() == expected.stride()
        got = actual.cpu()
        if op in ("amax", "amin") or not dtype.is_floating_point:
            assert torch.equal(got, expected), op
            continue
        magnitude = x.double().abs().sum() if dims is None else x.double().abs().sum(dims)
        if op == "mean":
            magnitude = magnitude / (x.numel() // expected.numel())
        bound = {torch.float32: 1e-5, torch.float64: 1e-12}.get(dtype, 4e-3)
        assert ((got.double() - expected.double()).abs() <= bound * magnitude + 1e-30).all(), op


# Row lengths around the cascade's boundaries: shorter than one vector, a partial group of
# four vectors, exactly one level step (16 groups of 4 vectors: 512 float32, 256 float64
# elements), one past it, and several level steps with tails.
ROW_LENGTHS = (1, 7, 8, 9, 31, 32, 33, 255, 256, 257, 511, 512, 513, 1000, 4096, 4099, 8200)


def _spread(shape: tuple[int, ...], dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    """Values over many magnitudes. float16/bfloat16 ones are scaled by powers of two 2**-12
    to 2**12 in float32, so that their float32 sums round (float16's 11 bits and bfloat16's 8
    summed in float32's 24 are otherwise exact, whatever the order of the additions)."""
    if dtype in REDUCED:
        x = torch.randn(shape, generator=g)
        return (x * torch.randint(-12, 13, shape, generator=g).exp2()).to(dtype)
    x = torch.randn(shape, generator=g, dtype=dtype)
    return x * torch.rand(shape, generator=g, dtype=dtype).pow(8) * 1e4


def _cancelling(shape: tuple[int, int], dim: int, dtype: torch.dtype, g: torch.Generator):
    """``_spread`` values whose exact sum along ``dim`` is 0: the first half, then its
    negation in another order (and a zero where the length is odd). Every bit of such a sum
    is rounding error, so it differs with the order of any two additions; the float16 and
    bfloat16 results of ordinary data hide float32's last bits in their rounding."""
    half = list(shape)
    half[dim] //= 2
    v = _spread(tuple(half), dtype, g)
    order = torch.rand(tuple(half), generator=g).argsort(dim=dim)
    parts = [v, -v.gather(dim, order)]
    if shape[dim] % 2:
        parts.append(torch.zeros([1 if d == dim else s for d, s in enumerate(shape)], dtype=dtype))
    return torch.cat(parts, dim=dim)


@pytest.mark.parametrize("dtype", FLOATS)  # float16/bfloat16: HALVES loads
def test_contiguous_rows_bit_exact(dtype) -> None:
    """Sums and means of contiguous rows (the flat-lane path of the cascade replica; the
    vector loads of float16/bfloat16) equal CPU's bits at every row length around the
    cascade's level boundaries, with values spread over many magnitudes and signed zeros,
    and with rows whose sum cancels (float16's neighbour-pair loads, which torch 2.13 no
    longer makes, differed there in 13 of 34 cases and nowhere in the spread data)."""
    g = torch.Generator().manual_seed(5)
    for n in ROW_LENGTHS:
        rows = max(1, min(64, 30000 // n))
        spread = _spread((rows, n), dtype, g)
        spread[rows // 2] = -0.0
        for x in (spread, _cancelling((rows, n), 1, dtype, g)):
            d = x.to("mydev")
            for op in ("sum", "mean"):
                expected = getattr(torch, op)(x, 1)
                assert same_bits(getattr(torch, op)(d, 1).cpu(), expected), (op, n)
                assert same_bits(getattr(torch, op)(d, 1).cpu(), expected), (op, n)  # entry


# Reduced lengths of a column sum around the cascade's level step (16 rows below 2**20),
# and column counts with whole groups of four vectors (32 float32 or 16 float64 columns), a
# one-vector group and tails: ``vectorized_outer_sum``'s flat-lane path, its ``row_sum``
# vectors and its scalar columns.
COLUMN_LENGTHS = (1, 7, 15, 16, 17, 255, 256, 257, 1000, 4099)


@pytest.mark.parametrize("dtype", FLOATS)
def test_contiguous_columns_bit_exact(dtype) -> None:
    """Sums and means down contiguous columns (``sum(0)`` of a row-major matrix: the
    replica's outer reduction) equal CPU's bits around the level boundaries, on one thread
    so that every size takes CPU's serial kernel."""
    g = torch.Generator().manual_seed(7)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for n in COLUMN_LENGTHS:
            for width in (33, 45, 70):
                spread = _spread((n, width), dtype, g)
                spread[:, width // 2] = -0.0
                for x in (spread, _cancelling((n, width), 0, dtype, g)):
                    d = x.to("mydev")
                    for op in ("sum", "mean"):
                        expected = getattr(torch, op)(x, 0)
                        for _ in range(2):  # the second call through the signature's entry
                            got = getattr(torch, op)(d, 0).cpu()
                            assert same_bits(got, expected), (op, n, width)
    finally:
        torch.set_num_threads(threads)


def test_channels_last_keepdim_gives_contiguous() -> None:
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    d = x.to("mydev")
    for dims in (1, (2, 3), (0, 1)):
        for op in ("sum", "mean", "amax"):
            expected = getattr(torch, op)(x, dims, keepdim=True)
            actual = getattr(torch, op)(d, dims, keepdim=True)
            assert actual.stride() == expected.stride()
            assert same_bits(actual.cpu(), expected)


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.to(torch.int32).mean(),
        lambda t: t.sum([0, 0]),
        lambda t: t.sum(5),
        lambda t: t[:0].amax(0),
        lambda t: t[:0].amin(),
        lambda t: t.amax(0, out=torch.empty(0, dtype=torch.int64, device=t.device)),
        lambda t: t.sum(0, dtype=torch.float64, out=torch.empty(0, device=t.device)),
        lambda t: t.mean(0, dtype=torch.int64),
    ],
)
def test_errors_match_cpu(call) -> None:
    x = torch.randn(3, 4)
    _, error = _outcome(lambda: call(x))
    _, dev_error = _outcome(lambda: call(x.to("mydev")))
    assert error is not None and dev_error == error


def _empty_call(op: str, t: torch.Tensor) -> torch.Tensor:
    if op == "amax":
        return torch.amax(t, 0 if t.dim() == 2 else ())
    return getattr(torch, op)(t)


@pytest.mark.parametrize(
    "x",
    [torch.ones(0), torch.ones(2, 0), torch.tensor(-0.0), torch.tensor(3, dtype=torch.int8)],
)
def test_empty_and_zero_dim(x) -> None:
    """Empty reductions: sum 0, mean NaN (CPU's zero_ and 0/0, sign bit included); 0-dim
    inputs reduce to themselves (a -0.0 sums to +0.0 on CPU too)."""
    d = x.to("mydev")
    for op in ("sum", "mean", "amax"):
        expected, error = _outcome(lambda op=op: _empty_call(op, x))
        actual, dev_error = _outcome(lambda op=op: _empty_call(op, d))
        assert dev_error == error
        if error is None:
            _assert_same(op, expected, actual)


def test_out_aliasing_the_input() -> None:
    """A float sum follows CPU's steps (zero the result, then sum); an integer one reads the
    input before anything is written."""
    x = torch.randn(4, 4)
    d = x.to("mydev")
    torch.sum(x, 1, out=x[0])
    torch.sum(d, 1, out=d[0])
    assert same_bits(d.cpu(), x)
    i = torch.arange(16).reshape(4, 4)
    expected = i.sum(1)
    j = i.to("mydev")
    torch.sum(j, 1, out=j[0])
    assert torch.equal(j[0].cpu(), expected)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64))
@pytest.mark.parametrize("op", ["amax", "amin"])
def test_extreme_out_aliasing_the_input_follows_cpu(op, dtype) -> None:
    """CPU fills an out= that shares the input's memory with -inf/+inf, then reads the input
    through it: the replica takes the same steps in the same order."""
    rows = torch.tensor([[5.0, 6.0], [1.0, 2.0]], dtype=dtype)
    wide = torch.arange(40.0, dtype=dtype).reshape(5, 8) - 20
    wide[2, 3] = -0.0
    for cpu, dim, out in ((rows, 0, lambda t: t[0]), (wide, 1, lambda t: t[:, 0])):
        dev = cpu.to("mydev")
        getattr(torch, op)(cpu, dim, out=out(cpu))
        getattr(torch, op)(dev, dim, out=out(dev))
        assert same_bits(dev.cpu(), cpu), (dev.cpu(), cpu)


def test_extreme_replica_only_for_the_avx2_kernel() -> None:
    """With ``ATEN_CPU_CAPABILITY=default`` CPU's generic ``maximum`` keeps a NaN's own bits;
    mydev then takes its general path, which matches, not the AVX2 replica."""
    code = (
        "import torch; x = torch.zeros(4, 64); "
        "x[1, 5] = torch.tensor(0x7FC12345, dtype=torch.int32).view(torch.float32); "
        "pairs = [(getattr(torch, op)(x, d), getattr(torch, op)(x.to('mydev'), d).cpu()) "
        "for op in ('amax', 'amin') for d in (0, 1)]; "
        "print(all(torch.equal(a.view(torch.int32), b.view(torch.int32)) for a, b in pairs))"
    )
    done = run_python(code, env={"ATEN_CPU_CAPABILITY": "default"}, timeout=300)
    assert done.stdout.strip() == "True"


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_autograd_matches_cpu(op) -> None:
    x = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    d = x.detach().to("mydev").requires_grad_()
    for t in (x, d):
        weights = torch.arange(4.0, dtype=torch.float64, device=t.device)
        (getattr(t, op)((0, 2)) * weights).sum().backward()
        assert getattr(t, op)((0, 2)).grad_fn.name() == getattr(x, op)((0, 2)).grad_fn.name()
    assert same_bits(d.grad.cpu(), x.grad)


def test_native_not_fallback() -> None:
    """Real dtypes run mydev's kernels; complex ones go to the CPU fallback, counted."""
    x = torch.randn(8, 8, device="mydev")
    torch_mydev.reset_fallback_stats()
    for op in OPS:
        getattr(x, op)(1)
        getattr(x, op)()
    torch.sum(x, 0, out=torch.empty(8, device="mydev"))
    assert torch_mydev.fallback_stats() == {}
    z = torch.randn(4, 4, dtype=torch.complex64)
    assert same_bits(z.to("mydev").sum(1).cpu(), z.sum(1))
    assert torch_mydev.fallback_stats() == {"aten::sum.dim_IntList": 1}
    torch_mydev.reset_fallback_stats()


# Palettes of values that tie (+0/-0 as the extreme) or propagate (NaN), and sizes around the
# vector widths (8 float32 or 4 float64 lanes, four vectors a step).
NAN, INF = float("nan"), float("inf")
PALETTES = (
    (-1.0, 0.0, -0.0),  # amax ties
    (1.0, 0.0, -0.0),  # amin ties
    (0.0, -0.0),
    (-1.0, -0.0, 0.0, NAN),
    (-1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 0.0, -0.0, NAN),  # now and then a NaN
    (0.0, -0.0, NAN, INF, -INF, -1.0, 1.0),
)
EXTREME_SIZES = (1, 2, 7, 16, 31, 32, 33, 64, 70)


@given(
    sizes=st.lists(st.sampled_from(EXTREME_SIZES), min_size=1, max_size=3),
    data=st.data(),
    dtype=st.sampled_from((torch.float32, torch.float64)),
    op=st.sampled_from(("amax", "amin")),
    keepdim=st.booleans(),
)
def test_extremes_bit_exact_with_ties_and_nan(sizes, data, dtype, op, keepdim) -> None:
    """Below GRAIN_SIZE a float32/float64 amax/amin is CPU's serial kernel replayed
    (``reduction._extreme``): which zero wins a tie and which NaN bits come out, on permuted and
    sliced layouts through every path (inner, outer, scalar)."""
    assume(math.prod(sizes) < 32768)  # GRAIN_SIZE: above it CPU reduces on threads
    ndim = len(sizes)
    order = data.draw(st.permutations(range(ndim)))
    step = data.draw(st.sampled_from((1, 1, 2)))
    full = [n * step if d == order[0] else n for d, n in enumerate(sizes)]
    seed = data.draw(st.integers(0, 99))
    palette = data.draw(st.sampled_from(PALETTES))
    count = max(1, math.prod(full))
    picks = torch.randint(len(palette), (count,), generator=torch.Generator().manual_seed(seed))
    base = torch.tensor(palette, dtype=dtype)[picks].reshape(full)
    inverse = torch.argsort(torch.tensor(order)).tolist()
    sliced = tuple(slice(None, None, step) if d == order[0] else slice(None) for d in range(ndim))

    def layout_of(t: torch.Tensor) -> torch.Tensor:
        """``t`` stored in the dim order ``order``, sliced with ``step`` along ``order[0]``."""
        return t.permute(*order).contiguous().permute(*inverse)[sliced]

    cpu, dev = layout_of(base), layout_of(base.to("mydev"))
    assert dev.stride() == cpu.stride()
    dim = data.draw(st.lists(st.sampled_from(range(ndim)), unique=True))  # [] is every dim
    expected = getattr(torch, op)(cpu, dim, keepdim)
    for _ in range(2):  # the second call through the signature's entry
        actual = getattr(torch, op)(dev, dim, keepdim)
        assert same_bits(actual, expected), (cpu, dim, actual.cpu(), expected)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(5, 7), (64, 3000)])
def test_extremes_with_nan_inf_and_signed_zeros(dtype, shape) -> None:
    """amax/amin propagate NaN, order infinities and both zeros as CPU (contiguous runs are
    compared as ordered integers; strided ones by value)."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    x[1, 2] = float("nan")
    x[2] = float("inf")
    x[3] = -0.0
    x[4, ::2] = float("-inf")
    d = x.to("mydev")
    for op in ("amax", "amin"):
        for t, c in ((d, x), (d.t(), x.t())):
            for dims in ((1,), (0,), ()):
                _assert_same(op, getattr(torch, op)(c, dims), getattr(torch, op)(t, dims))


def test_repeated_signature_reads_each_tensor() -> None:
    """Calls with one signature (sizes, strides, dtype) on different tensors: each result is
    its own tensor's, through the recorded entry."""
    for shape, dims in (((6, 5), 1), ((300, 300), 0), ((40000,), None)):
        for seed in range(3):
            x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
            d = x[..., ::1].to("mydev")
            for op in OPS:
                expected = getattr(torch, op)(x) if dims is None else getattr(torch, op)(x, dims)
                got = getattr(torch, op)(d) if dims is None else getattr(torch, op)(d, dims)
                if x.numel() < 32768 or op in ("amax", "amin"):
                    assert same_bits(got.cpu(), expected), (shape, op)
                else:
                    assert torch.allclose(got.cpu(), expected, rtol=1e-5, atol=1e-3), (shape, op)


@pytest.mark.parametrize("op", OPS)
def test_recorded_call_checks_the_storage(op) -> None:
    """A repeated call runs its recorded kernel, which still checks the input's storage: a
    storage shrunk under a view of the recorded layout raises instead of being read past."""
    x = torch.arange(48.0).to("mydev")
    view = torch.empty(0, device="mydev").set_(x.untyped_storage(), 0, (6, 8), (8, 1))
    for _ in range(2):  # planned and recorded, then run by the record
        getattr(torch, op)(view, 1)
    expected = getattr(torch, op)(torch.arange(48.0).view(6, 8), 1)
    assert torch.equal(getattr(torch, op)(view, 1).cpu(), expected)
    view.untyped_storage().resize_(64)  # 16 of its 48 elements left
    with pytest.raises((IndexError, RuntimeError)):
        getattr(torch, op)(view, 1)
