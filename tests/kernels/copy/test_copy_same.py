"""Same-dtype copies: the contiguous, tiled, DimCounter and parallel loops, unit selection,
and the plan checks.

Truth: ``dst_view.copy_(src_view)`` on CPU (``direct_copy_kernel``); for layouts torch cannot
express (elements at byte offsets their size does not divide) a byte-by-byte Python loop.
"""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.support.subprocess_run import AUTOLOAD, run_python
from torch_mydev.kernels.copy import kernel as kcopy
from torch_mydev.kernels.copy import loops as copy_loops

from .strategies import dtypes, layouts, sizes
from .truth import Layout, copy_bytes, make_values, run_case


@given(data=st.data())
def test_any_layout(data: st.DataObject) -> None:
    """Random dtype, shape, layouts (broadcast source), offsets and dim order."""
    dtype = data.draw(dtypes)
    shape = data.draw(sizes)
    src_layout = data.draw(layouts(shape, broadcast=True))
    dst_layout = data.draw(layouts(shape))
    order = data.draw(st.permutations(range(len(shape))))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    values = make_values(dtype, dtype, src_layout.storage_numel(slack=3), rng)
    run_case(values, src_layout, dtype, dst_layout, rng, order)


def _transpose_plan(rows: int, cols: int, itemsize: int) -> tuple[tuple[int, ...], ...]:
    """``a.t().contiguous()`` of a ``rows x cols`` row-major ``a``, fastest dim first."""
    return (rows, cols), (itemsize, rows * itemsize), (cols * itemsize, itemsize)


@pytest.mark.parametrize(
    ("plan", "path"),
    [
        (((1000,), (4,), (4,)), "contiguous"),
        (((1 << 22,), (4,), (4,)), "contiguous-parallel"),
        (((10, 100), (4, 40), (4, 40)), "contiguous"),  # coalesces to one dim
        (((1, 7, 1), (4, 4, 28), (4, 4, 28)), "contiguous"),  # size-1 dims dropped
        (((0, 5), (4, 0), (4, 0)), "empty"),
        (_transpose_plan(300, 500, 4), "tiled-parallel"),
        (_transpose_plan(100, 200, 4), "tiled"),
        (_transpose_plan(12, 2000, 4), "strided"),  # too short to tile, too long for planes
        (_transpose_plan(8, 2000, 4), "planes"),  # eight planes (test_copy_planes.py)
        (((512, 300), (4, 2048), (8, 4096)), "strided-parallel"),
        (((100, 30), (4, 400), (8, 800)), "strided"),
        (((1000,), (4,), (0,)), "strided"),  # broadcast
    ],
)
def test_plan_path(plan: tuple[tuple[int, ...], ...], path: str) -> None:
    """Which loop a plan takes, against the documented thresholds."""
    assert kcopy.plan_path(4, *plan) == path


def test_contiguous_copies() -> None:
    """Small and large (parallel) contiguous copies, and an overlapping range in one buffer
    (numpy's memmove semantics; the ops layer never sends partial overlap, but it is safe)."""
    rng = np.random.default_rng(9)
    values = make_values(torch.float32, torch.float32, (1 << 22) + 3, rng)
    for n, src_offset, dst_offset in ((1000, 3, 1), (1 << 22, 1, 0), (1 << 22, 3, 2)):
        run_case(
            values,
            Layout((n,), (1,), src_offset),
            torch.float32,
            Layout((n,), (1,), dst_offset),
            rng,
        )
    buf = np.arange(256, dtype=np.uint8)
    want = buf.copy()
    want[8:200] = want[4:196].copy()
    copy_bytes(buf, 8, torch.int32, buf, 4, torch.int32, (48,), (4,), (4,))
    assert np.array_equal(buf, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8, torch.complex128, torch.int16])
def test_transposes_take_tiles(dtype: torch.dtype) -> None:
    """300 x 500 (parallel tiles), 100 x 200 (serial tiles), batched and swapped-dim plans."""
    rng = np.random.default_rng(1)
    values = make_values(dtype, dtype, 300 * 500 + 7, rng)
    # dst = src.t().contiguous(), both orders of the two iteration dims
    for order in ([1, 0], [0, 1]):
        run_case(
            values,
            Layout((500, 300), (1, 500), 7),
            dtype,
            Layout((500, 300), (300, 1), 0),
            rng,
            order,
        )
    run_case(values, Layout((200, 100), (1, 200), 0), dtype, Layout((200, 100), (100, 1), 3), rng)
    # a batch of three 64 x 40 transposes, batch dim outermost
    run_case(
        values,
        Layout((3, 40, 64), (2560, 1, 40), 1),
        dtype,
        Layout((3, 40, 64), (2560, 64, 1), 0),
        rng,
    )


@pytest.mark.parametrize("dtype", [torch.float64, torch.int8])
def test_large_strided_runs_in_parallel(dtype: torch.dtype) -> None:
    """Above ``PARALLEL_MIN_NUMEL``, not transposed: the parallel DimCounter loop."""
    rng = np.random.default_rng(2)
    assert kcopy.PARALLEL_MIN_NUMEL <= 512 * 300
    values = make_values(dtype, dtype, 2 * 512 * 300 + 5, rng)
    run_case(values, Layout((300, 512), (1024, 2), 5), dtype, Layout((300, 512), (512, 1), 0), rng)
    run_case(values, Layout((300, 512), (0, 1), 0), dtype, Layout((300, 512), (513, 1), 0), rng)


def test_forked_child_copies_serially(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process other than the one that went parallel first (a fork) stays serial."""
    monkeypatch.setattr(copy_loops, "_parallel_pid", -1)
    assert not copy_loops.parallel_allowed(1 << 20)
    rng = np.random.default_rng(4)
    values = make_values(torch.float32, torch.float32, 2 * 512 * 300, rng)
    run_case(
        values,
        Layout((300, 512), (1024, 2), 0),
        torch.float32,
        Layout((300, 512), (512, 1), 0),
        rng,
    )
    run_case(
        values, Layout((500, 300), (1, 500), 0), torch.float32, Layout((500, 300), (300, 1), 0), rng
    )


def test_scalar_and_empty() -> None:
    """A 0-dim copy moves one element; a plan with a zero size touches nothing."""
    rng = np.random.default_rng(6)
    values = make_values(torch.int64, torch.int64, 4, rng)
    run_case(values, Layout((), (), 2), torch.int64, Layout((), (), 1), rng)
    run_case(values, Layout((3, 0), (1, 1), 0), torch.int64, Layout((3, 0), (1, 1), 0), rng)
    dst = np.full(8, 9, np.uint8)
    copy_bytes(dst, 0, torch.int32, np.zeros(0, np.uint8), 0, torch.int32, (0,), (4,), (4,))
    assert (dst == 9).all()


def test_same_memory_same_layout_is_a_no_op() -> None:
    """dst and src the same bytes and strides: nothing moves (Copy.cpp's same-data exit)."""
    buf = np.arange(64, dtype=np.uint8)
    copy_bytes(buf, 8, torch.int16, buf, 8, torch.int16, (4, 3), (4, 16), (4, 16))
    copy_bytes(buf, 0, torch.int32, buf, 0, torch.int32, (16,), (4,), (4,))
    assert np.array_equal(buf, np.arange(64, dtype=np.uint8))


def _reference(
    dst: np.ndarray,
    dst_offset: int,
    src: np.ndarray,
    src_offset: int,
    itemsize: int,
    shape: tuple[int, ...],
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
) -> None:
    for index in itertools.product(*(range(n) for n in shape)):
        d = dst_offset + sum(i * s for i, s in zip(index, dst_strides, strict=True))
        s = src_offset + sum(i * s for i, s in zip(index, src_strides, strict=True))
        dst[d : d + itemsize] = src[s : s + itemsize]


@pytest.mark.parametrize(
    ("itemsize", "dst_offset", "src_offset", "shape", "dst_strides", "src_strides"),
    [
        (8, 4, 12, (5, 3), (12, 60), (20, 100)),  # float64 in 4-byte units
        (16, 2, 6, (4, 4), (18, 72), (72, 18)),  # complex128 in 2-byte units, transposed
        (4, 1, 3, (6,), (5,), (7,)),  # float32 in single bytes
        (2, 0, 0, (40, 30), (2, 80), (60, 2)),  # aligned int16 transpose
    ],
)
def test_unaligned_elements_move_in_smaller_units(
    itemsize: int,
    dst_offset: int,
    src_offset: int,
    shape: tuple[int, ...],
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
) -> None:
    """Offsets and strides the itemsize does not divide: whole elements still move exactly."""
    rng = np.random.default_rng(8)
    src = rng.integers(0, 256, 4096, dtype=np.uint8)
    dst = rng.integers(0, 256, 4096, dtype=np.uint8)
    want = dst.copy()
    dtype = {2: torch.int16, 4: torch.float32, 8: torch.float64, 16: torch.complex128}[itemsize]
    copy_bytes(dst, dst_offset, dtype, src, src_offset, dtype, shape, dst_strides, src_strides)
    _reference(want, dst_offset, src, src_offset, itemsize, shape, dst_strides, src_strides)
    assert np.array_equal(dst, want)


def test_bad_plans_are_refused() -> None:
    """The loops do not bounds-check, so the entry point checks the plan and the buffers."""
    buf = np.zeros(64, np.uint8)
    args = (torch.float32, buf, 0, torch.float32)
    with pytest.raises(IndexError):
        copy_bytes(buf, 0, *args, (17,), (4,), (4,))
    with pytest.raises(IndexError):
        copy_bytes(buf, 0, *args, (4, 4), (4, 16), (4, 20))
    with pytest.raises(ValueError, match="same length"):
        copy_bytes(buf, 0, *args, (4,), (4, 4), (4,))
    with pytest.raises(ValueError, match="negative"):
        copy_bytes(buf, 0, *args, (4,), (-4,), (4,))
    with pytest.raises(TypeError, match="uint8"):
        copy_bytes(buf.view(np.float32), 0, *args, (4,), (4,), (4,))
    with pytest.raises(TypeError, match="dtype"):
        copy_bytes(buf, 0, torch.int4, buf, 0, torch.float32, (4,), (1,), (4,))
    with pytest.raises(TypeError, match="do not cast"):  # bits types only move
        copy_bytes(buf, 0, torch.bits16, buf, 0, torch.int16, (4,), (2,), (2,))
    readonly = buf.copy()
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        copy_bytes(readonly, 0, *args, (4,), (4,), (4,))


def _run_python(code: str) -> str:
    """``code`` (dedented) without the device: torch's autoload off, run from the root."""
    root = Path(__file__).resolve().parents[3]
    return run_python(textwrap.dedent(code), env={AUTOLOAD: "0"}, timeout=300, cwd=root).stdout


_CAST_COPY = """
from torch_mydev.kernels.operand import Operand
buf = np.zeros(4096, np.uint8)
kcopy.copy_strided(Operand(buf, 0, torch.float32, (4, 80)),
                   Operand(buf, 2048, torch.int16, (40, 4)), (20, 10))
"""


def test_import_is_lazy_and_compiled_code_is_cached() -> None:
    """Importing the kernels imports no numba; a fresh process loads the loops this one
    compiled (or loaded) from the cache: nothing compiles there."""
    exec(_CAST_COPY, {"np": np, "torch": torch, "kcopy": kcopy})  # the cache holds them now
    code = f"""
import sys
import numpy as np, torch
from torch_mydev.kernels.copy import kernel as kcopy
assert "numba" not in sys.modules, "importing the kernels imported numba"
{_CAST_COPY}
from torch_mydev.kernels.copy import _strided
from torch_mydev.kernels.copy import _convert
misses = sum(sum(f.stats.cache_misses.values()) for f in
             (_strided.copy_range, _convert.read_integral, _convert.write_floating))
print(misses)
"""
    assert _run_python(code).strip() == "0"
