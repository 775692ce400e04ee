"""The dtypes copy_ casts and c10::convert's route between them, against torch CPU.

Truth: CPU's own copies. Which dtypes ``copy_kernel`` casts or only moves (every dtype torch
has is tried), and, for every pair of cast dtypes, that casting step by step along
``route`` on CPU gives the bytes of CPU's direct cast: no step of the route rounds where
c10 does not (that each step is one c10 takes is pinned by the known routes below, and by
the kernels' bit-exact tests, which follow it). No device is needed.
"""

from __future__ import annotations

import itertools
import re
import warnings

import torch

from tests.support.dtypes import EVERY_DTYPE
from torch_mydev_rules.iterator import explain
from torch_mydev_rules.iterator.casts import CAST_DTYPES, MOVE_ONLY_DTYPES, conversion, route
from torch_mydev_rules.iterator.promotion import dtype_name

QUANTIZED = {torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4}


def _works(fn) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
    except NotImplementedError:
        return False
    return True


def test_the_dtype_tables_are_what_cpu_copies() -> None:
    """CAST_DTYPES: CPU casts them to float32 and back; MOVE_ONLY_DTYPES: CPU clones them
    (a transposed copy too) but casts neither way; every other dtype CPU does not copy."""
    for dtype in EVERY_DTYPE:
        if dtype in QUANTIZED:
            continue
        x = torch.zeros(2, 2 * dtype.itemsize, dtype=torch.uint8).view(dtype)
        moves = _works(lambda x=x: x.t().contiguous())
        casts = _works(lambda x=x: x.to(torch.float32)) and _works(
            lambda d=dtype: torch.zeros(2).to(d)
        )
        assert (dtype in CAST_DTYPES) == casts, dtype
        assert (dtype in CAST_DTYPES or dtype in MOVE_ONLY_DTYPES) == moves, dtype


def _values(src: torch.dtype, dst: torch.dtype) -> torch.Tensor:
    """Strided (so CPU's scalar loops run) values of ``src``: every byte pattern, except
    in-range numbers where a floating value meets an integer destination."""
    n = 2048
    if (
        dst.is_floating_point
        or dst.is_complex
        or dst == torch.bool
        or not (src.is_floating_point or src.is_complex)
    ):
        g = torch.Generator().manual_seed(CAST_DTYPES.index(src) * 64 + CAST_DTYPES.index(dst))
        raw = torch.randint(0, 256, (2 * n * src.itemsize,), dtype=torch.uint8, generator=g)
        if src == torch.bool:
            raw &= 1
        return raw.view(src)[::2]
    low = 0.0 if not dst.is_signed else -60.0
    return torch.linspace(low, 60.0, 2 * n, dtype=torch.float64).to(src)[::2]


def _strided_copy(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x.to(dtype)`` into every other element of a new tensor: CPU's scalar loop (its
    vectorised float32 -> bfloat16 loop writes other NaN bits)."""
    out = torch.empty(2 * x.numel(), dtype=dtype)[::2]
    return out.copy_(x)


def test_casting_along_the_route_is_cpus_cast() -> None:
    """For every pair of cast dtypes: ``x.to(r1).to(r2)...`` equals ``x.to(dst)``, bytes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # complex -> real, complex32 is experimental
        for src, dst in itertools.product(CAST_DTYPES, CAST_DTYPES):
            x = _values(src, dst)
            steps = route(src, dst)
            assert steps[0] == src and steps[-1] == dst
            chained = x
            for dtype in steps[1:]:
                chained = _strided_copy(chained, dtype)
            direct = _strided_copy(x, dst)
            bytes_of = [t.contiguous().view(torch.uint8) for t in (chained, direct)]
            same = torch.equal(*bytes_of)
            assert same, (src, dst, steps)


def test_routes_name_c10s_intermediate_types() -> None:
    assert route(torch.float64, torch.float8_e4m3fn) == (
        torch.float64,
        torch.float32,
        torch.float8_e4m3fn,
    )
    assert route(torch.complex32, torch.float16) == (torch.complex32, torch.float16)
    assert route(torch.complex128, torch.complex32) == (
        torch.complex128,
        torch.complex64,
        torch.complex32,
    )
    assert route(torch.float32, torch.uint8) == (torch.float32, torch.int64, torch.uint8)
    assert route(torch.uint64, torch.int8) == (torch.uint64, torch.int8)


def test_explain_ends_copies_with_the_conversion() -> None:
    """explain's last row for copy_, clone and contiguous is the kernel's conversion."""
    f8 = torch.empty(3, 4, dtype=torch.float8_e5m2)
    report = explain("copy_", f8, torch.empty(4, 3, dtype=torch.float64).t())
    assert report.steps[-1] == (
        "copy_kernel",
        "cast float64 -> float32 -> float8_e5m2 (c10::convert)",
    )
    assert explain("clone", f8.t()).steps[-1] == (
        "copy_kernel",
        "same dtype: 1-byte elements move unchanged",
    )
    assert explain("contiguous", torch.empty(4, 3, dtype=torch.uint64).t()).steps[-1] == (
        "copy_kernel",
        "same dtype: 8-byte elements move unchanged",
    )
    bits = explain("copy_", torch.empty(3, dtype=torch.bits16), torch.empty(3, dtype=torch.int16))
    assert bits.steps[-1] == ("copy_kernel", 'no "copy_" loop for Bits16: NotImplementedError')
    assert "copy_kernel" in str(report)
    assert conversion(torch.uint3, torch.uint3) == (
        'no "copy_kernel" loop for UInt3: NotImplementedError'
    )


def test_dtype_names_are_the_ones_cpu_errors_print() -> None:
    """``dtype_name`` of every dtype whose name a CPU error prints (neg, fill_, clone)."""
    seen = 0
    for dtype in EVERY_DTYPE:
        if dtype in QUANTIZED:
            continue
        x = torch.zeros(2 * dtype.itemsize, dtype=torch.uint8).view(dtype)
        for call in (lambda x=x: x.neg(), lambda x=x: x.fill_(1), lambda x=x: x.clone()):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    call()
            except RuntimeError as error:
                found = re.search(r"not implemented for '(\w+)'", str(error))
                if found:
                    assert found.group(1) == dtype_name(dtype)
                    seen += 1
    assert seen >= 20
