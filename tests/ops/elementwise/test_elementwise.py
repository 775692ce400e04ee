"""Native elementwise ops on mydev against torch CPU: values, dtypes, strides, errors.

Truth: the same call on CPU tensors with the same sizes, strides, offsets and values. Results
must agree in dtype, shape and strides, and in value bit for bit -- except where
``docs/ops.md`` names a tolerance (complex mul/div/abs; float16/bfloat16 add with an alpha
whose product is inexact), checked there with ``assert_close``. When CPU raises, mydev must
raise the same exception type.
"""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import torch_mydev
from tests.layout.strategies import dense_strides, storage_elements, views
from tests.support.dtypes import DEVICE_DTYPES, INTEGERS, REDUCED
from tests.support.raises import run_like_cpu
from tests.support.tensors import same_bits

COMPLEX = (torch.complex64, torch.complex128)
ARITHMETIC = ("add", "sub", "mul", "div", "div_trunc", "div_floor", "floor_divide")
ROUNDING_DIVISIONS = ("div_trunc", "div_floor", "floor_divide")
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")

_SPECIAL = (0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -3.0, 7.0, 1e-3, 1025.0, 0.75, 60000.0)
_NONFINITE = (float("inf"), float("-inf"), float("nan"))


# ---- values and tensors ------------------------------------------------------------------------


def make_values(n: int, dtype: torch.dtype, seed: int, *, nonzero: bool = False) -> torch.Tensor:
    """``n`` CPU values of ``dtype``: random in [-100, 100) with special values mixed in.

    Floats get signed zeros, halves, ties for float16 rounding, large values and (one seed
    in two) inf/nan; integers stay in [-100, 100) ([0, 200) for uint8). ``nonzero`` replaces
    zeros by 3 (for integer divisors).
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, generator=g, dtype=torch.float64) * 200.0 - 100.0
    special = _SPECIAL + (_NONFINITE if seed % 2 else ())
    picks = torch.randint(0, 3 * len(special), (n,), generator=g)
    for i in range(n):
        if picks[i] < len(special):
            x[i] = special[picks[i]]
    if dtype.is_complex:
        y = torch.rand(n, generator=g, dtype=torch.float64) * 200.0 - 100.0
        y[picks % 3 == 0] = 0.0
        t = torch.complex(x, y).to(dtype)
    elif dtype.is_floating_point:
        t = x.to(dtype)
    elif dtype == torch.bool:
        t = x > 0
    else:
        x = torch.nan_to_num(x, nan=5.0, posinf=99.0, neginf=-99.0).trunc()
        t = (x.abs() if dtype == torch.uint8 else x).to(dtype)
    if nonzero:
        t = torch.where(t == 0, torch.full((), 3, dtype=t.dtype), t)
    return t


def pair(view, dtype, seed, *, nonzero=False):
    """The same strided view over the same values, on CPU and on mydev."""
    sizes, strides, offset = view
    base = make_values(
        max(storage_elements(sizes, strides, offset), 1), dtype, seed, nonzero=nonzero
    )
    return base.as_strided(sizes, strides, offset), base.to("mydev").as_strided(
        sizes, strides, offset
    )


def writable(view) -> bool:
    """No two elements of the view share memory (torch leaves such writes unordered)."""
    sizes, strides, _ = view
    offsets = [
        sum(i * s for i, s in zip(idx, strides, strict=True))
        for idx in itertools.product(*(range(n) for n in sizes))
    ]
    return len(offsets) == len(set(offsets))


def can_write(x) -> bool:
    """``x`` is a tensor an in-place op may write (no two elements share memory)."""
    return isinstance(x, torch.Tensor) and writable((tuple(x.shape), x.stride(), 0))


# ---- comparing results -------------------------------------------------------------------------


def tolerance(op: str, dtype: torch.dtype, alpha=1) -> dict | None:
    """The documented tolerance of ``op`` in ``dtype`` (None: bit-exact)."""
    if dtype in COMPLEX and op in ("mul", "div", "abs"):
        return {"rtol": 4e-7 if dtype == torch.complex64 else 1e-15, "atol": 0.0}
    if dtype in COMPLEX and op in ("add", "sub", "neg"):
        return {"rtol": 0.0, "atol": 0.0}  # equal values; the sign of a zero part may differ
    if dtype in REDUCED and op in ("add", "sub") and not _exact_alpha(alpha):
        return {"rtol": 1e-2, "atol": 0.0}
    return None


def _exact_alpha(alpha) -> bool:
    """``alpha * x`` rounds nowhere: alpha is 0 or +-2**k."""
    if isinstance(alpha, complex):
        return alpha.imag == 0 and _exact_alpha(alpha.real)
    if alpha == 0:
        return True
    a = abs(float(alpha))
    return a == 2.0 ** round(torch.log2(torch.tensor(a, dtype=torch.float64)).item())


def assert_matches(cpu: torch.Tensor, dev: torch.Tensor, tol: dict | None = None) -> None:
    assert dev.device.type == "mydev"
    assert dev.dtype == cpu.dtype
    assert dev.shape == cpu.shape
    assert dev.stride() == cpu.stride(), (dev.stride(), cpu.stride())
    if tol is None or not (cpu.is_complex() or cpu.is_floating_point()):
        dev = dev.cpu()
        if cpu.is_floating_point() or cpu.is_complex():
            # NaN sign and payload bits depend on which torch loop ran (its vectorised
            # bfloat16 conversion writes 0xFFFF, Sleef's fmod a positive NaN): only where the
            # NaNs are counts.
            real_cpu = torch.view_as_real(cpu) if cpu.is_complex() else cpu
            real_dev = torch.view_as_real(dev) if dev.is_complex() else dev
            assert torch.equal(real_cpu.isnan(), real_dev.isnan()), (cpu, dev)
            real_cpu.masked_fill_(real_cpu.isnan(), 0.0)
            real_dev.masked_fill_(real_dev.isnan(), 0.0)
        assert same_bits(cpu, dev), (cpu, dev)
    else:
        torch.testing.assert_close(dev.cpu(), cpu, equal_nan=True, **tol)


def twice(fn):
    """Call ``fn`` twice and return the second result, which must equal the first bit for bit:
    the first call of a layout takes the general path, the second its cached entry."""
    first = fn()
    first = first.cpu().clone() if isinstance(first, torch.Tensor) else first
    second = fn()
    if isinstance(first, torch.Tensor):
        assert second.dtype == first.dtype and second.shape == first.shape
        assert same_bits(first, second.cpu()), (first, second)
    return second


def run_both(fn_cpu, fn_dev, *inputs):
    """Run the CPU truth and the mydev call; both must raise alike or both return.

    Inputs that promote to complex32 (a float16 tensor and ``1j``) run through CPU's kernel
    on mydev (the native kernels lack complex32) and are compared like any other.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return run_like_cpu(fn_cpu, fn_dev) or (None, None)


# ---- strategies --------------------------------------------------------------------------------


@st.composite
def partner(draw, sizes):
    """A view whose sizes broadcast with ``sizes`` (rarely one that does not)."""
    drop = draw(st.integers(0, len(sizes)))
    new = [1 if draw(st.integers(0, 3)) == 0 else s for s in sizes[drop:]]
    if new and draw(st.integers(0, 15)) == 0:
        new[draw(st.integers(0, len(new) - 1))] += 1  # usually not broadcastable any more
    new = tuple(new)
    strides = draw(
        st.one_of(
            dense_strides(new),
            st.lists(st.integers(0, 30), min_size=len(new), max_size=len(new)).map(tuple),
        )
    )
    return new, strides, draw(st.integers(0, 3))


_NUMBERS = st.one_of(
    st.booleans(),
    st.integers(-100, 100),
    st.sampled_from((0.5, -2.25, 1.1, 3.0, 0.0, -0.0, 1025.0, float("inf"), float("nan"))),
    st.sampled_from((1 + 2j, -0.5j, 3 + 0j)),
)


@st.composite
def operands(draw, *, nonzero_other=False):
    """``(self_cpu, self_dev), (other_cpu, other_dev)`` for a binary op.

    ``other`` is a broadcasting view, a Python number, or a zero-dim tensor on CPU or mydev;
    one draw in four swaps the broadcast roles (``self`` is the smaller one).
    """
    view = draw(views(max_dims=4))
    dtype = draw(st.sampled_from(DEVICE_DTYPES))
    a = pair(view, dtype, draw(st.integers(0, 9)))
    kind = draw(st.sampled_from(("tensor", "tensor", "tensor", "number", "cpu0", "dev0")))
    other_dtype = draw(st.sampled_from(DEVICE_DTYPES))
    seed = draw(st.integers(0, 9))
    if kind == "number":
        value = draw(_NUMBERS)
        if nonzero_other and value == 0:
            value = 3
        return a, (value, value)
    if kind in ("cpu0", "dev0"):
        scalar = make_values(1, other_dtype, seed, nonzero=nonzero_other).reshape(())
        return a, (scalar, scalar if kind == "cpu0" else scalar.to("mydev"))
    b = pair(draw(partner(view[0])), other_dtype, seed, nonzero=nonzero_other)
    if draw(st.integers(0, 3)) == 0:
        a, b = b, a
    return a, b


@st.composite
def out_tensor(draw, shape_hint):
    """``(out_cpu, out_dev)``: the right shape in a dense layout, a wrong shape, or empty."""
    dtype = draw(st.sampled_from(DEVICE_DTYPES))
    kind = draw(st.sampled_from(("right", "right", "wrong", "empty")))
    if kind == "right":
        sizes = shape_hint
        strides = draw(dense_strides(sizes))
    elif kind == "wrong":
        sizes, strides = (5,), (1,)
    else:
        sizes, strides = (0,), (1,)
    cpu, dev = pair((sizes, strides, 0), dtype, 7)
    return cpu, dev


def _broadcast_shape(*xs):
    shapes = [tuple(x.shape) for x in xs if isinstance(x, torch.Tensor)]
    try:
        return tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        return shapes[0]


# ---- binary arithmetic -------------------------------------------------------------------------


def arithmetic(op: str, form: str, a, b, alpha=1, out=None):
    """Call ``op`` in ``form`` (functional / out / inplace / method) on ``a`` and ``b``."""
    kwargs = {}
    name = op
    if op in ROUNDING_DIVISIONS:
        name, kwargs["rounding_mode"] = "div", op[4:]
    if op in ("add", "sub") and alpha != 1:
        kwargs["alpha"] = alpha
    if form == "inplace":
        return getattr(a, name + "_")(b, **kwargs)
    if form == "out":
        return getattr(torch, name)(a, b, out=out, **kwargs)
    return getattr(torch, name)(a, b, **kwargs)


@given(
    data=st.data(),
    op=st.sampled_from(ARITHMETIC),
    form=st.sampled_from(("functional", "functional", "out", "inplace")),
    alpha=st.sampled_from((1, 1, 2, -1, 0.5, True, 1j)),
)
def test_arithmetic_matches_cpu(data, op, form, alpha):
    (a_cpu, a_dev), (b_cpu, b_dev) = data.draw(operands(nonzero_other=op in ROUNDING_DIVISIONS))
    if form == "inplace" and not can_write(a_cpu):
        form = "functional"
    out_cpu = out_dev = None
    if form == "out":
        out_cpu, out_dev = data.draw(out_tensor(_broadcast_shape(a_cpu, b_cpu)))

    def call(a, b, out):
        x = a.clone() if form == "inplace" else a
        result = arithmetic(op, form, x, b, alpha, out)
        if form == "inplace":
            assert result is x
        if form == "out":
            assert result is out
        return result

    expected, got = run_both(
        lambda: call(a_cpu, b_cpu, out_cpu),
        lambda: twice(lambda: call(a_dev, b_dev, out_dev)),
        a_cpu,
        b_cpu,
    )
    if expected is not None:
        assert_matches(expected, got, tolerance(op.split("_")[0], got.dtype, alpha))


@pytest.mark.parametrize("op", ARITHMETIC)
def test_arithmetic_every_dtype_pair(op):
    """Every pair of supported dtypes, on a small broadcasting pair of layouts."""
    for dtype_a, dtype_b in itertools.product(DEVICE_DTYPES, DEVICE_DTYPES):
        a_cpu, a_dev = pair(((2, 3), (1, 2), 1), dtype_a, 1)
        b_cpu, b_dev = pair(((3,), (2,), 0), dtype_b, 3, nonzero=op in ROUNDING_DIVISIONS)
        expected, got = run_both(
            lambda a=a_cpu, b=b_cpu: arithmetic(op, "functional", a, b),
            lambda a=a_dev, b=b_dev: twice(lambda: arithmetic(op, "functional", a, b)),
            a_cpu,
            b_cpu,
        )
        if expected is not None:
            assert_matches(expected, got, tolerance(op.split("_")[0], got.dtype))


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, *REDUCED, *COMPLEX))
def test_add_with_inexact_alpha(dtype):
    """float32/float64 fuse ``a + alpha * b`` as torch does (bit-exact); float16/bfloat16
    round the product first, as torch's scalar loop does (its vector loop fuses instead)."""
    a_cpu, a_dev = pair(((4, 33), (40, 1), 0), dtype, 1)
    b_cpu, b_dev = pair(((33,), (1,), 0), dtype, 2)
    for alpha in (0.3, -1.7):
        for op in (torch.add, torch.sub):
            expected = op(a_cpu, b_cpu, alpha=alpha)
            got = op(a_dev, b_dev, alpha=alpha)
            if dtype not in REDUCED:
                assert_matches(expected, got, tolerance("add", dtype, alpha))
                continue
            # Exactly torch's scalar loop: the product rounds to the type, then the sum.
            sign = 1.0 if op is torch.add else -1.0
            factor = torch.tensor(sign * alpha).to(dtype).float()
            scalar_loop = (a_cpu.float() + (factor * b_cpu.float()).to(dtype).float()).to(dtype)
            assert_matches(scalar_loop, got)
            # ... and within an ulp of the operands of whatever torch's loop gave.
            scale = a_cpu.float().abs() + (factor * b_cpu.float()).abs()
            error = (got.cpu().float() - expected.float()).abs()
            finite = torch.isfinite(scale) & torch.isfinite(expected.float())
            eps = torch.finfo(dtype).eps
            assert bool((error[finite] <= eps * scale[finite]).all())


@pytest.mark.parametrize("dtype", REDUCED)
def test_reduced_float_rounds_like_cpu(dtype):
    """Every finite float16/bfloat16 pattern through ops that round: sums, products,
    the float32 ``opmath`` loop of a scalar factor/divisor, and floor division."""
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    x_cpu = bits.view(dtype)
    x_cpu = x_cpu[torch.isfinite(x_cpu)]
    y_cpu = x_cpu.flip(0)
    x_dev, y_dev = x_cpu.to("mydev"), y_cpu.to("mydev")
    cases = [
        lambda x, y: x + y,
        lambda x, y: x - y,
        lambda x, y: x * y,
        lambda x, y: x / y,
        lambda x, y: x * 1.1,
        lambda x, y: x / 3,
        lambda x, y: x.div(0.75, rounding_mode="floor"),
        lambda x, y: x.div(y, rounding_mode="floor"),
        lambda x, y: x.div(y[:1], rounding_mode="trunc"),
        lambda x, y: x.div(y, rounding_mode="trunc"),
        lambda x, y: x * torch.tensor([3001], dtype=torch.int32, device=x.device),
    ]
    for case in cases:
        assert_matches(case(x_cpu, y_cpu), case(x_dev, y_dev))


def test_reduced_float_scalar_loop_uses_the_original_value():
    """float16 with a zero-dim or broadcast second operand computes in float32 (torch's
    ``opmath`` loop) with the operand's value before its cast to float16."""
    h_cpu = torch.tensor([3.0, 7.0, 11.0, 1025.0], dtype=torch.float16)
    h_dev = h_cpu.to("mydev")
    i_cpu = torch.tensor([3001], dtype=torch.int32)
    for other_cpu, other_dev in [
        (1.1, 1.1),
        (i_cpu, i_cpu.to("mydev")),
        (i_cpu.expand(4), i_cpu.to("mydev").expand(4)),  # cast to a dense temporary: no opmath
        (torch.tensor(0.75, dtype=torch.float64), torch.tensor(0.75, dtype=torch.float64)),
    ]:
        assert_matches(h_cpu * other_cpu, h_dev * other_dev)
        assert_matches(h_cpu / other_cpu, h_dev / other_dev)
        floor_cpu = h_cpu.div(other_cpu, rounding_mode="floor")
        assert_matches(floor_cpu, h_dev.div(other_dev, rounding_mode="floor"))
    zero_dim_cpu = h_cpu[3].div(torch.tensor(0.75, dtype=torch.float16), rounding_mode="floor")
    zero_dim_dev = h_dev[3].div(
        torch.tensor(0.75, dtype=torch.float16).to("mydev"), rounding_mode="floor"
    )
    assert_matches(zero_dim_cpu, zero_dim_dev)
    assert zero_dim_dev.item() == 1366.0  # float32 all the way; the float16 loop gives 1365


def test_integer_division_semantics():
    a_cpu = torch.tensor([7, -7, 7, -7, 0, -128, 5], dtype=torch.int8)
    b_cpu = torch.tensor([2, 2, -2, -2, 3, -1, 7], dtype=torch.int8)
    a_dev, b_dev = a_cpu.to("mydev"), b_cpu.to("mydev")
    for mode in ("trunc", "floor"):
        assert_matches(a_cpu.div(b_cpu, rounding_mode=mode), a_dev.div(b_dev, rounding_mode=mode))
    assert_matches(a_cpu / b_cpu, a_dev / b_dev)
    assert_matches(a_cpu // b_cpu, a_dev // b_dev)
    big = torch.tensor([2**62, -(2**62) - 5], dtype=torch.int64)
    for mode in ("trunc", "floor"):
        assert_matches(big.div(-3, rounding_mode=mode), big.to("mydev").div(-3, rounding_mode=mode))


def test_float_division_by_zero_gives_inf_and_nan():
    a_cpu = torch.tensor([1.0, -1.0, 0.0, -0.0, float("nan")])
    b_cpu = torch.tensor([0.0, 0.0, 0.0, -0.0, 0.0])
    for mode in (None, "trunc", "floor"):
        expected = a_cpu.div(b_cpu, rounding_mode=mode)
        assert_matches(expected, a_cpu.to("mydev").div(b_cpu.to("mydev"), rounding_mode=mode))


@pytest.mark.parametrize("mode", ("trunc", "floor"))
def test_integer_division_by_zero_raises(mode):
    for dtype in INTEGERS:
        a = torch.tensor([4, 5, 6], dtype=dtype).to("mydev")
        b = torch.tensor([1, 0, 2], dtype=dtype).to("mydev")
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            a.div(b, rounding_mode=mode)
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            a.div(0, rounding_mode=mode)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.tensor([3, 4]).to("mydev") // 0


# ---- comparisons -------------------------------------------------------------------------------


@given(
    data=st.data(),
    op=st.sampled_from(COMPARISONS),
    form=st.sampled_from(("functional", "functional", "out", "inplace")),
)
def test_comparison_matches_cpu(data, op, form):
    (a_cpu, a_dev), (b_cpu, b_dev) = data.draw(operands())
    if form == "inplace" and not can_write(a_cpu):
        form = "functional"
    out_cpu = out_dev = None
    if form == "out":
        out_cpu, out_dev = data.draw(out_tensor(_broadcast_shape(a_cpu, b_cpu)))

    def call(a, b, out):
        if form == "inplace":
            x = a.clone()
            assert getattr(x, op + "_")(b) is x
            return x
        if form == "out":
            assert getattr(torch, op)(a, b, out=out) is out
            return out
        return getattr(torch, op)(a, b)

    expected, got = run_both(
        lambda: call(a_cpu, b_cpu, out_cpu),
        lambda: twice(lambda: call(a_dev, b_dev, out_dev)),
        a_cpu,
        b_cpu,
    )
    if expected is not None:
        assert_matches(expected, got)


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparison_every_dtype_pair(op):
    for dtype_a, dtype_b in itertools.product(DEVICE_DTYPES, DEVICE_DTYPES):
        a_cpu, a_dev = pair(((2, 3), (1, 2), 1), dtype_a, 1)
        b_cpu, b_dev = pair(((3,), (2,), 0), dtype_b, 3)
        expected, got = run_both(
            lambda a=a_cpu, b=b_cpu: getattr(torch, op)(a, b),
            lambda a=a_dev, b=b_dev: twice(lambda: getattr(torch, op)(a, b)),
            a_cpu,
            b_cpu,
        )
        if expected is not None:
            assert_matches(expected, got)


# ---- unary ---------------------------------------------------------------------------------------


@given(
    view=views(max_dims=4),
    dtype=st.sampled_from(DEVICE_DTYPES),
    op=st.sampled_from(("neg", "abs")),
    form=st.sampled_from(("functional", "out", "inplace")),
    data=st.data(),
)
def test_unary_matches_cpu(view, dtype, op, form, data):
    a_cpu, a_dev = pair(view, dtype, 4)
    if form == "inplace" and not writable(view):
        form = "functional"
    out_cpu = out_dev = None
    if form == "out":
        out_cpu, out_dev = data.draw(out_tensor(tuple(a_cpu.shape)))

    def call(a, out):
        if form == "inplace":
            x = a.clone()
            assert getattr(x, op + "_")() is x
            return x
        if form == "out":
            assert getattr(torch, op)(a, out=out) is out
            return out
        return getattr(torch, op)(a)

    expected, got = run_both(
        lambda: call(a_cpu, out_cpu), lambda: twice(lambda: call(a_dev, out_dev))
    )
    if expected is not None:
        assert_matches(expected, got, tolerance(op, dtype))


# ---- where, fill_, zero_ -------------------------------------------------------------------------


@given(data=st.data(), form=st.sampled_from(("functional", "functional", "out")))
def test_where_matches_cpu(data, form):
    (a_cpu, a_dev), (b_cpu, b_dev) = data.draw(operands())
    cond_view = data.draw(st.one_of(partner(_broadcast_shape(a_cpu, b_cpu)), st.just(((), (), 0))))
    cond_dtype = data.draw(
        st.sampled_from((torch.bool, torch.bool, torch.bool, torch.uint8, torch.float32))
    )
    c_cpu, c_dev = pair(cond_view, cond_dtype, 5)
    if data.draw(st.booleans()) and c_cpu.dim() == 0:
        c_dev = c_cpu  # a CPU scalar condition
    if not isinstance(a_cpu, torch.Tensor):
        a_cpu, b_cpu, a_dev, b_dev = b_cpu, a_cpu, b_dev, a_dev  # where(cond, tensor, number)
    out_cpu = out_dev = None
    if form == "out":
        out_cpu, out_dev = data.draw(out_tensor(_broadcast_shape(c_cpu, a_cpu, b_cpu)))

    def call(c, a, b, out):
        if out is None:
            return torch.where(c, a, b)
        assert torch.where(c, a, b, out=out) is out
        return out

    expected, got = run_both(
        lambda: call(c_cpu, a_cpu, b_cpu, out_cpu),
        lambda: call(c_dev, a_dev, b_dev, out_dev),
        a_cpu,
        b_cpu,
    )
    if expected is not None:
        assert_matches(expected, got)


def test_where_scalar_overloads():
    x_cpu = torch.arange(6.0).reshape(2, 3)
    x_dev = x_cpu.to("mydev")
    for make in (
        lambda x: torch.where(x > 2, x, 0.5),
        lambda x: torch.where(x > 2, 1, x.to(torch.int32)),
        lambda x: torch.where(x > 2, 1.5, 2),
        lambda x: x.where(x < 4, -x),
        lambda x: torch.where(x.t() > 2, x.t(), x[:, 0]),
    ):
        assert_matches(make(x_cpu), make(x_dev))


@given(
    view=views(max_dims=4),
    dtype=st.sampled_from(DEVICE_DTYPES),
    value=st.one_of(
        _NUMBERS,
        st.sampled_from((300, -129, -1, 2**40, 65504.0, 65520.0, 1e39, -1e300, 2.7, 2**63 - 1)),
    ),
    as_tensor=st.sampled_from((None, None, "cpu", "mydev")),
)
def test_fill_matches_cpu(view, dtype, value, as_tensor):
    a_cpu, a_dev = pair(view, dtype, 6)
    fill_cpu = fill_dev = value
    if as_tensor == "mydev":  # same device: copy_ (wraps), as on CPU
        fill_cpu = torch.tensor(value)
        fill_dev = fill_cpu.to(as_tensor)
    elif as_tensor == "cpu":  # another device: torch reads .item() and checks its range
        fill_dev = torch.tensor(value)
        fill_cpu = fill_dev.item()

    def call(a, v):
        x = a.clone()
        if x.device.type == "cpu" and x.numel() == 1 and not isinstance(v, torch.Tensor):
            # CPU fills a one-element tensor without Scalar::to's range check; other devices
            # (and mydev) check it: take the check from a two-element CPU fill.
            torch.empty(2, dtype=x.dtype).fill_(v)
        assert x.fill_(v) is x
        return x

    expected, got = run_both(lambda: call(a_cpu, fill_cpu), lambda: call(a_dev, fill_dev))
    if expected is not None:
        assert_matches(expected, got)
    if writable(view):
        zero_cpu, zero_dev = a_cpu.clone().zero_(), a_dev.clone().zero_()
        assert_matches(zero_cpu, zero_dev)


def test_fill_overlapping_and_aliased():
    base_cpu = torch.zeros(3)
    base_dev = base_cpu.to("mydev")
    base_cpu.expand(2, 3).fill_(4.0)
    base_dev.expand(2, 3).fill_(4.0)
    assert same_bits(base_cpu, base_dev)
    x_dev = torch.arange(4.0).to("mydev")
    x_dev.fill_(x_dev[2])  # the value aliases self: read before written
    assert same_bits(x_dev, torch.full((4,), 2.0))
    cpu = torch.zeros(2)
    cpu.fill_(torch.tensor(5.0).to("mydev"))
    assert same_bits(cpu, torch.full((2,), 5.0))


# ---- layouts: the design guide's worked examples -----------------------------------------------


def _strided(sizes, strides):
    n = storage_elements(sizes, strides)
    return torch.arange(float(n)).as_strided(sizes, strides).to("mydev").as_strided(sizes, strides)


@pytest.mark.parametrize(
    "a_layout,b_layout,expected",
    [
        (((2, 3, 4, 5), (60, 1, 15, 3)), ((3, 4, 5), (20, 5, 1)), (60, 1, 15, 3)),
        (((2, 3, 1, 1), (3, 1, 3, 3)), ((3, 1, 1), (1, 1, 1)), (3, 1, 3, 3)),
        (((2, 3, 1, 1), (3, 1, 3, 3)), ((3, 1, 3), (1, 3, 3)), (9, 1, 3, 3)),
    ],
)
def test_worked_example_output_strides(a_layout, b_layout, expected):
    a = _strided(*a_layout)
    b = _strided(*b_layout)
    for result in (a + b, a * b, a == b, torch.where(a > 1, a, b)):
        assert result.stride() == expected
    cpu = a.cpu().as_strided(*a_layout) + b.cpu().as_strided(*b_layout)
    assert cpu.stride() == expected


def test_transposed_dense_input_keeps_its_strides():
    a = torch.randn(3, 4).t()
    assert (a + a).stride() == (1, 4)
    d = a.to("mydev")
    assert (d + d).stride() == (1, 4)
    assert (-d).stride() == (1, 4)


# ---- errors and warnings -------------------------------------------------------------------------


def _both_raise(fn):
    """``fn(device)`` raises on CPU and on mydev with the same type and first line."""
    with pytest.raises(Exception) as cpu:
        fn("cpu")
    with pytest.raises(Exception) as dev:
        fn("mydev")
    assert type(dev.value) is type(cpu.value)
    assert str(dev.value).splitlines()[0] == str(cpu.value).splitlines()[0]


@pytest.mark.parametrize(
    "fn",
    [
        lambda d: torch.ones(3, device=d) + torch.ones(2, device=d),
        lambda d: torch.ones(3, device=d).add_(torch.ones(2, 3, device=d)),
        lambda d: torch.ones(3, dtype=torch.int64, device=d).add_(1.5),
        lambda d: torch.add(
            torch.ones(3, device=d), 1, out=torch.empty(3, dtype=torch.int64, device=d)
        ),
        lambda d: torch.add(torch.ones(3, dtype=torch.int64, device=d), 1, alpha=0.5),
        lambda d: torch.add(torch.ones(3, device=d), 1, alpha=True),
        lambda d: torch.add(torch.ones(3, device=d), 1, alpha=1j),
        lambda d: torch.add(torch.ones(3, dtype=torch.int8, device=d), 1, alpha=1000),
        lambda d: torch.ones(3, dtype=torch.bool, device=d) - True,
        lambda d: torch.ones(3, device=d) - True,
        lambda d: -torch.ones(3, dtype=torch.bool, device=d),
        lambda d: torch.ones(3, dtype=torch.bool, device=d).abs(),
        lambda d: torch.ones(3, dtype=torch.complex64, device=d).abs_(),
        lambda d: torch.abs(
            torch.ones(3, dtype=torch.complex64, device=d),
            out=torch.empty(3, dtype=torch.int64, device=d),
        ),
        lambda d: torch.neg(
            torch.ones(3, device=d), out=torch.empty(3, dtype=torch.int64, device=d)
        ),
        lambda d: torch.ones(3, device=d).div(2, rounding_mode="round"),
        lambda d: torch.ones(3, dtype=torch.bool, device=d).div(True, rounding_mode="floor"),
        lambda d: torch.ones(3, dtype=torch.complex64, device=d).div(2, rounding_mode="trunc"),
        lambda d: torch.ones(3, dtype=torch.complex64, device=d) < 1,
        lambda d: torch.empty(3, dtype=torch.int8, device=d).fill_(300),
        lambda d: torch.empty(3, dtype=torch.float16, device=d).fill_(1e6),
        lambda d: torch.empty(3, device=d).fill_(1 + 2j),
        lambda d: torch.empty(3, dtype=torch.int32, device=d).fill_(float("nan")),
        lambda d: torch.empty(3, device=d).fill_(torch.ones(2, device=d)),
        lambda d: torch.where(torch.ones(3, device=d), 1.0, 2.0),
        lambda d: torch.where(
            torch.ones(3, device=d) > 0,
            torch.ones(3, device=d),
            torch.ones(3, device=d),
            out=torch.empty(3, dtype=torch.float64, device=d),
        ),
        lambda d: torch.ones(1, device=d).expand(3).add_(1),
        lambda d: (lambda x: x[1:].add_(x[:-1]))(torch.arange(5.0, device=d)),
    ],
)
def test_errors_match_cpu(fn):
    _both_raise(fn)


def test_mixing_devices():
    x = torch.ones(3, device="mydev")
    assert_matches(
        torch.ones(3) + torch.tensor(2.0, dtype=torch.float64),
        x + torch.tensor(2.0, dtype=torch.float64),
    )
    with pytest.raises(RuntimeError, match="same device"):
        x + torch.ones(3)
    with pytest.raises(RuntimeError, match="same device"):
        torch.add(x, x, out=torch.empty(3))


def test_promotion_of_numbers_and_zero_dim_tensors():
    """A Python number ranks below a zero-dim tensor, which ranks below dim > 0 tensors."""
    i_cpu = torch.arange(4, dtype=torch.int32)
    i_dev = i_cpu.to("mydev")
    for other in (1.5, torch.tensor(1.5, dtype=torch.float64), 2, True, 1j):
        assert_matches(i_cpu + other, i_dev + other)
        assert_matches(i_cpu * other, i_dev * other)
    h_cpu = i_cpu.to(torch.float16)
    assert_matches(
        h_cpu + torch.tensor(1.5, dtype=torch.float64),
        h_cpu.to("mydev") + torch.tensor(1.5, dtype=torch.float64),
    )
    assert_matches(torch.add(2, i_cpu), torch.add(2, i_dev))


def test_out_resize_warns_like_cpu():
    a = torch.arange(6.0).reshape(2, 3)
    for device in ("cpu", "mydev"):
        out = torch.empty(5, device=device)
        with pytest.warns(UserWarning, match="was resized"):
            torch.add(a.to(device), 1, out=out)
        assert out.shape == (2, 3)
        out = torch.empty(0, device=device)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            torch.mul(a.to(device).t(), 2, out=out)
        assert out.stride() == (1, 3)


def test_where_uint8_condition_warns():
    cond = torch.tensor([1, 0, 1], dtype=torch.uint8)
    expected = torch.where(cond, 1.0, 2.0)
    got = torch.where(cond.to("mydev"), 1.0, 2.0)
    assert_matches(expected, got)


def test_zero_elements():
    a = torch.empty(0, 3, device="mydev")
    assert (a + 1).shape == (0, 3)
    assert (a == torch.ones(3, device="mydev")).shape == (0, 3)
    assert a.fill_(2).shape == (0, 3)
    assert torch.where(a > 0, a, 1.0).shape == (0, 3)


@pytest.mark.parametrize("op", [torch.mul, torch.div, torch.floor_divide])
def test_reduced_float_by_an_empty_view_at_its_storage_end(op):
    """float16 ``x * y`` with ``y`` an empty stride-0 view one element into a one-element
    storage: the iteration has no element, so nothing reads ``y`` (the opmath loop's scalar
    read once ran past the storage; found by hypothesis)."""
    x_cpu = torch.tensor(1.5, dtype=torch.float16)
    y_cpu = torch.tensor([2.0], dtype=torch.float16).as_strided((0,), (0,), 1)
    x = x_cpu.to("mydev")
    y = torch.tensor([2.0], dtype=torch.float16, device="mydev").as_strided((0,), (0,), 1)
    assert y.storage_offset() == 1 and y.untyped_storage().nbytes() == 2
    expected, got = op(x_cpu, y_cpu), op(x, y)
    assert got.shape == expected.shape == (0,) and got.dtype == expected.dtype


def test_native_ops_do_not_fall_back():
    torch_mydev.reset_fallback_stats()
    x = torch.arange(6.0).reshape(2, 3).to("mydev")
    i = torch.arange(6).reshape(2, 3).to("mydev")
    results = [
        x + 1,
        x - x,
        x * 2,
        x / 3,
        x // 2,
        i.div(2, rounding_mode="trunc"),
        -x,
        x.abs(),
        x == 1,
        x != i,
        x < 2,
        x <= i,
        x > 0,
        x >= 1,
        torch.where(x > 2, x, i),
        torch.add(x, x, out=torch.empty(0, device="mydev")),
        x.clone().add_(1).mul_(2).sub_(1).div_(2),
        x.clone().fill_(1).zero_(),
        x.clone().eq_(1),
        x.clone().neg_().abs_(),
        x.clone().floor_divide_(2),
        torch.floor_divide(i, 2, out=torch.empty(0, dtype=torch.int64, device="mydev")),
        2 - x,
        torch.zeros(2, device="mydev"),
        torch.full((2,), 3.0, device="mydev"),
    ]
    del results
    assert torch_mydev.fallback_stats() == {}
