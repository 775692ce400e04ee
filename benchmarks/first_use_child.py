"""One fresh process of the first-use benchmark (``cases_first_use.py``); prints JSON.

``python first_use_child.py ops DEVICE [--preload-numba] [--once] [CASE ...]``
    builds each case's inputs (untimed, on CPU, then moved to ``DEVICE``) and times the
    case's first and second call with ``time.perf_counter``, in ``CASES`` order (or the
    order given). On mydev the first case that needs a numba loop pays numba's load
    (once per process), as a user's first such op does; ``--preload-numba`` loads it before
    any case instead, ``--once`` times the first call only.
``python first_use_child.py steps EXAMPLE STEPS``
    makes ``examples/EXAMPLE.py``'s model, batch and optimizer on mydev (untimed: imports
    and set-up) and times its first ``STEPS`` eager training steps, one by one.

It imports torch and, on mydev only, torch_mydev's compiler: the torch CPU reference runs
with ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` and loads nothing of mydev. On mydev each result
says which path served the call (``compiler.stats()`` before and after it).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

# name -> (size, inputs made on CPU from a generator, the call)
Case = tuple[str, Callable[[torch.Generator], tuple[torch.Tensor, ...]], Callable[..., object]]


def _f32(*shape: int) -> Callable[[torch.Generator], tuple[torch.Tensor, ...]]:
    return lambda g: (torch.randn(*shape, generator=g), torch.randn(*shape, generator=g))


def _i64(g: torch.Generator) -> tuple[torch.Tensor, ...]:
    return (torch.randint(-50, 50, (64, 32), generator=g),)


def _bf16(g: torch.Generator) -> tuple[torch.Tensor, ...]:
    return (torch.randn(64, 32, generator=g).bfloat16(),)


def _where(g: torch.Generator) -> tuple[torch.Tensor, ...]:
    a, b = _f32(64, 32)(g)
    return a > 0, a, b


def _channels_last(g: torch.Generator) -> tuple[torch.Tensor, ...]:
    x = torch.randn(2, 16, 8, 8, generator=g)
    return (x.contiguous(memory_format=torch.channels_last),)


CASES: dict[str, Case] = {
    "cast .to(float16)": ("64x32", _f32(64, 32), lambda a, b: a.to(torch.float16)),
    "transposed copy t().contiguous()": ("64x32", _f32(64, 32), lambda a, b: a.t().contiguous()),
    "add float32": ("64x32", _f32(64, 32), lambda a, b: a + b),
    "add int64": ("64x32", _i64, lambda i: i + i),
    "mul bfloat16": ("64x32", _bf16, lambda h: h * h),
    "div": ("64x32", _f32(64, 32), lambda a, b: a / b),
    "where": ("64x32", _where, torch.where),
    "relu, channels_last": ("2x16x8x8", _channels_last, torch.relu),
    "compare a > b": ("64x32", _f32(64, 32), lambda a, b: a > b),
    "sum(1)": ("64x32", _f32(64, 32), lambda a, b: a.sum(1)),
    "mean()": ("64x32", _f32(64, 32), lambda a, b: a.mean()),
    "amax(1)": ("64x32", _f32(64, 32), lambda a, b: a.amax(1)),
    "amin(0)": ("64x32", _f32(64, 32), lambda a, b: a.amin(0)),
    "add float32, parallel": ("2048x2048", _f32(2048, 2048), lambda a, b: a + b),
    "sum(1), parallel": ("2048x2048", _f32(2048, 2048), lambda a, b: a.sum(1)),
}


def _served() -> int:
    """Calls served on CPU while their loop compiled, so far (0 on CPU)."""
    if "torch_mydev" not in sys.modules:
        return 0
    from torch_mydev.kernels.jit import compiler

    return sum(v for k, v in compiler.stats().items() if k.startswith("served_on_cpu:"))


def _stats() -> dict[str, int]:
    if "torch_mydev" not in sys.modules:
        return {}
    from torch_mydev.kernels.jit import compiler

    return compiler.stats()


def _timed(fn: Callable[..., object], inputs: tuple) -> tuple[float, bool]:
    """Seconds of one call, and whether CPU's kernel served it (its loop was compiling)."""
    served = _served()
    start = time.perf_counter()
    out = fn(*inputs)
    seconds = time.perf_counter() - start
    del out
    return seconds, _served() > served


def run_ops(device: str, names: list[str], preload: bool, once: bool) -> dict:
    if preload:
        import torch_mydev.kernels

        torch_mydev.kernels.load_numba_modules()
    g = torch.Generator().manual_seed(0)
    results = {}
    for name in names or list(CASES):
        size, make, fn = CASES[name]
        inputs = tuple(t.to(device) for t in make(g))
        calls = [_timed(fn, inputs) for _ in range(1 if once else 2)]
        seconds, served = [s for s, _ in calls], [v for _, v in calls]
        results[name] = {"size": size, "seconds": seconds, "served": served}
        del inputs
    return {"cases": results, "stats": _stats()}


def run_steps(example: str, steps: int) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    module = __import__(example)
    optimizer_of = {"cnn": "sgd", "transformer": "adamw"}[example]
    model, data, target = module.make_inputs()
    model = model.to("mydev")
    data, target = data.to("mydev"), target.to("mydev")
    optimizer = getattr(module, optimizer_of)(model.parameters())
    model.train()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(data), target).backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    return {"seconds": times, "stats": _stats()}


def main(argv: list[str]) -> None:
    if argv[0] == "ops":
        flags = {a for a in argv[2:] if a.startswith("--")}
        names = [a for a in argv[2:] if not a.startswith("--")]
        out = run_ops(argv[1], names, "--preload-numba" in flags, "--once" in flags)
    else:
        out = run_steps(argv[1], int(argv[2]))
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
