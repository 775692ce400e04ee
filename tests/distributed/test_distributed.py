"""The mydev c10d backend (torch_mydev/distributed.py) in two real processes.

Truth: the same collective through plain gloo on CPU tensors in the same processes (values,
dtypes, shapes), and for DDP a single-process run on the concatenated batch on CPU. Spawned
children (not forked: after an OpenMP region a forked child's CPU ops can hang) write what
they saw to a file the test reads. One spawn (a module fixture) runs every scenario in one
process group, in order: a world costs seconds to start, and the checks are what differ. A
scenario that raises writes its traceback and ends the world (the other rank would wait in a
collective); the tests of the scenarios after it fail naming it.
"""

from __future__ import annotations

import contextlib
import gc
import tempfile
import time
import traceback
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.multiprocessing.spawn import ProcessException

import torch_mydev  # noqa: F401
from torch_mydev.distributed import BACKEND

WORLD = 2


def _collectives(rank: int, cpu_group: dist.ProcessGroup) -> dict:
    seen: dict[str, object] = {"backend": dist.get_backend_config()}

    def both(name, run):
        """Run ``run(device, group)`` on mydev (default group) and on CPU (gloo)."""
        mydev, cpu = run("mydev", None), run("cpu", cpu_group)
        seen[name] = (mydev, cpu)

    def moved(values):
        return [
            (v.device.type, v.cpu()) if isinstance(v, torch.Tensor) else moved(v) for v in values
        ]

    def all_reduce(device, group):
        results = []
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT):
            for dtype in (torch.float32, torch.int64, torch.float64):
                t = (torch.arange(6, dtype=dtype) + rank * 3).to(device)
                dist.all_reduce(t, op=op, group=group)
                results.append(t)
        strided = (torch.arange(12.0).reshape(3, 4) * (rank + 1)).to(device).t()
        dist.all_reduce(strided, group=group)
        results.append(strided)
        for dtype in (torch.bfloat16, torch.float16):
            t = (torch.arange(6, dtype=dtype) / 3 + rank * 1.25).to(device)
            dist.all_reduce(t, group=group)
            results.append(t)
        scalar = torch.tensor(2.5 + rank).to(device)  # 0-dim
        dist.all_reduce(scalar, op=dist.ReduceOp.MAX, group=group)
        results.append(scalar)
        return moved(results)

    def all_to_all(device, group):
        # rank 0 sends 1 element to itself and 3 to rank 1; rank 1 sends 2 and 2.
        sends = [[1, 3], [2, 2]][rank]
        receives = [[1, 2], [3, 2]][rank]
        t = (torch.arange(4.0) + 10 * rank).to(device)
        out = torch.full((sum(receives),), -1.0, device=device)
        dist.all_to_all_single(out, t, receives, sends, group=group)
        even = torch.empty(4, device=device)
        dist.all_to_all_single(even, t, group=group)
        return moved([out, even])

    def broadcast(device, group):
        t = (torch.arange(5.0) * (rank + 7)).to(device)
        dist.broadcast(t, src=1, group=group)
        return moved([t])

    def all_gather(device, group):
        t = (torch.arange(4.0) + 10 * rank).to(device)
        outs = [torch.empty(4, device=device) for _ in range(WORLD)]
        dist.all_gather(outs, t, group=group)
        flat = torch.empty(4 * WORLD, device=device)
        dist.all_gather_single(flat, t, group=group)
        return moved([*outs, flat])

    def reduce_scatter(device, group):
        t = (torch.arange(8.0) * (rank + 1)).to(device)
        out = torch.empty(4, device=device)
        dist.reduce_scatter_single(out, t, group=group)
        return moved([out])

    def coalesced(device, group):
        """``dist._coalescing_manager`` (no device: the group's ``*_coalesced`` methods)."""
        outs = [torch.empty(4, device=device), torch.empty(6, device=device)]
        ins = [torch.full((2,), float(rank), device=device), torch.arange(3.0).to(device) + rank]
        with dist._coalescing_manager(group=group, async_ops=True) as cm:
            for o, i in zip(outs, ins, strict=True):
                dist.all_gather_into_tensor(o, i, group=group)
        cm.wait()
        scattered = [torch.empty(2, device=device), torch.empty(3, device=device)]
        ins = [torch.arange(4.0).to(device) * (rank + 1), torch.arange(6.0).to(device) - rank]
        with dist._coalescing_manager(group=group, async_ops=True) as cm:
            for o, i in zip(scattered, ins, strict=True):
                dist.reduce_scatter_single(o, i, group=group)
        cm.wait()
        summed = [torch.full((2,), rank + 1.0, device=device), torch.ones(3, device=device)]
        with dist._coalescing_manager(group=group, async_ops=True) as cm:
            for t in summed:
                dist.all_reduce(t, group=group)
        cm.wait()
        return moved([*outs, *scattered, *summed])

    def send_recv(device, group):
        if rank == 0:
            dist.send(torch.arange(3.0).to(device), dst=1, group=group)
            return []
        r = torch.empty(3, device=device)
        dist.recv(r, src=0, group=group)
        return moved([r])

    def async_work(device, group):
        t = torch.full((3,), float(rank + 1), device=device)
        work = dist.all_reduce(t, async_op=True, group=group)
        work.wait()
        value = work.get_future().value()
        return moved([t, *value])

    for name, run in (
        ("all_reduce", all_reduce),
        ("broadcast", broadcast),
        ("all_gather", all_gather),
        ("reduce_scatter", reduce_scatter),
        ("all_to_all", all_to_all),
        ("coalesced", coalesced),
        ("send_recv", send_recv),
        ("async_work", async_work),
    ):
        both(name, run)
    return seen


def _ddp(rank: int, cpu_group: dist.ProcessGroup) -> dict:
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = _model()
    ddp = DistributedDataParallel(model.to("mydev"))
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    batch, target = _data()
    for _ in range(2):
        rows = slice(rank * 4, rank * 4 + 4)
        loss = torch.nn.functional.mse_loss(ddp(batch[rows].to("mydev")), target[rows].to("mydev"))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    grads_on = {p.grad.device.type for p in ddp.parameters()}
    return {"params": [p.detach().cpu() for p in model.parameters()], "grads_on": grads_on}


def _fsdp2(rank: int, cpu_group: dist.ProcessGroup) -> dict:
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = _model().to("mydev")
    fully_shard(model[0])
    fully_shard(model[2])
    fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batch, target = _data()
    for _ in range(2):
        rows = slice(rank * 4, rank * 4 + 4)
        loss = torch.nn.functional.mse_loss(
            model(batch[rows].to("mydev")), target[rows].to("mydev")
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    # Each rank's shard (dim 0), and the whole parameter through DTensor.full_tensor(): the
    # functional collectives, which find the C++ backend of the group for mydev.
    shards = [p.to_local() for p in model.parameters()]
    full = [p.full_tensor() for p in model.parameters()]
    return {
        "shards": [s.detach().cpu() for s in shards],
        "full": [f.detach().cpu() for f in full],
        "on": {s.device.type for s in shards + full}
        | {p.grad.to_local().device.type for p in model.parameters()},
    }


def _fsdp1(rank: int, where: str) -> dict:
    from torch.distributed.fsdp import FullyShardedDataParallel

    torch.manual_seed(0)
    # "cpu": FSDP1 moves the model itself, with param.data = param.to(device): that needs
    # _has_compatible_shallow_copy_type to say yes for a CPU parameter taking mydev data
    # (ops/tensor_type.py), as it does for CUDA.
    model = _model() if where == "cpu" else _model().to("mydev")
    fsdp = FullyShardedDataParallel(model, device_id=torch.device("mydev", 0))
    optimizer = torch.optim.SGD(fsdp.parameters(), lr=0.1)
    batch, target = _data()
    for _ in range(2):
        rows = slice(rank * 4, rank * 4 + 4)
        loss = torch.nn.functional.mse_loss(fsdp(batch[rows].to("mydev")), target[rows].to("mydev"))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with FullyShardedDataParallel.summon_full_params(fsdp):
        params = [p.detach().cpu() for p in fsdp.parameters()]
        on = {p.device.type for p in fsdp.parameters()}
    return {"params": params, "on": on}


def _functional(rank: int, cpu_group: dist.ProcessGroup) -> dict:
    """Functional collectives, ``_coalescing_manager(device=)``, Work results and futures on
    mydev; each with the same call on CPU tensors through gloo as the truth."""
    import torch.distributed._functional_collectives as fc

    mydev_group = dist.group.WORLD
    seen: dict[str, list] = {}

    def run(device, group):
        base = (torch.arange(8.0) * (rank + 1)).to(device)
        out = [
            fc.all_reduce(base, "sum", group).wait(),
            fc.all_gather_tensor(base[:3], 0, group).wait(),
            fc.reduce_scatter_tensor(base, "sum", 0, group).wait(),
            fc.all_to_all_single(base, None, None, group).wait(),
            fc.broadcast(base + 1, 1, group).wait(),
        ]
        a, b = base.clone(), base[::2].clone()
        # gloo has no startCoalescing: the CPU truth coalesces without a device.
        coalesce_on = torch.device(device) if device == "mydev" else None
        with dist._coalescing_manager(group=group, device=coalesce_on):
            dist.all_reduce(a, group=group)
            dist.all_reduce(b, group=group)
        out += [a, b]
        strided = torch.empty(4, 2, device=device).t()  # a non-contiguous output
        source = (torch.arange(16.0).reshape(4, 4) + rank).to(device)
        dist.reduce_scatter_tensor(strided, source, group=group)
        out.append(strided)
        work = dist.all_reduce(c := base.clone(), group=group, async_op=True)
        work.wait()
        out += [c, work.get_future().value()[0], work.result()[0]]
        return out

    for name, (device, group) in {
        "mydev": ("mydev", mydev_group),
        "cpu": ("cpu", cpu_group),
    }.items():
        seen[name] = [(t.device.type, t.cpu()) for t in run(device, group)]
    return seen


# Run in this order, each by both ranks in one process group (made with no backend named:
# init_process_group picks mydev's), with a gloo group of the same ranks for CPU truths.
_SCENARIOS = {
    "collectives": _collectives,
    "functional": _functional,
    "ddp": _ddp,
    "fsdp2": _fsdp2,
    "fsdp1-model-on-mydev": lambda rank, cpu_group: _fsdp1(rank, "mydev"),
    "fsdp1-model-on-cpu": lambda rank, cpu_group: _fsdp1(rank, "cpu"),
}


def _world(rank: int, init: str, out_dir: str) -> None:
    """One rank: every scenario in order, each result saved as ``<name><rank>.pt``; a
    scenario that raises saves ``{"error": traceback}`` and ends this rank."""
    # A timeout, so a rank whose partner died fails instead of waiting for ever.
    dist.init_process_group(
        init_method=init, rank=rank, world_size=WORLD, timeout=timedelta(seconds=120)
    )
    cpu_group = dist.new_group(backend="gloo")
    for name, scenario in _SCENARIOS.items():
        try:
            result = scenario(rank, cpu_group)
        except BaseException:
            torch.save({"error": traceback.format_exc()}, f"{out_dir}/{name}{rank}.pt")
            raise
        dist.barrier()
        result["memory_after"] = _settled_memory()
        torch.save(result, f"{out_dir}/{name}{rank}.pt")
    dist.destroy_process_group()


def _settled_memory(seconds: float = 5.0) -> tuple[int, int]:
    """(mydev bytes held, bytes live tensors own) once they agree, or after ``seconds``.

    A module with hooks is a cycle: its parameters die on a collection. And a finished
    collective's ``Work`` can hold its tensors a moment after ``barrier()`` returns: gloo's
    worker thread that ran it drops its reference last (a DDP bucket was once seen held:
    188 bytes, no live tensor). A leak still shows after the wait."""
    deadline = time.monotonic() + seconds
    while True:
        gc.collect()
        held, live = torch.mydev.memory_allocated(), _live_mydev_bytes()
        if held == live or time.monotonic() > deadline:
            return held, live
        time.sleep(0.01)


def _live_mydev_bytes() -> int:
    """The bytes of every storage that a live mydev tensor (one the collector tracks) owns."""
    storages = {}
    for o in gc.get_objects():
        try:
            if isinstance(o, torch.Tensor) and o.device.type == "mydev":
                storages[o.untyped_storage().data_ptr()] = o.untyped_storage().nbytes()
        except ReferenceError:  # a weakref proxy whose object is gone
            pass
    return sum(storages.values())


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> str:
    """The directory of every scenario's results, after one spawn of the whole world."""
    out_dir = tmp_path_factory.mktemp("world")
    # A rank that raised or died: the tests of the scenarios it never finished say so.
    with tempfile.NamedTemporaryFile() as f, contextlib.suppress(ProcessException):
        mp.spawn(_world, args=(f"file://{f.name}.init", str(out_dir)), nprocs=WORLD)
    return str(out_dir)


def _results(world: str, name: str) -> list[dict]:
    """Each rank's result of scenario ``name``; fails with the error of the scenario that
    ended the world, if any did before this one gave a result."""
    seen = []
    for rank in range(WORLD):
        path = f"{world}/{name}{rank}.pt"
        try:
            result = torch.load(path)
        except FileNotFoundError:
            errors = [torch.load(p).get("error") for p in sorted(Path(world).glob("*.pt"))]
            errors = [e for e in errors if e is not None]
            pytest.fail(f"scenario {name} never ran on rank {rank}; the world ended: {errors}")
        assert "error" not in result, result["error"]
        seen.append(result)
    return seen


def test_collectives_equal_gloo_on_cpu_and_stay_on_mydev(world):
    for seen in _results(world, "collectives"):
        backend = seen.pop("backend")  # init_process_group() with no backend picks ours
        assert f"mydev:{BACKEND}" in backend, backend
        seen.pop("memory_after")
        for name, (mydev, cpu) in seen.items():
            assert len(mydev) == len(cpu), name
            for (device, value), (cpu_device, expected) in zip(mydev, cpu, strict=True):
                assert (device, cpu_device) == ("mydev", "cpu"), name
                assert value.dtype == expected.dtype, name
                assert torch.equal(value, expected), (name, value, expected)


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 6, generator=g), torch.randn(8, 2, generator=g)


def _model() -> torch.nn.Sequential:
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))


def _one_process() -> torch.nn.Sequential:
    """The truth: two SGD steps in one process on the whole batch, on CPU."""
    torch.manual_seed(0)
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batch, target = _data()
    for _ in range(2):
        loss = torch.nn.functional.mse_loss(model(batch), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model


def test_ddp_matches_one_process_on_the_whole_batch(world):
    model = _one_process()
    for seen in _results(world, "ddp"):
        assert seen["grads_on"] == {"mydev"}
        for got, expected in zip(seen["params"], model.parameters(), strict=True):
            # DDP averages two half-batch means; one process takes one mean: same up to
            # float32 rounding in the reduction order.
            torch.testing.assert_close(got, expected.detach(), rtol=1e-6, atol=1e-6)


def test_fsdp2_fully_shard_matches_one_process_on_the_whole_batch(world):
    seen = _results(world, "fsdp2")
    assert all(s["on"] == {"mydev"} for s in seen)
    model = _one_process()
    for i, expected in enumerate(model.parameters()):
        full = torch.cat([s["shards"][i] for s in seen])
        assert seen[0]["shards"][i].shape[0] < expected.shape[0]  # really sharded
        torch.testing.assert_close(full, expected.detach(), rtol=1e-6, atol=1e-6)
        for s in seen:
            assert torch.equal(s["full"][i], full)


@pytest.mark.parametrize("where", ["mydev", "cpu"], ids=["model-on-mydev", "model-on-cpu"])
def test_fsdp1_matches_one_process_on_the_whole_batch(world, where):
    model = _one_process()
    for seen in _results(world, f"fsdp1-model-on-{where}"):
        assert seen["on"] == {"mydev"}
        for got, expected in zip(seen["params"], model.parameters(), strict=True):
            torch.testing.assert_close(got, expected.detach(), rtol=1e-6, atol=1e-6)


def test_functional_collectives_and_coalescing_equal_gloo_on_cpu(world):
    for seen in _results(world, "functional"):
        assert len(seen["mydev"]) == len(seen["cpu"]) == 11
        for (device, value), (_, expected) in zip(seen["mydev"], seen["cpu"], strict=True):
            assert device == "mydev"
            assert value.dtype == expected.dtype and value.stride() == expected.stride()
            assert torch.equal(value, expected), (value, expected)


def test_every_scenario_gives_its_memory_back(world):
    """After each scenario, the mydev memory held is exactly what live tensors own: the
    backend and the collectives leave nothing behind. All but FSDP1 leave no tensor alive;
    FSDP1 keeps its FlatParameter alive after the model dies, on CPU as well (its
    AccumulateGrad hooks), so its bytes stay until the process ends."""
    for name in _SCENARIOS:
        for held, live in (seen["memory_after"] for seen in _results(world, name)):
            assert held == live, (name, held, live)
            assert live == 0 or name.startswith("fsdp1"), (name, live)


def test_the_backend_is_registered_for_mydev():
    assert dist.Backend.default_device_backend_map["mydev"] == BACKEND
    assert BACKEND.upper() in dist.Backend._plugins


def test_the_default_backend_type_patch_is_in_place_where_torch_needs_it():
    """``_patches.patch_default_backend_type``: torch 2.13 gives a group made with no backend
    the default type GLOO (or NCCL) whatever the accelerator's backend is, and is patched;
    torch 2.14 resolves the type from the group's backends (CUSTOM for mydev's) and is not.
    Fails when a torch upgrade changes either side."""
    import inspect

    import torch.distributed.distributed_c10d as c10d

    helper = c10d._new_process_group_helper
    resolver = getattr(c10d, "_get_default_backend_type_for_backend_config", None)
    if resolver is None:
        assert helper._mydev_patched
        source = inspect.getsource(helper._mydev_original)
        assert "if backend == Backend.UNDEFINED:" in source
        assert "pg._set_default_backend(ProcessGroup.BackendType.GLOO)" in source
    else:
        assert not getattr(helper, "_mydev_patched", False)
        assert "_get_default_backend_type_for_backend_config(" in inspect.getsource(helper)
        config = c10d.BackendConfig(c10d.Backend.UNDEFINED)
        assert config.get_device_backend_map() == {"mydev": BACKEND}
        assert resolver(config) == c10d.ProcessGroup.BackendType.CUSTOM
