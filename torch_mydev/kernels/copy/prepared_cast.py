"""Decides once what a small contiguous cast of one layout needs: ``prepare_cast``.

``copy_strided``'s casting branch (``copy.kernel._copy_cast``) normalises the plan, picks
its loop, builds both sides' staging and the dtype pair's converters on every call: about
100 µs of Python for a few hundred elements, against CPU's 4. For the commonest cast --
both sides one contiguous run (after coalescing; past ``SERIAL_CAST_MAX`` elements, a
cast to a float type, run on numba's threads), a source the reader takes where it lies
(``_unstaged``'s case, and float16, bfloat16, bool and the narrower integers, which that
branch stages first: a copy of one contiguous run, unchanged) -- that branch reads the
source lanes, converts them to the canonical chunk and writes the destination lanes, a
chunk at a time. ``PreparedCast.run`` does exactly those two steps on numpy views over the
two addresses, with the converters made once per thread (they own scratch buffers), so the
bytes are ``copy_strided``'s. The stub replays the casts to float16, bfloat16, float32 and
float64 into a new tensor (``_to_copy``) through ``new_tensor_block``.
"""

from __future__ import annotations

import math
import threading

import numpy as np
import torch

from torch_mydev.kernels import numba_module
from torch_mydev.kernels.copy.cast import Reader, Writer, converters
from torch_mydev.kernels.copy.loops import (
    CAST_CHUNK,
    check_plan,
    coalesce,
    lanes_at,
    parallel_allowed,
)
from torch_mydev.kernels.dtypes import BFLOAT16, layout_of
from torch_mydev.kernels.parallel import threads

__all__ = ["PreparedCast", "prepare_cast"]


class PreparedCast:
    """A cast between two contiguous runs of ``numel`` elements, set up once.

    ``dst_extent`` / ``src_extent`` are the bytes each side spans; ``unit`` the source's
    lane size (the alignment its first byte needs; ``run`` checks both sides per call).
    ``new_tensor_block`` gives the stub's ``_to_copy`` replay a cast to float16, bfloat16,
    float32 or float64; ``replay_block`` is None: ``copy_`` into a tensor of the user's is
    not replayed as a cast (its destination may not suit its lanes).
    """

    __slots__ = ("_local", "dst", "dst_extent", "numel", "src", "src_extent", "unit",
                 "vector_nan")  # fmt: skip

    def __init__(
        self, src_dtype: torch.dtype, dst_dtype: torch.dtype, numel: int, vector_nan: bool
    ) -> None:
        self.src = layout_of(src_dtype)
        self.dst = layout_of(dst_dtype)
        self.numel = numel
        self.src_extent = numel * self.src.itemsize
        self.dst_extent = numel * self.dst.itemsize
        self.unit = self.src.lane.itemsize
        self.vector_nan = vector_nan
        self._local = threading.local()

    def replay_block(self) -> None:
        return None

    def new_tensor_block(self) -> tuple[int, np.ndarray] | None:
        """The C entry's address and parameter block (the count) of this cast into a new
        tensor, for the stub's replay (``_replay.cast_entry``: ``converters``' two steps,
        with the same arguments), or None for a cast it does not replay: one to complex,
        an integer or bool, or from complex or uint64, and one past ``SERIAL_CAST_MAX`` (the
        stub runs an entry on its own thread; Python runs those on numba's threads). The
        stub checks the source's first byte against ``unit``; a new tensor's suits any
        lane. Loads numba if need be."""
        if self.numel > SERIAL_CAST_MAX:
            return None
        address = self._entry()
        return None if address is None else (address, np.array([self.numel], dtype=np.int64))

    def _entry(self) -> int | None:
        """``_replay.cast_entry``'s address for this pair, or None when it has none."""
        args = _entry_args(self.src, self.dst)
        if args is None:
            return None
        from torch_mydev.kernels.copy import _convert, _replay

        nan_bits = _convert.BFLOAT16_VECTOR_NAN if self.vector_nan else _convert.BFLOAT16_NAN
        return _replay.cast_entry(*args, nan_bits)

    def _converters(self) -> tuple[Reader, Writer]:
        pair = getattr(self._local, "pair", None)
        if pair is None:
            convert = numba_module("copy._convert")  # imported on the first cast that runs
            chunk = min(self.numel, CAST_CHUNK)
            pair = converters(self.src, self.dst, chunk, convert, self.vector_nan)
            self._local.pair = pair
        return pair

    def run(self, dst_start: int, dst_bytes: int, src_start: int, src_bytes: int) -> bool:
        """Cast the ``numel`` source elements at ``src_start`` into ``dst_start``; False,
        having written nothing, for an address that does not suit its lanes (the caller
        then runs ``copy_strided``). Raises IndexError when a side's buffer (``*_bytes``
        from its start) is shorter than the run."""
        if self.dst_extent > dst_bytes or self.src_extent > src_bytes:
            raise IndexError("the cast reaches past the end of a buffer")
        src_lane, dst_lane = self.src.lane, self.dst.lane
        if src_start % src_lane.itemsize or dst_start % dst_lane.itemsize:
            return False
        if self.numel > SERIAL_CAST_MAX and self._run_parallel(dst_start, src_start):
            return True
        reader, writer = self._converters()
        source = lanes_at(src_start, self.src_extent, src_lane.itemsize).view(src_lane)
        target = lanes_at(dst_start, self.dst_extent, dst_lane.itemsize).view(dst_lane)
        src_lanes, dst_lanes = self.src.lanes, self.dst.lanes
        for begin in range(0, self.numel, CAST_CHUNK):  # each chunk converts on its own
            n = min(CAST_CHUNK, self.numel - begin)
            chunk = source[begin * src_lanes : (begin + n) * src_lanes]
            writer(target[begin * dst_lanes : (begin + n) * dst_lanes], reader(chunk, n), n)
        return True

    def _run_parallel(self, dst_start: int, src_start: int) -> bool:
        """The cast's C entry over ``threads.count()`` runs of its elements on numba's
        threads (each element converts on its own: the bytes of a serial run); False,
        having written nothing, when it cannot run (not allowed here, its entry or the
        parallel loop compiling in the background, another region running)."""
        from torch_mydev.kernels.jit.compiler import NotCompiled

        if not parallel_allowed(self.numel):
            return False
        try:
            entry = self._entry()
        except NotCompiled:
            return False
        if entry is None:  # (prepare_cast takes no such pair above SERIAL_CAST_MAX)
            return False
        src_size, dst_size = self.src.itemsize, self.dst.itemsize
        runs = threads.split(self.numel, threads.count())
        counts = [np.array([end - begin], dtype=np.int64) for begin, end in runs]
        parts = []
        for (begin, _), count in zip(runs, counts, strict=True):
            dst, src = dst_start + begin * dst_size, src_start + begin * src_size
            parts.append([(entry, dst, src, 0, count.ctypes.data)])
        return threads.parallel_calls(parts) is not None


def _entry_args(src, dst) -> tuple | None:
    """``_replay.cast_entry``'s arguments but ``nan_bits`` for a ``src`` -> ``dst`` pair of
    layouts, or None: it casts to float16, bfloat16, float32 and float64 from those, bool
    and the integers but uint64 (uint64 to float16 goes through a float32 chunk)."""
    if dst.kind not in ("reduced", "float") or src.lane.type == _UINT64:
        return None
    if src.kind == "reduced":
        read, read_flag = "reduced", src.fmt == BFLOAT16
    elif src.kind == "float" or src.lane.type == _INT64:
        read, read_flag = "as_is", False
    elif src.kind in ("bool", "int"):
        read, read_flag = "integral", src.kind == "bool"
    else:
        return None
    write = "reduced" if dst.kind == "reduced" else "floating"
    return src.lane.type, read, read_flag, dst.lane.type, write, dst.fmt == BFLOAT16


def prepare_cast(
    src_dtype: torch.dtype,
    dst_dtype: torch.dtype,
    shape: tuple[int, ...],
    dst_strides: tuple[int, ...],
    src_strides: tuple[int, ...],
) -> PreparedCast | None:
    """The ``PreparedCast`` of a plan (byte strides, dim 0 fastest) whose two sides coalesce
    to one contiguous run of elements (cast a chunk of ``CAST_CHUNK`` at a time on the
    caller's thread; past ``SERIAL_CAST_MAX`` of them, only a pair with a cast entry, run
    on numba's threads), with a source the reader takes in place (bool, the integers,
    float16, bfloat16, float32, float64, complex); None for any other cast
    (``copy_strided`` runs it)."""
    src, dst = layout_of(src_dtype), layout_of(dst_dtype)
    if "bits" in (src.kind, dst.kind) or src_dtype == dst_dtype:
        return None
    if src.kind not in _READ_IN_PLACE:
        return None
    shape, dst_strides, src_strides = check_plan(shape, dst_strides, src_strides)
    numel = math.prod(shape)
    if numel == 0 or (numel > SERIAL_CAST_MAX and _entry_args(src, dst) is None):
        return None
    if not shape:  # a 0-dim cast converts as a scalar (no vector bfloat16 NaN)
        return None
    shape, dst_strides, src_strides = coalesce(shape, dst_strides, src_strides)
    if not shape:
        shape, dst_strides, src_strides = (1,), (dst.itemsize,), (src.itemsize,)
    if len(shape) != 1 or dst_strides[0] != dst.itemsize or src_strides[0] != src.itemsize:
        return None
    # ``_vector_bfloat16_nan``: float32 -> bfloat16 with unit strides takes torch's vector loop
    vector_nan = src_dtype == torch.float32 and dst_dtype == torch.bfloat16
    return PreparedCast(src_dtype, dst_dtype, numel, vector_nan)


# The largest cast of one run done on the caller's thread: copy_strided casts from
# PARALLEL_MIN_NUMEL elements on Python's thread pool, whose wake-ups cost more than the
# cast until far above it (two cores, float16 -> float32: 64K elements 91 us pooled
# against about 8 us here; 1M 296 us pooled). Above it, a pair with a C entry
# (``_entry_args``) runs it on numba's threads, any other pair in ``copy_strided``.
SERIAL_CAST_MAX = 1 << 18
# Sources whose contiguous lanes the reader takes where they lie (``copy_strided`` stages
# float16/bfloat16, bool and the narrower integers first, but staging one contiguous run
# copies it unchanged).
_READ_IN_PLACE = ("float", "complex", "reduced", "bool", "int")


_INT64 = layout_of(torch.int64).lane.type
_UINT64 = layout_of(torch.uint64).lane.type
