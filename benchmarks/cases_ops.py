"""Benchmark cases of ops beyond copies: native add, the CPU fallback, torch.compile."""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch
from harness import Mode, Results, Row, add_path, nchw, time_pair, try_pair


def bench_add(mode: Mode, out: Results) -> None:
    """channels_last + contiguous: whatever runs ``add`` on mydev (labelled by add_path)."""
    for label, n in mode.sizes.items():
        if label == "1K":
            continue  # the 1K add is a small-op latency row
        a = torch.randn(nchw(n)).contiguous(memory_format=torch.channels_last)
        b = torch.randn(nchw(n))
        da, db = a.to("mydev"), b.to("mydev")
        case = "add channels_last + contiguous"
        try_pair(mode, out, case, label, lambda x=da, y=db: x + y, lambda x=a, y=b: x + y, add_path)
        del da, db


def bench_fallback(mode: Mode, out: Results) -> None:
    """An op with no mydev kernel (CPU fallback): the zero-copy path and the copy path.

    ``sin`` (functional: CPU writes straight into a mydev-allocated out= alias) at 1K and
    the big size, and ``v @ w`` (64x256 @ 256x256), each on both paths of
    ``torch_mydev.ops.fallback.boxed`` (``zero_copy``; ``TORCH_MYDEV_FALLBACK_COPY=1`` selects
    the copy path at import), against torch CPU in the same run.
    """
    from torch_mydev.ops.fallback import boxed as fallback

    small = next(k for k, v in mode.sizes.items() if v == 1 << 10)
    big = next(k for k, v in mode.sizes.items() if v == mode.big)
    cases = []
    for label, n in ((small, 1 << 10), (big, mode.big)):
        cpu_x = torch.randn(n)
        cases.append(("fallback op: sin", label, cpu_x, lambda t: torch.sin(t)))
    v, w = torch.randn(64, 256), torch.randn(256, 256)
    cases.append(("fallback op: v @ w 64x256 @ 256x256", "64x256", (v, w), lambda t: t[0] @ t[1]))
    saved = fallback.zero_copy
    try:
        for case, label, cpu_args, fn in cases:
            dev_args = (
                tuple(a.to("mydev") for a in cpu_args)
                if isinstance(cpu_args, tuple)
                else cpu_args.to("mydev")
            )
            for zero_copy, path in ((False, "copy path (before)"), (True, "zero-copy")):
                fallback.zero_copy = zero_copy
                mine, ref, noise = time_pair(
                    mode, lambda f=fn, a=dev_args: f(a), lambda f=fn, a=cpu_args: f(a)
                )
                out.rows.append(Row(case, label, mine, ref, path=path, noise=noise))
            del dev_args
    finally:
        fallback.zero_copy = saved


COMPILE_CHAINS: dict[str, Callable[..., torch.Tensor]] = {
    "(a*2+b).relu().sum(1)": lambda a, b: (a * 2 + b).relu().sum(1),
    "(a*b).sigmoid() - b": lambda a, b: (a * b).sigmoid() - b,
}


def bench_compile(mode: Mode, out: Results) -> None:
    """Fused chains under ``torch.compile`` (inductor): compiled mydev and eager mydev, each
    against compiled torch CPU in the same run, one thread (docs/compile.md)."""
    if mode.name == "smoke":
        reason = "skipped (--smoke): each compile takes seconds"
        print(f"  ... compile rows {reason}", file=sys.stderr)
        out.rows.append(Row("torch.compile chains", "-", None, None, "torch CPU, compiled", reason))
        return
    import torch._dynamo

    # One thread on both sides: inductor's OpenMP kernels wait at barriers for every thread,
    # and on a shared machine that wait, not the kernel, is what a multi-thread row times.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for name, fn in COMPILE_CHAINS.items():
            for shape in ((64, 32), (2048, 2048)):
                torch._dynamo.reset()
                _compile_case(mode, out, name, fn, shape)
    finally:
        torch.set_num_threads(threads)
        torch._dynamo.reset()


def _compile_case(
    mode: Mode, out: Results, name: str, fn: Callable[..., torch.Tensor], shape: tuple[int, int]
) -> None:
    size, ref_name = f"{shape[0]}x{shape[1]}", "torch CPU, compiled"
    a, b = torch.randn(shape), torch.randn(shape)
    da, db = a.to("mydev"), b.to("mydev")
    compiled = torch.compile(fn, dynamic=False)
    try:
        mine, ref, noise = time_pair(mode, lambda: compiled(da, db), lambda: compiled(a, b))
    except Exception as error:  # a failed compile becomes the row's note
        first = str(error).splitlines()[0]
        out.rows.append(Row(f"compiled {name}", size, None, None, ref_name, first[:60]))
        return
    note = "inductor C++, 1 thread"
    out.rows.append(Row(f"compiled {name}", size, mine, ref, ref_name, note, noise))
    eager, ref, noise = time_pair(mode, lambda: fn(da, db), lambda: compiled(a, b))
    note = "mydev eager, 1 thread"
    out.rows.append(Row(f"eager {name}", size, eager, ref, ref_name, note, noise))


def bench_eager_chains(mode: Mode, out: Results) -> None:
    """Eager op chains, mydev against eager torch CPU (default threads on both sides): the
    per-op cost a user's eager model pays, at a small and a big size."""
    shapes = ((64, 32), (256, 256)) if mode.name == "smoke" else ((64, 32), (2048, 2048))
    for name, fn in COMPILE_CHAINS.items():
        for shape in shapes:
            a, b = torch.randn(shape), torch.randn(shape)
            da, db = a.to("mydev"), b.to("mydev")
            size = f"{shape[0]}x{shape[1]}"
            try_pair(
                mode,
                out,
                f"eager {name}",
                size,
                lambda f=fn, x=da, y=db: f(x, y),
                lambda f=fn, x=a, y=b: f(x, y),
                lambda: "eager, both sides",
            )
            del da, db
