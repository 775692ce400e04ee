"""Every dtype torch CPU has, on mydev: factories, the copy family, and the ops CPU runs.

Truth: the same call on CPU tensors holding the same bytes. The copy family (``copy_``,
``clone``, ``contiguous``, ``.to()``, ``.cpu()``) must give CPU's bits and strides for every
dtype CPU copies -- the 12 the native kernels compute in, uint16/32/64, complex32, the five
float8 types -- and move the bits of the dtypes CPU only moves (bits*, float4_e2m1fn_x2);
where CPU raises (uint1..7, int1..7, casts of bits types, a negative bit on a dtype
``neg`` lacks), mydev raises the same exception type. ``fill_``, ``zero_``, the elementwise
ops and the reductions on the dtypes the native kernels lack run CPU's kernel (counted in
``fallback_stats``) and so give CPU's result or CPU's exception. Random layouts of the cast
dtypes are drawn by ``test_copy.py`` / ``test_conversions.py`` (``CAST_DTYPES``).
"""

from __future__ import annotations

import warnings

import pytest
import torch

import torch_mydev
from tests.support.dtypes import COPY_DTYPES, DEVICE_DTYPES, EVERY_DTYPE, MOVE_ONLY_DTYPES
from tests.support.tensors import same_bits, same_layout, values
from torch_mydev.kernels import dtypes as kernel_dtypes
from torch_mydev_rules.iterator import casts

NEW_DTYPES = tuple(d for d in COPY_DTYPES if d not in DEVICE_DTYPES)
STORED = COPY_DTYPES + MOVE_ONLY_DTYPES
# Dtypes torch can allocate but CPU cannot copy at all (sub-byte integers).
UNCOPYABLE = tuple(
    getattr(torch, f"{kind}{bits}") for kind in ("int", "uint") for bits in range(1, 8)
)
QUANTIZED = (torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def test_kernel_tables_are_the_rules_tables() -> None:
    """The kernels' dtype table covers exactly what the rules say CPU copies."""
    assert set(kernel_dtypes.COPY_DTYPES) == set(casts.CAST_DTYPES) == set(COPY_DTYPES)
    movable = set(casts.CAST_DTYPES) | set(casts.MOVE_ONLY_DTYPES)
    assert set(kernel_dtypes.STORAGE_DTYPES) == movable == set(STORED)
    assert set(kernel_dtypes.SUPPORTED_DTYPES) == set(DEVICE_DTYPES)


def _random_bits(dtype: torch.dtype, n: int, seed: int) -> torch.Tensor:
    """``n`` CPU elements of ``dtype`` with random bytes (bool: 0/1)."""
    g = torch.Generator().manual_seed(seed)
    raw = torch.randint(0, 256, (n * dtype.itemsize,), dtype=torch.uint8, generator=g)
    if dtype == torch.bool:
        raw &= 1
    return raw.view(dtype)


_VIEWS = {
    "contiguous": lambda t: t.view(2, 3, 4, 5),
    "transposed": lambda t: t.view(6, 20).t(),
    "channels_last": lambda t: t.view(2, 3, 4, 5).permute(0, 2, 3, 1),
    "sliced": lambda t: t.view(6, 20)[1::2, 3:17:3],
    "broadcast": lambda t: t[:5].view(1, 5).expand(4, 5),
}


def _outcome(fn):
    """``(result, None)`` or ``(None, exception type)``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(), None
    except RuntimeError as error:
        return None, type(error)


@pytest.mark.parametrize("dtype", STORED, ids=_name)
@pytest.mark.parametrize("view", list(_VIEWS))
def test_copy_family_moves_every_dtype_bit_for_bit(dtype: torch.dtype, view: str) -> None:
    """``.to('mydev')``, ``.cpu()``, ``clone``, ``contiguous`` (both formats), ``copy_`` in
    the three directions and ``.to(memory_format=)``: CPU's strides and bytes, NaN payloads
    and the move-only dtypes included."""
    make = _VIEWS[view]
    base = _random_bits(dtype, 120, seed=STORED.index(dtype))
    cpu = make(base)
    dev = make(base.to("mydev"))
    assert dev.device.type == "mydev" and same_layout(cpu, dev) and same_bits(cpu, dev)
    assert same_bits(dev.cpu(), cpu)
    calls = [
        lambda x: x.clone(),
        lambda x: x.contiguous(),
        lambda x: x.clone(memory_format=torch.contiguous_format),
    ]
    if cpu.dim() == 4:
        calls += [
            lambda x: x.contiguous(memory_format=torch.channels_last),
            lambda x: x.to(memory_format=torch.channels_last),
        ]
    for call in calls:
        expected, got = call(cpu), call(dev)
        assert got.device.type == "mydev" and same_layout(expected, got), (expected.stride(),)
        assert same_bits(expected, got)
    if view == "broadcast":
        return
    for dst_device, src in (("mydev", dev), ("mydev", cpu), ("cpu", dev)):
        expected = torch.empty_like(cpu, device="cpu").copy_(cpu)
        got = torch.empty_like(cpu, device=dst_device).copy_(src)
        assert got.device.type == dst_device and same_bits(expected, got)


@pytest.mark.parametrize("src", NEW_DTYPES, ids=_name)
def test_new_dtypes_cast_to_and_from_every_dtype(src: torch.dtype) -> None:
    """Every pair with a new dtype on one side, both directions, a transposed source: the
    values of ``helpers.values`` (in range for any integer destination)."""
    for other in COPY_DTYPES:
        for a, b in ((src, other), (other, src)):
            low = 0.0 if b in (torch.uint8, torch.uint16, torch.uint32, torch.uint64) else -100.0
            cpu = values(60, a, seed=7, low=low).view(6, 10).t()
            dev = cpu.to("mydev")
            expected, error = _outcome(lambda x=cpu, b=b: x.to(b))
            assert error is None
            for got in (dev.to(b), cpu.to("mydev", b), dev.to("cpu", b)):
                assert same_layout(expected, got) and same_bits(expected, got), (a, b)


def _same_bytes_on(device: str, cpu: torch.Tensor) -> torch.Tensor:
    """``cpu``'s bytes in a tensor of its dtype on ``device`` (through uint8, which both
    devices copy: ``.to`` of the dtype itself may be what is tested)."""
    raw = cpu.view(torch.uint8).to(device)
    return raw.view(cpu.dtype)


@pytest.mark.parametrize("dtype", UNCOPYABLE + MOVE_ONLY_DTYPES, ids=_name)
def test_what_cpu_cannot_copy_raises_cpus_exception(dtype: torch.dtype) -> None:
    """Same-dtype copies of sub-byte integers and every cast to or from them or the bits
    and float4 types raise ``NotImplementedError`` naming the dtype, as CPU; what CPU does
    copy of them (same-dtype moves of bits and float4) gives CPU's bytes."""
    base = _random_bits(torch.uint8, 4, seed=9).view(dtype)
    calls = {
        "clone": lambda x: x.clone(),
        "t().contiguous()": lambda x: x.view(2, 2).t().contiguous(),
        "to float32": lambda x: x.to(torch.float32),
        "from int16": lambda x: torch.zeros(4, dtype=torch.int16, device=x.device).to(dtype),
        "copy_ from uint8": lambda x: x.clone().copy_(torch.zeros(4, dtype=torch.uint8)),
        "to the other device": lambda x: x.to("cpu" if x.device.type == "mydev" else "mydev"),
    }
    for name, call in calls.items():
        expected = _outcome(lambda call=call: call(base))
        got = _outcome(lambda call=call: call(_same_bytes_on("mydev", base)))
        if expected[1] is None:
            assert got[1] is None, (name, got)
            assert same_bits(expected[0].cpu(), got[0].cpu()), name
        else:
            assert got[1] is expected[1], (name, got, expected)


def test_copy_errors_name_the_dtype_as_cpu() -> None:
    """The message names what CPU's dispatch lacks: the dtype CPU cannot move, or in a cast
    the destination first, then the source."""
    cases = [
        (torch.uint1, torch.uint1, "\"copy_kernel\" not implemented for 'UInt1'"),
        (torch.bits16, torch.int16, "\"copy_\" not implemented for 'Bits16'"),
        (torch.int16, torch.bits16, "\"copy_\" not implemented for 'Bits16'"),
        (torch.int4, torch.bits8, "\"copy_\" not implemented for 'Int4'"),
        (torch.float4_e2m1fn_x2, torch.uint8, "not implemented for 'Float4_e2m1fn_x2'"),
    ]
    for dst, src, message in cases:
        for device in ("cpu", "mydev"):
            with pytest.raises(NotImplementedError, match=message.replace("'", ".")):
                torch.empty(3, dtype=dst, device=device).copy_(
                    torch.empty(3, dtype=src, device=device)
                )


@pytest.mark.parametrize("dtype", COPY_DTYPES, ids=_name)
def test_lazy_negative_and_conjugate_bits_resolve_as_cpu(dtype: torch.dtype) -> None:
    """``_neg_view`` / ``conj`` sources: negated as CPU's neg kernel does, or its
    ``NotImplementedError`` where it has no loop (bool, unsigned, float8)."""
    cpu = values(12, dtype, seed=3).view(3, 4).t()
    dev = cpu.to("mydev")
    calls = [lambda x: torch._neg_view(x).clone(), lambda x: torch._neg_view(x).to(torch.float64)]
    if dtype.is_complex:
        calls += [lambda x: x.conj().clone(), lambda x: x.conj().to(torch.complex128)]
    for call in calls:
        (expected, cpu_error), (got, dev_error) = (
            _outcome(lambda call=call: call(cpu)),
            _outcome(lambda call=call: call(dev)),
        )
        assert dev_error is cpu_error
        if cpu_error is None:
            assert same_layout(expected, got) and same_bits(expected, got)


@pytest.mark.parametrize("dtype", [d for d in EVERY_DTYPE if d not in QUANTIZED], ids=_name)
def test_empty_factories_take_every_dtype(dtype: torch.dtype) -> None:
    """empty, empty_strided, empty_like (channels_last), new_empty: CPU's dtype, sizes and
    strides on mydev for every dtype torch has (quantized tensors: ops/quantized.py)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex32 is "experimental"
        made = {
            device: [
                torch.empty(2, 3, dtype=dtype, device=device),
                torch.empty_strided((2, 3), (1, 4), dtype=dtype, device=device),
                torch.empty_like(
                    torch.empty(2, 3, 4, 5, device=device).to(memory_format=torch.channels_last),
                    dtype=dtype,
                ),
                torch.empty(1, device=device).new_empty((4, 2), dtype=dtype),
            ]
            for device in ("cpu", "mydev")
        }
    for expected, got in zip(made["cpu"], made["mydev"], strict=True):
        assert got.device.type == "mydev" and same_layout(expected, got)


def _op_calls(dtype: torch.dtype) -> dict:
    one = values(1, dtype, seed=11)[0]  # a zero-dim CPU tensor of the dtype
    return {
        "fill_": lambda x: x.clone().fill_(2),
        "fill_ tensor": lambda x: x.clone().fill_(one.to(x.device)),
        "zero_": lambda x: x.clone().zero_(),
        "zeros_like": lambda x: torch.zeros_like(x),
        "ones": lambda x: torch.ones(3, dtype=dtype, device=x.device),
        "full": lambda x: torch.full((2, 2), 3, dtype=dtype, device=x.device),
        "add": lambda x: x + x,
        "add number": lambda x: x + 1,
        "mul": lambda x: x * x,
        "mul number": lambda x: x * 2,
        "eq": lambda x: x == x,
        "eq number": lambda x: x == 1,
        "ne": lambda x: x != x[:1],
        "lt": lambda x: x < x,
        "sub": lambda x: x - x,
        "div": lambda x: x / 2,
        "floor_divide": lambda x: x // 2,
        "mul_": lambda x: x.clone().mul_(x),
        "mul out": lambda x: torch.mul(x, x, out=torch.empty_like(x)),
        "eq out": lambda x: torch.eq(x, 1, out=torch.empty(x.shape, dtype=torch.bool).to(x.device)),
        "relu": lambda x: torch.relu(x),
        "clamp_min": lambda x: x.clamp_min(0),
        "neg": lambda x: -x,
        "abs": lambda x: x.abs(),
        "where": lambda x: torch.where(x.real.bool() if x.is_complex() else x.bool(), x, x[0]),
        "sum": lambda x: x.sum(),
        "sum dim": lambda x: x.sum(0),
        "mean": lambda x: x.mean(),
        "amax": lambda x: x.amax(),
        "max": lambda x: x.max(),
        "cat": lambda x: torch.cat([x, x]),
        "index": lambda x: x[[0, 2]],
    }


@pytest.mark.parametrize("dtype", NEW_DTYPES, ids=_name)
def test_ops_on_new_dtypes_give_cpus_result_or_error(dtype: torch.dtype) -> None:
    """What CPU computes for these dtypes, mydev computes (through CPU's kernel, counted as
    a fallback); what CPU refuses, mydev refuses with the same exception type."""
    cpu = values(12, dtype, seed=5).view(4, 3)
    dev = cpu.to("mydev")
    torch_mydev.reset_fallback_stats()
    ran = 0
    for name, call in _op_calls(dtype).items():
        (expected, cpu_error), (got, dev_error) = (
            _outcome(lambda call=call: call(cpu)),
            _outcome(lambda call=call: call(dev)),
        )
        assert dev_error is cpu_error, (name, cpu_error, dev_error)
        if cpu_error is None:
            ran += 1
            assert got.device.type == "mydev", name
            assert same_layout(expected, got) and same_bits(expected, got), name
    assert ran >= 8  # fill_, zero_, zeros_like, ones, full, mul, eq, index at least
    stats = torch_mydev.fallback_stats()
    assert stats.get("aten::fill_.Scalar", 0) >= 1 and stats.get("aten::mul.Tensor", 0) >= 1


def test_float16_times_imaginary_unit_is_complex32_as_on_cpu() -> None:
    """A promotion that reaches complex32 from native dtypes runs CPU's kernel too."""
    h = torch.tensor([1.5, -2.0, 65504.0], dtype=torch.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = h * 1j
        got = h.to("mydev") * 1j
    assert got.dtype == torch.complex32 and got.device.type == "mydev"
    assert same_bits(expected, got)


@pytest.mark.parametrize(
    "dtype", [torch.uint64, torch.complex32, torch.float8_e5m2, torch.bits16], ids=_name
)
def test_repeated_copies_take_the_recorded_paths(dtype: torch.dtype) -> None:
    """The third call of a layout runs from the stub's record (``ops/replay.py``): the same
    bytes as the first, for the dtypes the records move by their item size."""
    base = _random_bits(dtype, 240, seed=4)
    cpu = base.view(12, 20).t()
    dev = base.to("mydev").view(12, 20).t()
    dst = torch.empty(20, 12, dtype=dtype, device="mydev")
    expected = cpu.contiguous()
    for _ in range(4):
        assert same_bits(expected, dev.contiguous())
        assert same_bits(expected, dst.copy_(dev))
