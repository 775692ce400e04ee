"""Differential check of the pure layout modules against torch on a device (CUDA or CPU).

Run where a GPU exists: ``python tools/cuda_layout_check.py --device cuda``. It needs only
torch: ``torch_mydev_rules`` (the layout rules and the iterator) never imports the device
package or its compiled stub, so any torch build runs it. It compares, over seeded random
layouts, every layout predicate with the flags torch reports for a tensor of the same
sizes and strides on that device, and ``explain()``'s output strides and dtype with what
torch gives for binary ops (add, sub, mul, div, eq, lt; mixed dtypes and Python numbers
included), ``neg``, ``relu``, ``sqrt``, ``clone``, ``contiguous`` and
``empty_like``, and the sizes, strides and dtype of ``sum`` / ``mean`` / ``amax`` /
``amin`` results (random dims, keepdim, dtype=) with the reduction rules. Prints a summary;
exits 1 on any mismatch. ``--device cpu`` runs the same check on CPU (the test suite does
that so the script cannot rot).
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from torch_mydev_rules import iterator, layout
from torch_mydev_rules.iterator import reduction

DTYPES = (torch.float32, torch.float64, torch.float16, torch.int64, torch.bool)
BINARY_OPS = (
    (torch.add, "add"),
    (torch.sub, "sub"),
    (torch.mul, "mul"),
    (torch.div, "div"),
    (torch.eq, "eq"),
    (torch.lt, "lt"),
)
UNARY_OPS = ((torch.neg, "neg"), (torch.relu, "relu"), (torch.sqrt, "sqrt"))
FORMATS = (torch.contiguous_format, torch.channels_last, torch.channels_last_3d)


def random_view(rng: random.Random, ndim: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Sizes 0..4 (1 often), strides from a permuted dense base, some steps, some zeros."""
    sizes = tuple(rng.choice((0, 1, 1, 2, 3, 4)) for _ in range(ndim))
    order = list(range(ndim))
    if ndim in (4, 5) and rng.random() < 0.4:
        order = [1, *range(ndim - 1, 1, -1), 0][::-1]  # channels_last, slowest first
    elif rng.random() < 0.5:
        rng.shuffle(order)
    strides = [0] * ndim
    stride = 1
    for d in reversed(order):
        step = rng.choice((1, 1, 1, 2))
        strides[d] = stride * step
        stride *= max(sizes[d], 1) * step
    for d in range(ndim):
        if sizes[d] == 1 and rng.random() < 0.3:
            strides[d] = rng.randint(0, 9)
        elif rng.random() < 0.1:
            strides[d] = 0
    return sizes, tuple(strides)


def _refuses_bool(exc: RuntimeError) -> bool:
    """ATen's sub_check / neg's / relu's checks refuse bool operands: an op rule, not a layout
    rule."""
    message = str(exc)
    return message.startswith(
        (
            "Subtraction, the `-` operator",
            "Negation, the `-` operator",
            "Boolean inputs not supported for relu",
        )
    )


def make(sizes, strides, dtype, device) -> torch.Tensor:
    span = 1 + sum((s - 1) * st for s, st in zip(sizes, strides, strict=True)) if all(sizes) else 1
    return torch.zeros(max(span, 1), dtype=dtype, device=device).as_strided(sizes, strides)


def check(device: str, cases: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    problems: list[str] = []

    def expect(what: str, ours, theirs) -> None:
        if ours != theirs:
            problems.append(f"{what}: ours {ours} torch {theirs}")

    for _ in range(cases):
        ndim = rng.randint(0, 5)
        sizes, strides = random_view(rng, ndim)
        t = make(sizes, strides, torch.float32, device)
        tag = f"{list(sizes)} {strides}"
        expect(f"is_contiguous {tag}", layout.is_contiguous(sizes, strides), t.is_contiguous())
        for fmt in FORMATS[1:]:
            ours = layout.is_contiguous_for(sizes, strides, layout.MemoryFormat.from_torch(fmt))
            expect(f"is_contiguous({fmt}) {tag}", ours, t.is_contiguous(memory_format=fmt))
        expect(
            f"non_overlapping_and_dense {tag}",
            layout.is_non_overlapping_and_dense(sizes, strides),
            torch.ops.aten.is_non_overlapping_and_dense(t),
        )
        for fmt in (None, *FORMATS):
            kw = {} if fmt is None else {"memory_format": fmt}
            for name, fn in (
                ("clone", lambda x, k=kw: x.clone(**k)),
                ("empty_like", lambda x, k=kw: torch.empty_like(x, **k)),
                ("contiguous", lambda x, k=kw: x.contiguous(**k)),
            ):
                if name == "contiguous" and fmt is None:
                    continue
                try:
                    theirs = fn(t).stride()
                except RuntimeError as exc:
                    theirs = type(exc).__name__
                try:
                    ours = iterator.explain(name, t, **kw).output_strides
                except RuntimeError as exc:
                    ours = type(exc).__name__
                expect(f"{name}({fmt}) {tag}", ours, theirs)
        other_sizes = tuple(1 if rng.random() < 0.3 else s for s in sizes[rng.randint(0, ndim) :])
        _, other_strides = random_view(rng, len(other_sizes))
        a = make(sizes, strides, rng.choice(DTYPES), device)
        b = make(other_sizes, other_strides, rng.choice(DTYPES), device)
        op, name = rng.choice(BINARY_OPS)
        if rng.random() < 0.2:
            b = rng.choice((2, 2.5, True))  # a Python number: a CPU scalar operand
        try:
            result = op(a, b)
            theirs = (result.stride(), result.dtype)
        except RuntimeError as exc:
            if _refuses_bool(exc):
                continue
            theirs = type(exc).__name__
        try:
            report = iterator.explain(op, a, b)
            ours = (report.output_strides, report.dtype)
        except RuntimeError as exc:
            ours = type(exc).__name__
        other = f"{list(b.shape)} {b.stride()} {b.dtype}" if torch.is_tensor(b) else repr(b)
        expect(f"{name} {tag} {a.dtype} with {other}", ours, theirs)
        unary, unary_name = rng.choice(UNARY_OPS)
        try:
            theirs = unary(a).stride()
        except RuntimeError as exc:
            if _refuses_bool(exc):
                continue
            theirs = type(exc).__name__
        try:
            ours = iterator.explain(unary, a).output_strides
        except RuntimeError as exc:
            ours = type(exc).__name__
        expect(f"{unary_name} {tag} {a.dtype}", ours, theirs)
        _check_reduction(rng, a, tag, expect)
    return problems


def _reduction_rule(name: str, a: torch.Tensor, dims, keepdim: bool, dtype):
    """What ``torch_mydev_rules.iterator.reduction`` says ``name(a, dims, keepdim, dtype=)``
    gives: (sizes, strides, dtype) of a new result, or the exception type's name."""
    try:
        if name == "sum":
            result_dtype = reduction.sum_dtype(a.dtype, dtype, None)
        elif name == "mean":
            result_dtype = reduction.mean_dtype(a.dtype, dtype, None)
        else:
            reduction.amax_checks(name, tuple(a.shape), dims)
            result_dtype = a.dtype
        mask = reduction.dim_mask(dims, a.dim())
    except (RuntimeError, IndexError) as exc:
        return type(exc).__name__
    sizes = reduction.reduction_shape(tuple(a.shape), mask, keepdim)
    return (sizes, layout.contiguous_strides(sizes), result_dtype)


def _check_reduction(rng: random.Random, a: torch.Tensor, tag: str, expect) -> None:
    """sum / mean / amax / amin of ``a`` over random dims: the result's sizes, strides and
    dtype against the reduction rules (``resize_reduction``: a new result is contiguous)."""
    name = rng.choice(("sum", "mean", "amax", "amin"))
    ndim = a.dim()
    dims = (
        None
        if rng.random() < 0.2 or ndim == 0
        else tuple(sorted(rng.sample(range(-ndim, 0), rng.randint(1, ndim))))
    )
    keepdim = rng.random() < 0.5
    dtype = rng.choice((None, None, torch.float64)) if name in ("sum", "mean") else None
    kwargs = {"keepdim": keepdim} if dims is not None else {}
    if dtype is not None:
        kwargs["dtype"] = dtype
    fn = getattr(torch, name)
    try:
        result = fn(a, dims, **kwargs) if dims is not None else fn(a, **kwargs)
        theirs = (tuple(result.shape), result.stride(), result.dtype)
    except (RuntimeError, IndexError) as exc:
        if _refuses_bool(exc):
            return
        theirs = type(exc).__name__
    ours = _reduction_rule(name, a, dims, keepdim if dims is not None else False, dtype)
    expect(f"{name}(dims={dims}, keepdim={keepdim}, dtype={dtype}) {tag} {a.dtype}", ours, theirs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--cases", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("no CUDA device here")
        return 2
    problems = check(args.device, args.cases, args.seed)
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(
        f"torch {torch.__version__} on {name}: {args.cases} random layouts, "
        f"{len(problems)} mismatches"
    )
    for line in problems[:50]:
        print("  " + line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
