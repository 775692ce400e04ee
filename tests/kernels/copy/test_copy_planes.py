"""The planes loop: NCHW <-> channels_last copies with a tiny channel dim (C = 1..8).

Truth: ``dst_view.copy_(src_view)`` on CPU (``direct_copy_kernel``), the whole destination
storage compared byte for byte (``truth.run_case``); for elements at byte offsets their size
does not divide (which torch cannot express) a byte-by-byte Python loop.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from tests.support.subprocess_run import AUTOLOAD, run_python
from torch_mydev.kernels.copy import kernel as kcopy
from torch_mydev.kernels.copy import loops as copy_loops

from .strategies import dtypes
from .truth import DTYPES, Layout, copy_bytes, iteration_order, make_values, run_case

CL = torch.channels_last


def _nchw(c: int, h: int, w: int, parent: tuple[int, int, int]) -> tuple[int, ...]:
    """Element strides of an NCHW view inside an NCHW parent of ``parent`` = (C, H, W)."""
    pc, ph, pw = parent
    return (pc * ph * pw, ph * pw, pw, 1)


def _channels_last(c: int, h: int, w: int, parent: tuple[int, int, int]) -> tuple[int, ...]:
    """Element strides of a view inside a channels_last parent of ``parent`` = (C, H, W)."""
    pc, ph, pw = parent
    return (pc * ph * pw, 1, pw * pc, pc)


def _plan(dst: Layout, src: Layout, itemsize: int) -> tuple[tuple[int, ...], ...]:
    """The copy's plan in TensorIterator order (fastest first), byte strides."""
    dims = iteration_order(dst.sizes, dst.strides)
    return (
        tuple(dst.sizes[d] for d in dims),
        tuple(dst.strides[d] * itemsize for d in dims),
        tuple(src.strides[d] * itemsize for d in dims),
    )


images = st.tuples(
    st.integers(0, 3),  # N
    st.integers(1, 8),  # C
    st.sampled_from([0, 1, 2, 3, 5, 16, 17, 33]),  # H
    st.sampled_from([0, 1, 2, 3, 5, 16, 17, 33]),  # W
)


@given(data=st.data())
def test_image_layouts_both_ways(data: st.DataObject) -> None:
    """Every dtype, both directions, sliced and offset sources, offset destinations.

    The source is an N x C x H x W window of a larger parent (extra channels, rows and
    columns, a storage offset) in NCHW or channels_last; the destination is dense in the
    other format. A dense source with 2..8 channels and 16 or more pixels takes the planes
    loop (``plan_path``).
    """
    dtype = data.draw(dtypes)
    n, c, h, w = data.draw(images)
    to_channels_last = data.draw(st.booleans())
    sliced = data.draw(st.booleans())
    extra = tuple(data.draw(st.integers(0, 2)) for _ in range(3)) if sliced else (0, 0, 0)
    parent = (c + extra[0], h + extra[1], w + extra[2])
    first = data.draw(st.integers(0, extra[0]))  # first channel of the window
    src_rule, dst_rule = (_nchw, _channels_last) if to_channels_last else (_channels_last, _nchw)
    src_strides = src_rule(c, h, w, parent)
    src = Layout((n, c, h, w), src_strides, data.draw(st.integers(0, 3)) + first * src_strides[1])
    dst = Layout((n, c, h, w), dst_rule(c, h, w, (c, h, w)), data.draw(st.integers(0, 3)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    values = make_values(dtype, dtype, src.storage_numel(slack=3), rng)
    itemsize = values.element_size()
    if not sliced and 2 <= c <= 8 and n >= 1 and h * w >= 16:
        assert kcopy.plan_path(itemsize, *_plan(dst, src, itemsize)).startswith("planes")
    run_case(values, src, dtype, dst, rng)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_both_ways(dtype: torch.dtype) -> None:
    """Each dtype through the dense (2, 3, 4 channels) and general (5, 8) bodies, both ways,
    from an offset source into an offset destination."""
    rng = np.random.default_rng(3)
    for c in (2, 3, 4, 5, 8):
        n, h, w = 2, 5, 7
        values = make_values(dtype, dtype, n * c * h * w + 2, rng)
        for src_rule, dst_rule in ((_nchw, _channels_last), (_channels_last, _nchw)):
            src = Layout((n, c, h, w), src_rule(c, h, w, (c, h, w)), 2)
            dst = Layout((n, c, h, w), dst_rule(c, h, w, (c, h, w)), 1)
            size = values.element_size()
            assert kcopy.plan_path(size, *_plan(dst, src, size)) == "planes"
            run_case(values, src, dtype, dst, rng)


def _image_plan(n: int, c: int, hw: int, to_channels_last: bool, itemsize: int):
    """``(itemsize, shape, dst_strides, src_strides)``: the coalesced plan of
    ``contiguous(memory_format=...)`` of an n x c x hw image batch."""
    planar, interleaved = (hw * itemsize, itemsize), (itemsize, c * itemsize)
    batch = c * hw * itemsize
    if to_channels_last:  # iteration (C, HW, N): dst interleaved
        return itemsize, (c, hw, n), (*interleaved, batch), (*planar, batch)
    return itemsize, (hw, c, n), (itemsize, hw * itemsize, batch), (c * itemsize, itemsize, batch)


@pytest.mark.parametrize(
    ("plan", "path"),
    [
        (_image_plan(16, 3, 512 * 512, True, 4), "planes-parallel"),
        (_image_plan(16, 3, 512 * 512, False, 4), "planes-parallel"),
        (_image_plan(1, 3, 16 * 16, True, 4), "planes"),
        (_image_plan(1, 4, 16 * 16, False, 1), "planes"),
        (_image_plan(2, 8, 64 * 64, True, 2), "planes-parallel"),
        (_image_plan(2, 1, 64 * 64, True, 4), "contiguous"),  # one channel: a memmove
        (_image_plan(2, 9, 64 * 64, True, 4), "strided-parallel"),  # nine is not tiny
        (_image_plan(2, 16, 64 * 64, True, 4), "tiled-parallel"),
        (_image_plan(3, 3, 15, True, 4), "strided"),  # fewer pixels than PLANES_MIN_LONG
    ],
)
def test_plan_path_takes_planes(plan: tuple[tuple[int, ...], ...], path: str) -> None:
    """Transposes with one dim of at most ``PLANES_MAX`` elements take the planes loop."""
    assert copy_loops.PLANES_MAX == 8 and copy_loops.PLANES_MIN_LONG == 16
    assert kcopy.plan_path(*plan) == path


@pytest.mark.parametrize(
    "dtype",
    [torch.float32, torch.uint8, torch.bool, torch.bfloat16, torch.complex128, torch.int64],
)
@pytest.mark.parametrize("c", [2, 3, 4, 7])
def test_large_images_run_in_parallel(dtype: torch.dtype, c: int) -> None:
    """Above ``PARALLEL_MIN_NUMEL``: the parallel planes loop, both ways, a partial last
    block (130 x 130 pixels is not a multiple of ``PLANE_BLOCK``), dense and sliced."""
    rng = np.random.default_rng(c)
    n, h, w = 2, 130, 130
    assert n * c * h * w >= kcopy.PARALLEL_MIN_NUMEL
    assert (h * w) % copy_loops.PLANE_BLOCK
    values = make_values(dtype, dtype, n * (c + 1) * h * (w + 1) + 5, rng)
    dense = (c, h, w)
    for src_rule, dst_rule in ((_nchw, _channels_last), (_channels_last, _nchw)):
        for parent, offset in ((dense, 0), ((c + 1, h, w + 1), 5)):
            src = Layout((n, c, h, w), src_rule(c, h, w, parent), offset)
            dst = Layout((n, c, h, w), dst_rule(c, h, w, dense), 1)
            run_case(values, src, dtype, dst, rng)


@pytest.mark.parametrize(
    ("src_dtype", "dst_dtype"),
    [
        (torch.float32, torch.float16),
        (torch.float32, torch.bfloat16),
        (torch.uint8, torch.float32),
        (torch.float64, torch.int32),
        (torch.bool, torch.int64),
        (torch.complex64, torch.complex128),
    ],
)
@pytest.mark.parametrize("c", [3, 4])
def test_casts_go_through_planes(src_dtype: torch.dtype, dst_dtype: torch.dtype, c: int) -> None:
    """``x.to(dtype, memory_format=...)``: the source moves through the planes loop into a
    dense temporary, then casts contiguously; small (serial) and large (parallel), both ways."""
    rng = np.random.default_rng(c)
    for n, h, w in ((1, 5, 7), (2, 130, 130)):
        values = make_values(src_dtype, dst_dtype, n * c * h * w + 3, rng)
        for src_rule, dst_rule in ((_nchw, _channels_last), (_channels_last, _nchw)):
            src = Layout((n, c, h, w), src_rule(c, h, w, (c, h, w)), 3)
            dst = Layout((n, c, h, w), dst_rule(c, h, w, (c, h, w)), 0)
            dst_size = torch.empty(0, dtype=dst_dtype).element_size()
            shape, dst_strides, _ = _plan(dst, src, dst_size)
            _, _, src_strides = _plan(dst, src, values.element_size())
            plan = copy_loops.coalesce(shape, dst_strides, src_strides)
            assert copy_loops.planes_pair(*plan, dst_size, values.element_size()) is not None
            run_case(values, src, dst_dtype, dst, rng)


def _reference(dst, dst_offset, src, src_offset, itemsize, shape, dst_strides, src_strides):
    for index in itertools.product(*(range(n) for n in shape)):
        d = dst_offset + sum(i * s for i, s in zip(index, dst_strides, strict=True))
        s = src_offset + sum(i * s for i, s in zip(index, src_strides, strict=True))
        dst[d : d + itemsize] = src[s : s + itemsize]


@pytest.mark.parametrize(
    ("itemsize", "dst_offset", "src_offset", "shape", "dst_strides", "src_strides"),
    [
        (4, 1, 3, (3, 40), (4, 12), (160, 4)),  # float32 interleaved in single bytes
        (4, 2, 6, (40, 3), (4, 160), (12, 4)),  # float32 de-interleaved in 2-byte units
        (16, 8, 0, (3, 20, 2), (16, 48, 960), (320, 16, 960)),  # complex128: 8-byte units
        (8, 0, 0, (6, 30), (8, 64), (240, 8)),  # six planes, interleaved side with gaps
        (2, 0, 2, (3, 50, 2), (2, 8, 400), (100, 2, 300)),  # 3 of 4 channels, gaps both sides
    ],
)
def test_units_and_gaps(
    itemsize: int,
    dst_offset: int,
    src_offset: int,
    shape: tuple[int, ...],
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
) -> None:
    """Elements of several units (misaligned, complex128) and strides that are not dense:
    the general planes body, whole elements moved exactly, nothing else touched."""
    assert kcopy.plan_path(itemsize, shape, dst_strides, src_strides) == "planes"
    rng = np.random.default_rng(11)
    src = rng.integers(0, 256, 8192, dtype=np.uint8)
    dst = rng.integers(0, 256, 8192, dtype=np.uint8)
    want = dst.copy()
    dtype = {2: torch.int16, 4: torch.float32, 8: torch.float64, 16: torch.complex128}[itemsize]
    copy_bytes(dst, dst_offset, dtype, src, src_offset, dtype, shape, dst_strides, src_strides)
    _reference(want, dst_offset, src, src_offset, itemsize, shape, dst_strides, src_strides)
    assert np.array_equal(dst, want)


@pytest.mark.parametrize("numel_side", [16, 160])  # serial entry point, parallel run_loop
@pytest.mark.parametrize("to_channels_last", [True, False])
def test_prepared_copy(numel_side: int, to_channels_last: bool) -> None:
    """``prepare_copy`` + ``run`` (the ops' per-call path) moves what torch moves."""
    x = torch.arange(2 * 3 * numel_side * numel_side, dtype=torch.float32)
    x = x.view(2, 3, numel_side, numel_side)
    if not to_channels_last:
        x = x.contiguous(memory_format=CL)
    fmt = CL if to_channels_last else torch.contiguous_format
    out = torch.full_like(x, -1.0, memory_format=fmt)
    dims = iteration_order(out.shape, out.stride())
    plan = (
        tuple(out.shape[d] for d in dims),
        tuple(out.stride(d) * 4 for d in dims),
        tuple(x.stride(d) * 4 for d in dims),
    )
    prepared = kcopy.prepare_copy(torch.float32, *plan)
    assert prepared.loop is not None and prepared.loop.blocks > 0
    assert (prepared.serial is not None) == (numel_side == 16)
    assert prepared.run(out.data_ptr(), out.nbytes, x.data_ptr(), x.nbytes)
    assert torch.equal(out, x) and out.stride() == x.contiguous(memory_format=fmt).stride()


@pytest.mark.parametrize("c", [1, 3, 4])
def test_device_contiguous_both_ways(c: int) -> None:
    """``x.contiguous(memory_format=channels_last)`` and back on mydev, as on CPU."""
    x = torch.randn(2, c, 40, 33)
    got = x.to("mydev").contiguous(memory_format=CL)
    want = x.contiguous(memory_format=CL)
    assert got.stride() == want.stride() and torch.equal(got.cpu(), want)
    back = got.contiguous()
    assert back.stride() == x.stride() and torch.equal(back.cpu(), x)


_PLANES_COPIES = """
from torch_mydev.kernels.operand import Operand
n = 3 * 200 * 200
src, dst = np.zeros(4 * n, np.uint8), np.zeros(4 * n, np.uint8)
for count in (3 * 16 * 16, n):  # serial, then parallel
    hw = count // 3
    kcopy.copy_strided(Operand(dst, 0, torch.float32, (4, 12)),
                       Operand(src, 0, torch.float32, (4 * hw, 4)), (3, hw))
prepared = kcopy.prepare_copy(torch.float32, (3, 256), (4, 12), (1024, 4))
prepared.run(dst.ctypes.data, dst.nbytes, src.ctypes.data, src.nbytes)
"""


def test_compiled_code_is_cached() -> None:
    """A fresh process loads the planes loops this one compiled (or loaded) from numba's
    cache: nothing compiles there."""
    exec(_PLANES_COPIES, {"np": np, "torch": torch, "kcopy": kcopy})  # the cache holds them now
    code = f"""
import numpy as np, torch
from torch_mydev.kernels.copy import kernel as kcopy
{_PLANES_COPIES}
from torch_mydev.kernels.copy import _planes as p
loops = (p.copy_planes, p.copy_planes_at)
print(sum(sum(f.stats.cache_misses.values()) for f in loops),
      sum(sum(f.stats.cache_hits.values()) for f in loops))
"""
    root = Path(__file__).resolve().parents[3]
    result = run_python(code, env={AUTOLOAD: "0"}, timeout=300, cwd=root)
    misses, hits = (int(v) for v in result.stdout.split())
    assert misses == 0 and hits >= 2
