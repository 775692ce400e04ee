"""Casting copies against torch CPU: every dtype pair, every layout, special values.

Truth: ``dst_view.copy_(src_view)`` on CPU (``cpu/CopyKernel.cpp`` ``copy_kernel``,
``c10::convert``), compared byte for byte over the whole destination storage.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from torch_mydev.kernels.copy import kernel as kcopy

from .strategies import dtypes, layouts, sizes
from .truth import (
    DTYPES,
    Layout,
    kernel_copy,
    make_values,
    run_case,
    storage_bytes,
)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# One test per source dtype (the leak-check fixture costs a gc.collect() per test).
@pytest.mark.parametrize("src", DTYPES, ids=_name)
def test_every_pair_is_bit_exact(src: torch.dtype) -> None:
    """All 144 pairs, three layouts: contiguous (direct views), strided source with an offset
    into a transposed destination (gather + scatter), and a broadcast source row."""
    for dst in DTYPES:
        rng = np.random.default_rng(DTYPES.index(src) * 16 + DTYPES.index(dst))
        values = make_values(src, dst, 600, rng)
        run_case(values, Layout((600,), (1,), 0), dst, Layout((600,), (1,), 0), rng)
        run_case(values, Layout((20, 15), (1, 40), 3), dst, Layout((20, 15), (1, 20), 1), rng)
        run_case(values, Layout((7, 33), (0, 1), 5), dst, Layout((7, 33), (33, 1), 0), rng)


@given(data=st.data())
def test_any_pair_any_layout(data: st.DataObject) -> None:
    """Random pair, shape (0/1 sizes included), layouts, broadcast, offsets and dim order."""
    src, dst = data.draw(dtypes), data.draw(dtypes)
    shape = data.draw(sizes)
    src_layout = data.draw(layouts(shape, broadcast=True))
    dst_layout = data.draw(layouts(shape))
    order = data.draw(st.permutations(range(len(shape))))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    values = make_values(src, dst, src_layout.storage_numel(slack=3), rng)
    run_case(values, src_layout, dst, dst_layout, rng, order)


CHUNK_PAIRS = [
    (torch.float32, torch.bfloat16),
    (torch.complex128, torch.float16),
    (torch.int64, torch.float32),
    (torch.bool, torch.complex64),
    (torch.float64, torch.int8),
    (torch.uint8, torch.int16),
]


def test_several_chunks() -> None:
    """More than ``CAST_CHUNK`` elements, both sides strided: chunk edges fall mid-row."""
    assert kcopy.CAST_CHUNK < 300 * 250
    for src, dst in CHUNK_PAIRS:
        rng = np.random.default_rng(7)
        values = make_values(src, dst, 300 * 250 + 2, rng)
        run_case(values, Layout((300, 250), (1, 300), 2), dst, Layout((300, 250), (251, 1), 1), rng)
        run_case(values, Layout((75000,), (1,), 1), dst, Layout((75000,), (1,), 0), rng)


@pytest.mark.parametrize("src", [torch.float16, torch.bfloat16], ids=_name)
def test_every_half_and_bfloat16_bit_pattern(src: torch.dtype) -> None:
    """All 65536 patterns (subnormals, infinities, every NaN payload), contiguous and strided,
    to every floating, complex and bool dtype."""
    values = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16).view(src)
    rng = np.random.default_rng(0)
    n = values.numel()
    for dst in (
        torch.bool,
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.complex64,
        torch.complex128,
    ):
        run_case(values, Layout((n,), (1,), 0), dst, Layout((n,), (1,), 0), rng)
        run_case(values, Layout((n // 2,), (2,), 1), dst, Layout((n // 2,), (1,), 0), rng)


def test_rounding_to_half_and_bfloat16() -> None:
    """Many patterns near ties, subnormal and overflow edges (float64 and int64 round twice)."""
    rng = np.random.default_rng(3)
    for src in (torch.float32, torch.float64, torch.int32, torch.int64):
        for dst in (torch.float16, torch.bfloat16):
            values = make_values(src, dst, 1 << 15, rng)
            n = values.numel()
            run_case(values, Layout((n,), (1,), 0), dst, Layout((n,), (1,), 0), rng)
            run_case(values, Layout((n // 3,), (3,), 0), dst, Layout((n // 3,), (1,), 0), rng)


def _cast(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    out = torch.empty(values.shape, dtype=dtype)
    kernel_copy(out, values)
    return out


def _bits(t: torch.Tensor) -> list[int]:
    width = {2: (torch.int16, 0xFFFF), 4: (torch.int32, 0xFFFFFFFF)}[t.element_size()]
    return [v & width[1] for v in t.reshape(-1).view(width[0]).tolist()]


def test_known_answers() -> None:
    """The conversions torch chooses where C++ leaves a choice, pinned down by value."""
    # float64 -> bfloat16/half goes through float32: 1 + 2**-8 + 2**-30 rounds to the tie
    # 1 + 2**-8 first, which then rounds to even (1.0), not up as one rounding would.
    assert _bits(
        _cast(torch.tensor([1 + 2**-8 + 2**-30], dtype=torch.float64), torch.bfloat16)
    ) == [0x3F80]
    assert _bits(
        _cast(torch.tensor([1 + 2**-11 + 2**-40], dtype=torch.float64), torch.float16)
    ) == [0x3C00]
    # int64 -> bfloat16 also through float32; int64 -> float32 rounds once, directly.
    assert _bits(_cast(torch.tensor([(1 << 24) + (1 << 16) + 1]), torch.bfloat16)) == [0x4B80]
    big = (1 << 60) + (1 << 36) + 1
    assert int(_cast(torch.tensor([big]), torch.float32).item()) == (1 << 60) + (1 << 37)
    # negative floating -> uint8 goes through int64 (c10's uint8 specialisation).
    assert _cast(torch.tensor([-3.7, -0.9, 255.9]), torch.uint8).tolist() == [253, 0, 255]
    # NaN -> bfloat16: 0xFFFF where torch's float32 vector loop runs, else c10's 0x7FC0.
    nan = torch.tensor([float("nan"), -float("nan")] * 20)
    assert set(_bits(_cast(nan, torch.bfloat16))) == {0xFFFF}
    assert set(_bits(_cast(nan[::2], torch.bfloat16))) == {0x7FC0}
    assert set(_bits(_cast(nan[:1].expand(5), torch.bfloat16))) == {0x7FC0}
    assert set(_bits(_cast(nan.double(), torch.bfloat16))) == {0x7FC0}
    assert _bits(_cast(torch.tensor(float("nan")), torch.bfloat16)) == [0x7FC0]
    # half NaNs widen with the quiet bit (F16C).
    half_nan = torch.tensor([0x7C01, 0x7E00], dtype=torch.int16).view(torch.float16)
    assert _bits(_cast(half_nan, torch.float32)) == [0x7FC02000, 0x7FC00000]
    # complex -> bool looks at both parts; NaN is true.
    z = torch.tensor([0j, 1j, 2 + 0j, complex("nan")], dtype=torch.complex64)
    assert _cast(z, torch.bool).tolist() == [False, True, True, True]


@pytest.mark.parametrize(
    ("src", "dst"), [(torch.int32, torch.float32), (torch.float32, torch.int32)]
)
def test_cast_in_place_same_layout(src: torch.dtype, dst: torch.dtype) -> None:
    """dst and src on the same bytes with the same layout: ``x.view(dst).copy_(x)``."""
    rng = np.random.default_rng(5)
    storage = make_values(src, dst, 5000, rng)
    for layout in (Layout((5000,), (1,), 0), Layout((40, 25), (1, 200), 0)):
        ours, truth = storage.clone(), storage.clone()
        view = ours.as_strided(layout.sizes, layout.strides, layout.offset)
        kernel_copy(view.view(dst), view)
        view = truth.as_strided(layout.sizes, layout.strides, layout.offset)
        view.view(dst).copy_(view)
        assert np.array_equal(storage_bytes(ours), storage_bytes(truth))
