"""The ``torch.library.opcheck`` case of every overload mydev registers a Python kernel for
(``torch_mydev.ops.registry.KERNELS``), or the reason it has none.

``tests/ops/test_opcheck.py`` runs each case (``tests/support/opcheck.py``: every check
passes, or fails as the same call on CPU) and fails, naming it, for any registered overload
that is in neither ``CASES`` nor ``EXCLUDED``, or for an entry naming an overload that is not
registered. The table is written out by hand, not derived from the registry, so a new
overload needs a case (or a reason) before the suite passes.

Inputs are tiny float32 tensors, built fresh for each run (in-place overloads get their own
copy). ``test_autograd_registration`` is left out everywhere: in torch 2.13 it refuses any
device but CPU/CUDA/XPU before it looks at the kernel (docs/extending.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from tests.support.opcheck import UTILS

Args = tuple[tuple, dict]


@dataclass(frozen=True)
class Case:
    """One opcheck call of ``overload`` ("name.overload", "" for default) on ``build()``'s
    fresh mydev arguments; ``cpu_args`` maps them to CPU's where CPU has no kernel for
    those (so the comparison runs a call CPU can make)."""

    overload: str
    build: Callable[[], Args]
    utils: tuple[str, ...] = UTILS
    variant: str = ""
    cpu_args: Callable[[Args], Args] | None = None

    @property
    def id(self) -> str:
        return f"{self.overload}-{self.variant}" if self.variant else self.overload

    @property
    def op(self) -> Any:
        packet, _, overload = self.overload.partition(".")
        return getattr(getattr(torch.ops.aten, packet), overload or "default")


def _x() -> torch.Tensor:
    return torch.randn(3, 4).to("mydev")


def _row() -> torch.Tensor:
    return torch.randn(4).to("mydev")


def _cl() -> torch.Tensor:
    return torch.randn(2, 3, 4, 5).to("mydev").contiguous(memory_format=torch.channels_last)


def _out(dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.empty(0, dtype=dtype, device="mydev")


def _binary(name: str, scalar: float = 1.5, out: torch.dtype = torch.float32) -> list[Case]:
    """The functional, out= (``out`` the result dtype) and in-place overloads of a binary
    op or a comparison, each on a (3, 4) tensor and a broadcast row or a number."""
    t, s = ("Tensor_out", "Scalar_out") if out is torch.bool else ("out", "Scalar_out")
    cases = {
        f"{name}.Tensor": lambda: ((_x(), _row()), {}),
        f"{name}.Scalar": lambda: ((_x(), scalar), {}),
        f"{name}.{t}": lambda: ((_x(), _row()), {"out": _out(out)}),
        f"{name}.{s}": lambda: ((_x(), scalar), {"out": _out(out)}),
        f"{name}_.Tensor": lambda: ((_x(), _row()), {}),
        f"{name}_.Scalar": lambda: ((_x(), scalar), {}),
    }
    return [Case(overload, build) for overload, build in cases.items()]


def _reduction(name: str) -> Case:
    a = torch.randn(3, 4, 5)
    if name == "sum" or name == "mean":
        return Case(name, lambda: ((a.to("mydev"),), {}))
    kwargs = (lambda: {"out": _out()}) if name.endswith("out") else dict
    return Case(name, lambda: ((a.to("mydev"), [0, 2], True), kwargs()))


def _histc_on_cpu(args: Args) -> Args:
    """CPU has no integer histc: its float32 histc is the call compared."""
    (x, *rest), kwargs = args
    return (x.float(), *rest), {k: v.float() for k, v in kwargs.items()}


def _histc_input() -> torch.Tensor:
    return torch.tensor([0, 1, 1, 3, 7], dtype=torch.int32, device="mydev")


def _mode(rounding: str, out: bool = False, scalar: bool = False) -> Callable[[], Args]:
    def build() -> Args:
        kwargs: dict = {"rounding_mode": rounding}
        if out:
            kwargs["out"] = _out()
        return (_x(), 2.0 if scalar else _row()), kwargs

    return build


CASES: tuple[Case, ...] = (
    # -- elementwise: binary (ops/elementwise/families.py) --
    Case("add.Tensor", lambda: ((_x(), _row()), {"alpha": 2})),
    Case("add.out", lambda: ((_x(), _row()), {"out": _out()})),
    *[c for c in _binary("add") if c.overload not in ("add.Tensor", "add.out")],
    Case("sub.Scalar", lambda: ((_x(), 1.5), {})),
    *[c for c in _binary("sub") if c.overload != "sub.Scalar"],
    Case("mul.Tensor", lambda: ((_cl(), _cl()[0]), {}), variant="channels_last"),
    *_binary("mul"),
    *_binary("div", 2.0),
    Case("div.Tensor_mode", _mode("floor")),
    Case("div.Scalar_mode", _mode("trunc", scalar=True)),
    Case("div.out_mode", _mode("floor", out=True)),
    Case("div.Scalar_mode_out", _mode("floor", out=True, scalar=True)),
    Case("div_.Tensor_mode", _mode("trunc")),
    Case("div_.Scalar_mode", _mode("floor", scalar=True)),
    Case("floor_divide", lambda: ((_x(), _row()), {})),
    *[c for c in _binary("floor_divide", 2.0) if c.overload != "floor_divide.Tensor"],
    # -- elementwise: comparisons --
    *_binary("eq", 0.5, torch.bool),
    *_binary("ne", 0.5, torch.bool),
    *_binary("lt", 0.5, torch.bool),
    *_binary("le", 0.5, torch.bool),
    *_binary("gt", 0.5, torch.bool),
    *_binary("ge", 0.5, torch.bool),
    # -- elementwise: unary --
    Case("neg", lambda: ((_x(),), {})),
    Case("neg.out", lambda: ((_x(),), {"out": _out()})),
    Case("neg_", lambda: ((_x(),), {})),
    Case("abs", lambda: ((_x(),), {})),
    Case("abs.out", lambda: ((_x(),), {"out": _out()})),
    Case("abs_", lambda: ((_x(),), {})),
    # -- relu, clamp_min, threshold (ops/elementwise/relu.py) --
    Case("relu", lambda: ((_cl(),), {})),
    Case("relu_", lambda: ((_x(),), {})),
    Case("clamp_min", lambda: ((_x(), 0.5), {})),
    Case("clamp_min.out", lambda: ((_x(), 0.5), {"out": _out()})),
    Case("clamp_min_", lambda: ((_x(), 0.5), {})),
    Case("threshold", lambda: ((_x(), 0.1, 2.0), {})),
    Case("threshold.out", lambda: ((_x(), 0.1, 2.0), {"out": _out()})),
    Case("threshold_", lambda: ((_x(), 0.1, 2.0), {})),
    Case("threshold_backward", lambda: ((torch.randn(2, 3, 4, 5).to("mydev"), _cl(), 0), {})),
    Case(
        "threshold_backward.grad_input",
        lambda: ((torch.randn(2, 3, 4, 5).to("mydev"), _cl(), 0), {"grad_input": _out()}),
    ),
    # -- fill, where --
    Case("fill_.Scalar", lambda: ((_x(), 3.0), {})),
    Case("fill_.Tensor", lambda: ((_x(), torch.tensor(3.0).to("mydev")), {})),
    Case("zero_", lambda: ((_x(),), {})),
    Case("where.self", lambda: ((_x() > 0, _x(), _row()), {})),
    Case("where.self_out", lambda: ((_x() > 0, _x(), _row()), {"out": _out()})),
    # -- reductions (ops/reduction/aten.py) --
    *(
        _reduction(name)
        for name in ("sum.dim_IntList", "sum", "sum.IntList_out", "mean.dim", "mean.out")
    ),
    *(_reduction(name) for name in ("amax", "amin.out")),
    *(_reduction(name) for name in ("mean", "amax.out", "amin")),
    # -- histc: integer inputs run CUDA's rule; CPU's float32 histc is the truth --
    Case("histc", lambda: ((_histc_input(), 4, 0, 3), {}), cpu_args=_histc_on_cpu),
    Case(
        "histc.out",
        lambda: ((_histc_input(), 4, 0, 3), {"out": _out(torch.int32)}),
        cpu_args=_histc_on_cpu,
    ),
    # -- copies, conversions, factories --
    Case("clone", lambda: ((_x().t(),), {}), variant="transposed"),
    Case(
        "clone",
        lambda: ((_cl(),), {"memory_format": torch.contiguous_format}),
        variant="channels_last",
    ),
    Case("_to_copy", lambda: ((_x(),), {"dtype": torch.float64})),
    Case("copy_", lambda: ((torch.empty(3, 4, device="mydev"), _x().t().t()), {})),
    # the result is uninitialised memory: comparing its values after AOT tracing would
    # compare garbage (as on CPU); the schema and fake-tensor checks see its layout
    Case("empty_like", lambda: ((_cl(),), {}), UTILS[:2]),
    Case("_local_scalar_dense", lambda: ((torch.tensor([2.5]).to("mydev"),), {})),
    # test_schema left out: torch's SchemaCheckMode cannot bind an argument named ``from``
    # (a Python keyword); CPU's call never reaches the mode (test_opcheck.py pins this)
    Case(
        "_has_compatible_shallow_copy_type",
        lambda: ((_x(), torch.randn(2).to("mydev")), {}),
        UTILS[1:],
    ),
    # fake tensor only: SchemaCheckMode cannot read the ``Stream`` type (NameError), and
    # functionalization refuses an op that mutates ``Tensor(a!)`` and returns nothing, as
    # for CUDA's record_stream; CPU has no kernel to compare with
    Case("record_stream", lambda: ((_x(), torch.mydev.current_stream()), {}), ("test_faketensor",)),
)

EXCLUDED: dict[str, str] = {}
