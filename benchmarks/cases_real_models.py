"""Benchmark cases of real models' training steps (issue 24, item 3): mydev against torch CPU.

The models are the real-model test module's (``tests/models/test_real_models.py``: GPT-2
with its tied head, Llama with rotary embeddings, grouped-query attention and SDPA, the
Mixtral and scatter MoE layers, the timm-style channels_last CNN with BatchNorm and drop
path), imported from ``tests/models`` so the bench times the code the tests check. One step
is the tests' step (``tests/models/step.py``): AdamW built over the parameters, then
``zero_grad``, forward, the model's own loss, backward, ``optimizer.step()``, eager, with
torch's default threads; mydev's and CPU's steps alternate (``harness.time_pair``).

Two sizes of each:

- ``tiny``: the tests' own configuration and dtype (GPT-2 in float64, as the test runs it);
- ``larger``: hidden 768 (12 heads; Llama 4 key/value heads, MLP 2048; GPT-2's MLP
  4 x 768), batch 32, sequence 32, 2 layers (the MoE model: its two MoE layers, 4 experts,
  top 2, expert MLP 1024), the tests' 64-token vocabulary, float32; the CNN (no hidden size):
  width 64, 32 x 32 images, batch 32. ``examples/cnn.py`` (batch 32, 32 x 32 images) and
  ``examples/transformer.py`` (d_model 768, 12 heads, feed-forward 3072, batch 32, sequence
  32) get a ``larger`` row here too; their tiny rows are ``cases_models.py``'s.

The test modules size their models by module constants (``gpt2.EMBED`` ...), read when a
model is built and in ``forward``; a larger row sets them for the row's duration
(``_sized``) and restores them.

``--smoke`` times two tiny models (Llama and the CNN) once and lists the others as skipped.
"""

from __future__ import annotations

import contextlib
import copy
import statistics
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType

import torch
from harness import ROOT, Mode, Results, Row, loop_seconds, spread, try_pair

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
import cnn
import transformer

from tests.models import convnet, gpt2, llama, mixtral

CASE = "real model step: "
TINY, LARGER = "tiny", "larger"
SMOKE_MODELS = ("llama", "convnet")
SKIPPED = "skipped (--smoke)"


@dataclass(frozen=True)
class Model:
    """A model of the test module at one size: the constants set while it runs, a builder,
    a batch (a dict of the model's keyword arguments) and a description of the size."""

    name: str
    module: ModuleType
    build: Callable[[], torch.nn.Module]
    batch: Callable[[torch.Generator], dict[str, torch.Tensor]]
    size: str
    constants: dict[str, int] = field(default_factory=dict)
    dtype: torch.dtype = torch.float32


def _convnet(width: int) -> Callable[[], torch.nn.Module]:
    return lambda: convnet.TinyEfficientNet(width=width).to(memory_format=torch.channels_last)


TINY_MODELS = (
    Model(
        "gpt2",
        gpt2,
        gpt2.GPT2LMHeadModel,
        gpt2.make_batch,
        "tiny: h32 L2 B2 T8 float64",
        dtype=torch.float64,
    ),
    Model("llama", llama, llama.LlamaForCausalLM, llama.make_batch, "tiny: h32 L2 B2 T8"),
    Model("mixtral", mixtral, mixtral.MoeForCausalLM, mixtral.make_batch, "tiny: h32 E4 B2 T8"),
    Model("convnet", convnet, _convnet(8), convnet.make_batch, "tiny: w8 8x8 B4"),
)


def _tokens(make_batch: Callable) -> Callable[[torch.Generator], dict]:
    return lambda generator: make_batch(generator, batch=32, length=32)


LARGER_MODELS = (
    Model(
        "gpt2",
        gpt2,
        gpt2.GPT2LMHeadModel,
        _tokens(gpt2.make_batch),
        "larger: h768 L2 B32 T32",
        {"EMBED": 768, "HEADS": 12, "POSITIONS": 32},
    ),
    Model(
        "llama",
        llama,
        llama.LlamaForCausalLM,
        _tokens(llama.make_batch),
        "larger: h768 L2 B32 T32",
        {"HIDDEN": 768, "HEADS": 12, "KV_HEADS": 4, "INTERMEDIATE": 2048, "MAX_POSITIONS": 32},
    ),
    Model(
        "mixtral",
        mixtral,
        mixtral.MoeForCausalLM,
        _tokens(mixtral.make_batch),
        "larger: h768 E4 ffn1024 B32 T32",
        {"HIDDEN": 768, "FFN": 1024},
    ),
    Model(
        "convnet",
        convnet,
        _convnet(64),
        lambda generator: convnet.make_batch(generator, batch=32),
        "larger: w64 32x32 B32",
        {"SIZE": 32},
    ),
)

EXAMPLES_LARGER = (
    ("examples/cnn.py", cnn, cnn.sgd, {"BATCH": 32, "SIZE": 32}, "larger: 32x32 B32"),
    (
        "examples/transformer.py",
        transformer,
        transformer.adamw,
        {"BATCH": 32, "SEQUENCE": 32, "D_MODEL": 768, "HEADS": 12, "FEEDFORWARD": 3072},
        "larger: h768 B32 T32",
    ),
)


def _heavy_repeats(mode: Mode) -> int:
    """Repeats of a larger row (one step each, about 1-3 s on two cores)."""
    return {"full": 5, "quick": 3}.get(mode.name, 1)


def _time_heavy(mode: Mode, out: Results, case: str, size: str, mydev, ref) -> None:
    """A larger row: one warm-up step each (the first compiles any missing loop, ``sync``
    mode), then ``_heavy_repeats`` single steps of each, alternating; medians and noise as
    ``harness.time_pair`` gives them (its 3 warm-ups and 0.05 s repeats are sized for
    calls of milliseconds)."""
    try:
        mydev()
        ref()
        a, b = [], []
        for _ in range(_heavy_repeats(mode)):
            a.append(loop_seconds(mydev, 1))
            b.append(loop_seconds(ref, 1))
    except (NotImplementedError, RuntimeError) as error:
        first = str(error).splitlines()[0]
        out.rows.append(Row(case, size, None, None, path=f"not run: {first[:60]}"))
        return
    noise = max(spread(a), spread(b)) if len(a) > 1 else None
    out.rows.append(
        Row(case, size, statistics.median(a), statistics.median(b), path="eager", noise=noise)
    )


@contextlib.contextmanager
def _sized(module: ModuleType, constants: dict[str, int]) -> Iterator[None]:
    """``module``'s constants set to ``constants`` inside the block, restored after it."""
    saved = {name: getattr(module, name) for name in constants}
    for name, value in constants.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def _stepper(model: torch.nn.Module, batch: dict, device: str) -> Callable[[], None]:
    """The tests' step (``tests/models/step.py``'s ``train_step``, without its hooks):
    AdamW (lr 1e-2) over the parameters, the model on ``device``, then each call
    ``zero_grad``, forward, the loss (the model's first output), backward, ``step``."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.to(device).train()
    batch = {key: value.to(device) for key, value in batch.items()}

    def step() -> None:
        optimizer.zero_grad()
        model(**batch)[0].backward()
        optimizer.step()

    return step


def _example_stepper(model, data, target, make_optimizer) -> Callable[[], None]:
    """``cases_models``' step of an example: zero_grad, forward, cross-entropy, backward,
    the example's optimizer."""
    optimizer = make_optimizer(model.parameters())
    model.train()

    def step() -> None:
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(data), target).backward()
        optimizer.step()

    return step


def _time_model(mode: Mode, out: Results, model: Model) -> None:
    with _sized(model.module, model.constants):
        torch.manual_seed(0)
        cpu = model.build().to(model.dtype)
        mine = copy.deepcopy(cpu)
        batch = model.batch(torch.Generator().manual_seed(0))
        batch = {k: v.to(model.dtype) if v.is_floating_point() else v for k, v in batch.items()}
        theirs = _stepper(cpu, batch, "cpu")
        ours = _stepper(mine, batch, "mydev")
        if model.size.startswith(TINY):
            try_pair(mode, out, CASE + model.name, model.size, ours, theirs, lambda: "eager")
        else:
            _time_heavy(mode, out, CASE + model.name, model.size, ours, theirs)
        del mine, ours


def _time_example(mode: Mode, out: Results, name, module, make_optimizer, constants, size):
    with _sized(module, constants):
        model, data, target = module.make_inputs()
        mydev_model = copy.deepcopy(model).to("mydev")
        ours = _example_stepper(mydev_model, data.to("mydev"), target.to("mydev"), make_optimizer)
        theirs = _example_stepper(model, data, target, make_optimizer)
        _time_heavy(mode, out, CASE + name, size, ours, theirs)
        del mydev_model, ours


def bench_real_models(mode: Mode, out: Results) -> None:
    """Each test-module model tiny, then each model and example larger."""
    smoke = mode.name == "smoke"
    for model in TINY_MODELS:
        if smoke and model.name not in SMOKE_MODELS:
            out.rows.append(Row(CASE + model.name, model.size, None, None, path=SKIPPED))
            continue
        _time_model(mode, out, model)
    if smoke:
        for model in LARGER_MODELS:
            out.rows.append(Row(CASE + model.name, model.size, None, None, path=SKIPPED))
        for name, *_, size in EXAMPLES_LARGER:
            out.rows.append(Row(CASE + name, size, None, None, path=SKIPPED))
        return
    for model in LARGER_MODELS:
        _time_model(mode, out, model)
    for example in EXAMPLES_LARGER:
        _time_example(mode, out, *example)
