"""Benchmark cases of the copy family: layout changes, contiguous copies, casts, broadcast,
small-op latency and where it goes, clone's peak memory, torch CPU with huge pages."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import torch
from harness import (
    Mode,
    Results,
    Row,
    add_path,
    child_env,
    copy_path,
    find,
    nchw,
    square,
    time_one,
    time_pair,
    try_pair,
)

import torch_mydev
from torch_mydev import _C
from torch_mydev.kernels.copy import kernel as kernel_copy
from torch_mydev.kernels.elementwise import kernel as kernel_elementwise


def bench_layouts(mode: Mode, out: Results) -> None:
    """Transposed -> contiguous, NCHW -> channels_last and back, at each size."""
    cl = torch.channels_last
    for label, n in mode.sizes.items():
        side = square(n)
        cpu = torch.randn(side, side).t()
        dev = cpu.to("mydev")
        mine, ref, noise = time_pair(mode, dev.contiguous, cpu.contiguous)
        path = copy_path(torch_mydev.explain("contiguous", dev), 4)
        out.rows.append(Row("transposed -> contiguous", label, mine, ref, path=path, noise=noise))
        del cpu, dev

        cpu = torch.randn(nchw(n))
        dev = cpu.to("mydev")
        mine, ref, noise = time_pair(
            mode,
            lambda d=dev: d.contiguous(memory_format=cl),
            lambda c=cpu: c.contiguous(memory_format=cl),
        )
        path = copy_path(torch_mydev.explain("contiguous", dev, memory_format=cl), 4)
        out.rows.append(Row("NCHW -> channels_last", label, mine, ref, path=path, noise=noise))
        cpu = cpu.contiguous(memory_format=cl)
        dev = cpu.to("mydev")
        mine, ref, noise = time_pair(mode, dev.contiguous, cpu.contiguous)
        path = copy_path(torch_mydev.explain("contiguous", dev), 4)
        out.rows.append(Row("channels_last -> NCHW", label, mine, ref, path=path, noise=noise))
        del cpu, dev


def bench_contiguous_copy(mode: Mode, out: Results) -> None:
    """A contiguous ``copy_`` of ``mode.big`` float32 against numpy's copyto and torch CPU."""
    n = mode.big
    label = f"{n * 4 >> 20} MB" if n * 4 >= 1 << 20 else f"{n * 4 >> 10} KB"
    src = torch.randn(n).to("mydev")
    dst = torch.empty(n, device="mydev")
    a, b = np.empty(n, np.float32), np.random.default_rng(0).random(n, np.float32)
    path = copy_path(torch_mydev.explain("copy_", dst, src), 4)
    mine, ref, noise = time_pair(mode, lambda: dst.copy_(src), lambda: np.copyto(a, b))
    out.rows.append(Row("contiguous copy_", label, mine, ref, "numpy copyto", path, noise))
    cpu_src, cpu_dst = torch.randn(n), torch.empty(n)
    mine, ref, noise = time_pair(mode, lambda: dst.copy_(src), lambda: cpu_dst.copy_(cpu_src))
    out.rows.append(Row("contiguous copy_", label, mine, ref, path=path, noise=noise))


def bench_casts(mode: Mode, out: Results) -> None:
    """float32 -> float16 and float32 -> int64 (contiguous ``.to(dtype)``)."""
    n = mode.big
    label = next(k for k, v in mode.sizes.items() if v == n)
    cpu = torch.randn(n) * 1000
    dev = cpu.to("mydev")
    for dtype in (torch.float16, torch.int64):
        mine, ref, noise = time_pair(mode, lambda d=dtype: dev.to(d), lambda d=dtype: cpu.to(d))
        name = f"cast float32 -> {str(dtype).removeprefix('torch.')}"
        out.rows.append(Row(name, label, mine, ref, path="cast", noise=noise))


def bench_broadcast(mode: Mode, out: Results) -> None:
    """A row vector copied into every row of a square matrix."""
    n = mode.big
    label = next(k for k, v in mode.sizes.items() if v == n)
    side = square(n)
    cpu_src, cpu_dst = torch.randn(side), torch.empty(side, side)
    dev_src, dev_dst = cpu_src.to("mydev"), cpu_dst.to("mydev")
    mine, ref, noise = time_pair(
        mode, lambda: dev_dst.copy_(dev_src), lambda: cpu_dst.copy_(cpu_src)
    )
    path = copy_path(torch_mydev.explain("copy_", dev_dst, dev_src), 4)
    case = f"broadcast copy_ [{side}] -> [{side}, {side}]"
    out.rows.append(Row(case, label, mine, ref, path=path, noise=noise))


def bench_small_ops(mode: Mode, out: Results) -> None:
    """1K elements: the Python path per call dominates."""
    cpu_t = torch.randn(32, 32).t()
    dev_t = cpu_t.to("mydev")
    mine, ref, noise = time_pair(mode, dev_t.contiguous, cpu_t.contiguous)
    case = "small op: contiguous() (transposed)"
    out.rows.append(Row(case, "1K", mine, ref, path="latency", noise=noise))
    cpu_src, cpu_dst = torch.randn(1024), torch.empty(1024)
    dev_src, dev_dst = cpu_src.to("mydev"), cpu_dst.to("mydev")
    mine, ref, noise = time_pair(
        mode, lambda: dev_dst.copy_(dev_src), lambda: cpu_dst.copy_(cpu_src)
    )
    out.rows.append(
        Row("small op: copy_ (contiguous)", "1K", mine, ref, path="latency", noise=noise)
    )
    try_pair(
        mode,
        out,
        "small op: add",
        "1K",
        lambda: dev_src + dev_dst,
        lambda: cpu_src + cpu_dst,
        lambda: f"latency, {add_path()}",
    )


def bench_floors(mode: Mode, out: Results) -> None:
    """Where the small-op time goes: the parts of ``contiguous()`` of a 32x32 transpose.

    The torch.library floor is a registered Python kernel that does nothing (a custom op
    dispatched on a mydev tensor); the others add one part each: allocating the output, and
    the prepared numba loop on raw memory without any torch call.
    """
    _floor_library()
    dev = torch.randn(32, 32).t().to("mydev")
    dst = torch.empty(32, 32, device="mydev")
    out.floors.append(
        (
            "torch.library dispatch to a Python kernel that returns its input",
            time_one(mode, lambda: torch.ops.mydev_bench.noop(dev)),
        )
    )
    out.floors.append(
        (
            "... a Python kernel that only allocates the 32x32 output",
            time_one(mode, lambda: torch.ops.mydev_bench.alloc(dev)),
        )
    )
    out.floors.append(
        (
            "one stub call reading both tensors' layout key and addresses (_C._signature)",
            time_one(mode, lambda: _C._signature(dst, dev)),
        )
    )
    report = torch_mydev.explain("copy_", dst, dev)
    prepared = kernel_copy.prepare_copy(
        torch.float32, report.coalesced_shape, *report.coalesced_stride_bytes
    )
    dst_address, src_address = dst.data_ptr(), dev.data_ptr()
    out.floors.append(
        (
            "the copy kernel alone (PreparedCopy.run on raw addresses, numba entry point)",
            time_one(mode, lambda: prepared.run(dst_address, 4096, src_address, 4096)),
        )
    )
    out.floors.append(("the whole op: mydev contiguous()", time_one(mode, dev.contiguous)))
    for _ in range(3):  # planned, recorded, replayed
        dst.copy_(dev)
    out.floors.append(
        (
            "the whole op: mydev copy_ of the transpose (a recorded layout pair)",
            time_one(mode, lambda: dst.copy_(dev)),
        )
    )
    cpu = dev.cpu()
    out.floors.append(("the whole op on torch CPU: contiguous()", time_one(mode, cpu.contiguous)))
    a, b = torch.randn(32, 32, device="mydev"), torch.randn(32, 32, device="mydev")
    add = kernel_elementwise.prepare_binary("add", torch.float32, (1024,), ((4,), (4,), (4,)))
    a_address, b_address = a.data_ptr(), b.data_ptr()
    out.floors.append(
        (
            "the add kernel alone (32x32 contiguous, numba entry point on raw addresses)",
            time_one(mode, lambda: add.kernel(dst_address, a_address, b_address, *add.args)),
        )
    )
    from torch_mydev.ops import replay

    for _ in range(3):  # planned, recorded, replayed
        a + b
    out.floors.append(
        (
            "the stub's replay of a recorded a + b alone (_C._replay: key, checks, "
            "allocation, loop)",
            time_one(mode, lambda: replay.replay(replay.TABLES["add"], a, b)),
        )
    )
    out.floors.append(("the whole op: mydev a + b (32x32)", time_one(mode, lambda: a + b)))
    a_cpu, b_cpu = a.cpu(), b.cpu()
    out.floors.append(
        ("the whole op on torch CPU: a + b (32x32)", time_one(mode, lambda: a_cpu + b_cpu))
    )


_library: torch.library.Library | None = None


def _floor_library() -> torch.library.Library:
    """``mydev_bench::noop`` and ``mydev_bench::alloc`` for PrivateUse1 (defined once)."""
    global _library
    if _library is None:
        _library = torch.library.Library("mydev_bench", "FRAGMENT")
        _library.define("noop(Tensor x) -> Tensor")
        _library.impl("noop", lambda t: t, "PrivateUse1")
        _library.define("alloc(Tensor x) -> Tensor")
        _library.impl(
            "alloc", lambda t: _C._empty_strided((32, 32), (32, 1), t.dtype, 0), "PrivateUse1"
        )
    return _library


THP_CHILD = """
import json, statistics, sys, time, torch
n, repeats, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
side = int(n ** 0.5)
shape = (n // (64 * 128 * 128), 64, 128, 128)
t = torch.randn(side, side).t()
x = torch.randn(shape)
y = x.contiguous(memory_format=torch.channels_last)
cases = {
    "transposed -> contiguous": t.contiguous,
    "NCHW -> channels_last": lambda: x.contiguous(memory_format=torch.channels_last),
    "channels_last -> NCHW": y.contiguous,
}
result = {}
for name, fn in cases.items():
    fn()
    start = time.perf_counter()
    fn()
    number = max(1, int(seconds / (time.perf_counter() - start)))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    result[name] = statistics.median(times)
print(json.dumps(result))
"""


def bench_thp_reference(mode: Mode, out: Results) -> None:
    """torch CPU with its own huge-page option (THP_MEM_ALLOC_ENABLE=1), 16M strided copies.

    mydev advises huge pages on large blocks; torch's CPU allocator does so only with that
    variable set. Measured in a child process (the variable is read once), so not alternating
    with the mydev rows it is compared to.
    """
    big = next(k for k, v in mode.sizes.items() if v == mode.big)
    if mode.cold_runs == 0:
        return
    env = child_env(TORCH_DEVICE_BACKEND_AUTOLOAD="0", THP_MEM_ALLOC_ENABLE="1")
    args = [str(mode.big), str(mode.repeats), str(mode.seconds)]
    done = subprocess.run(
        [sys.executable, "-c", THP_CHILD, *args],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    times = json.loads(done.stdout)
    for name, ref in times.items():
        mine = next((r.mydev for r in find(out, name, big)), None)
        out.rows.append(Row(name, big, mine, ref, "torch CPU, THP on", "not alternating"))


def bench_clone_memory(mode: Mode, out: Results) -> None:
    """Peak extra allocator bytes of ``clone`` must be the output's bytes, nothing more."""
    n = mode.sizes.get("64K", mode.big)
    side = square(n)
    cases = {
        "clone of a transposed view": torch.randn(side, side).t(),
        "clone of channels_last": torch.randn(nchw(n)).contiguous(
            memory_format=torch.channels_last
        ),
        "clone of an expanded row": torch.randn(side).expand(side, side),
        "clone to channels_last": torch.randn(nchw(n)),
    }
    for name, cpu in cases.items():
        dev = cpu.to("mydev")
        fmt = torch.channels_last if name == "clone to channels_last" else torch.preserve_format
        torch.mydev.synchronize()
        base = torch.mydev.memory_allocated()
        torch.mydev.reset_peak_memory_stats()
        result = dev.clone(memory_format=fmt)
        peak = torch.mydev.max_memory_allocated() - base
        out.memory.append((name, result.untyped_storage().nbytes(), peak))
        del result, dev
